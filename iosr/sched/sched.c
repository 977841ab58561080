#include "sched.h"

#include <string.h>

#include "common/opts.h"

void iosr_sched_init(iosr_sched *s, int policy, unsigned depth, unsigned hold_max, unsigned hold_ms) {
  memset(s, 0, sizeof *s);
  s->policy = policy;
  s->depth = depth ? depth : 1;
  s->hold_max = hold_max;
  s->hold_ms = hold_ms;
}

static unsigned qi(const iosr_sched *s, unsigned cls) { return s->policy == IOSR_SCHED_FIFO ? 0 : cls; }

static void append(iosr_sched *s, unsigned q, iosr_sreq *r) {
  r->next = NULL;
  if (s->tail[q]) s->tail[q]->next = r;
  else s->head[q] = r;
  s->tail[q] = r;
}

void iosr_sched_push(iosr_sched *s, iosr_sreq *r, uint64_t now_ns) {
  r->enq_ns = now_ns;
  append(s, qi(s, r->cls), r);
  s->queued[r->cls]++;
}

void iosr_sched_set_policy(iosr_sched *s, int policy) {
  if (policy == s->policy) return;
  iosr_sreq *all = NULL, **tailp = &all;
  if (s->policy == IOSR_SCHED_FIFO) {
    all = s->head[0];
  } else {
    /* re-file in arrival order: merge the class queues by enqueue time */
    for (;;) {
      int best = -1;
      for (int c = 0; c < IOSR_NCLS; c++)
        if (s->head[c] && (best < 0 || s->head[c]->enq_ns < s->head[best]->enq_ns)) best = c;
      if (best < 0) break;
      iosr_sreq *r = s->head[best];
      s->head[best] = r->next;
      *tailp = r;
      tailp = &r->next;
    }
    *tailp = NULL;
  }
  memset(s->head, 0, sizeof s->head);
  memset(s->tail, 0, sizeof s->tail);
  s->policy = policy;
  for (iosr_sreq *r = all, *n; r; r = n) {
    n = r->next;
    append(s, qi(s, r->cls), r);
  }
}

static iosr_sreq *pop(iosr_sched *s, unsigned q) {
  iosr_sreq *r = s->head[q];
  s->head[q] = r->next;
  if (!s->head[q]) s->tail[q] = NULL;
  r->next = NULL;
  return r;
}

static iosr_sreq *dispatch(iosr_sched *s, unsigned q) {
  iosr_sreq *r = pop(s, q);
  s->queued[r->cls]--;
  s->inflight++;
  if (r->write) s->inflight_writes++;
  if (r->cls == IOSR_CLS_FG_FAULT) s->inflight_fg++;
  if (s->inflight - s->inflight_writes > s->reads_peak) s->reads_peak = s->inflight - s->inflight_writes;
  iosr_dispatch_rec *l = &s->log[s->log_head % IOSR_SCHED_LOG];
  l->seq = s->dispatched++;
  l->cls = r->cls;
  l->app = r->app;
  l->slot = r->slot;
  l->npages = r->npages;
  l->write = r->write;
  s->log_head++;
  if (s->log_head - s->log_tail > IOSR_SCHED_LOG) s->log_tail = s->log_head - IOSR_SCHED_LOG;
  return r;
}

iosr_sreq *iosr_sched_next(iosr_sched *s, uint64_t now_ns) {
  if (s->paused || s->inflight >= s->depth) return NULL;
  if (s->policy == IOSR_SCHED_FIFO) return s->head[0] ? dispatch(s, 0) : NULL;

  iosr_sreq *w = s->head[IOSR_CLS_WRITE];
  int reads_waiting = s->head[IOSR_CLS_FG_FAULT] || s->head[IOSR_CLS_BG_FAULT] || s->head[IOSR_CLS_READAHEAD];
  unsigned wcap = s->depth / 4 ? s->depth / 4 : 1;
  if (w && s->inflight_writes < wcap) {
    int fg_busy = s->head[IOSR_CLS_FG_FAULT] || s->inflight_fg;
    int forced = (s->hold_max && s->passed >= s->hold_max) ||
                 now_ns - w->enq_ns >= (uint64_t)s->hold_ms * 1000000u;
    if (forced || (!reads_waiting && !fg_busy)) {
      if (forced && (reads_waiting || fg_busy)) s->forced_writes++;
      s->passed = 0;
      return dispatch(s, IOSR_CLS_WRITE);
    }
  }
  for (unsigned c = 0; c < IOSR_CLS_WRITE; c++)
    if (s->head[c]) {
      if (w) s->passed++;
      return dispatch(s, c);
    }
  return NULL;
}

void iosr_sched_done(iosr_sched *s, const iosr_sreq *r) {
  s->inflight--;
  if (r->write) s->inflight_writes--;
  if (r->cls == IOSR_CLS_FG_FAULT) s->inflight_fg--;
}

int iosr_sched_promote(iosr_sched *s, iosr_sreq *r, uint8_t cls) {
  if (r->write || cls >= r->cls) return 0;
  unsigned q = qi(s, r->cls);
  iosr_sreq **pp = &s->head[q], *prev = NULL;
  while (*pp && *pp != r) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp) return 0;
  *pp = r->next;
  if (s->tail[q] == r) s->tail[q] = prev;
  s->queued[r->cls]--;
  r->cls = cls;
  s->queued[cls]++;
  if (s->policy == IOSR_SCHED_FIFO) {
    /* FIFO keeps arrival order: put it back where it was */
    r->next = prev ? prev->next : s->head[q];
    if (prev) prev->next = r;
    else s->head[q] = r;
    if (!r->next) s->tail[q] = r;
  } else {
    /* keep arrival order inside the new class */
    iosr_sreq **ip = &s->head[cls], *ipv = NULL;
    while (*ip && (*ip)->enq_ns <= r->enq_ns) {
      ipv = *ip;
      ip = &(*ip)->next;
    }
    r->next = *ip;
    *ip = r;
    if (!r->next) s->tail[cls] = r;
    (void)ipv;
  }
  return 1;
}

unsigned iosr_sched_queued(const iosr_sched *s) {
  unsigned n = 0;
  for (int c = 0; c < IOSR_NCLS; c++) n += s->queued[c];
  return n;
}

int iosr_sched_timeout_ms(const iosr_sched *s, uint64_t now_ns) {
  if (s->policy == IOSR_SCHED_FIFO || !s->head[IOSR_CLS_WRITE]) return -1;
  uint64_t due = s->head[IOSR_CLS_WRITE]->enq_ns + (uint64_t)s->hold_ms * 1000000u;
  if (due <= now_ns) return 0;
  return (int)((due - now_ns + 999999) / 1000000);
}
