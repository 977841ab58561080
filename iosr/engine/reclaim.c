/* Reclaim jobs (brief: "Reclaim"; design note section 9): on request for
 * one app or all background apps, and by itself when the resident pages of
 * all regions pass the budget. Candidates are taken least recently used first
 * (a page's age is the engine tick of its last fault-in), ties in address
 * order; jobs run one swap-out step each in turn, at most reclaim_inflight
 * batches in flight in all.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/vmas.h"

static int cmp_cand_addr(const void *x, const void *y) {
  const iosr_cand *a = x, *b = y;
  if (a->app != b->app) return a->app < b->app ? -1 : 1;
  return a->vpn < b->vpn ? -1 : a->vpn > b->vpn;
}

static int cmp_cand(const void *x, const void *y) {
  const iosr_cand *a = x, *b = y;
  if (a->pri != b->pri) return a->pri < b->pri ? -1 : 1;
  if (a->age != b->age) return a->age < b->age ? -1 : 1;
  if (a->app != b->app) return a->app < b->app ? -1 : 1;
  return a->vpn < b->vpn ? -1 : a->vpn > b->vpn;
}

/* Drops the app's read-ahead probes: it is being reclaimed, so they were not
 * used in time (misses). */
static void drop_probes(iosr_engine *e, iosr_app *a) {
  while (a->probe_head >= 0) {
    iosr_probe *pr = &e->probes[a->probe_head];
    iosr_pte *p = iosr_pt_lookup(&a->pt, pr->vpn, NULL);
    if (p && p->state == IOSR_PTE_CACHED && p->aux == (uint16_t)a->probe_head) iosr_probe_drop(e, a, p, 1);
    else break; /* inconsistent: leave it to expiry */
  }
}

iosr_job *iosr_reclaim_start(iosr_engine *e, iosr_app **apps, unsigned napps, uint64_t pages, int budget) {
  size_t n = 0;
  for (unsigned k = 0; k < napps; k++) n += apps[k]->resident;
  iosr_job *j = calloc(1, sizeof *j);
  if (!j) return NULL;
  j->cand = malloc(sizeof *j->cand * (n ? n : 1));
  if (!j->cand) {
    free(j);
    return NULL;
  }
  for (unsigned k = 0; k < napps; k++) {
    iosr_app *a = apps[k];
    drop_probes(e, a);
    /* mlock'ed pages stay resident (userfaultfd does not report mlock; the
     * dropper's madvise would be refused on them anyway) */
    iosr_vma *locked = NULL;
    long nl = a->pid > 0 ? iosr_vmas_flagged(a->pid, 0, UINT64_MAX, IOSR_VMA_LOCKED, &locked) : 0;
    long hint = 0;
    for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
      iosr_span *sp = &a->pt.spans[i];
      for (uint64_t v = sp->start; v < sp->start + sp->n; v++) {
        iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
        int res = p->state == IOSR_PTE_PRESENT || p->state == IOSR_PTE_CLEAN;
        if (res && j->ncand < n && !(nl > 0 && iosr_vmas_at(locked, nl, v, &hint)))
          j->cand[j->ncand++] = (iosr_cand){budget && a->id == e->fg_app, p->age, a->id, 0, v};
      }
    }
    free(locked);
  }
  /* Least recently used first. Under the process policy a reclaim of whole
   * apps takes each app's pages in address order instead: all of them go, so
   * the order only decides the layout (and what stays if the area fills). */
  int whole = !pages && !budget && e->set.slot == IOSR_SLOT_PROCESS;
  qsort(j->cand, j->ncand, sizeof *j->cand, whole ? cmp_cand_addr : cmp_cand);
  j->id = ++e->next_job_id;
  j->target_pages = pages;
  j->budget = budget;
  j->next = NULL;
  iosr_job **pp = &e->jobs;
  while (*pp) pp = &(*pp)->next;
  *pp = j;
  return j;
}

void iosr_reclaim_forget_app(iosr_engine *e, uint32_t app) {
  (void)e;
  (void)app; /* candidates of a dead app are skipped when reached */
}

static int finished(const iosr_engine *e, const iosr_job *j) {
  (void)e;
  if (j->batches_inflight || j->stepping) return 0;
  if (j->err) return 1;
  if (j->target_pages && j->swapped_pages + j->zero_pages >= j->target_pages) return 1;
  return j->pos >= j->ncand && j->again_pos >= j->nagain;
}

void iosr_reclaim_job_done_maybe(iosr_engine *e, iosr_job *j) {
  iosr_job **pp = &e->jobs;
  while (*pp && *pp != j) pp = &(*pp)->next;
  if (!*pp || !finished(e, j)) return;
  *pp = j->next;
  /* a budget job that freed nothing backs off, unless another job (which
   * may have taken its pages) still makes room */
  if (j->budget && (j->err || (!j->swapped_pages && !j->zero_pages && !e->jobs)))
    e->budget_backoff_ns = iosr_now_ns() + 1000000000ull;
  if (j->waiter) {
    iosr_conn *c = iosr_conn_by_id(e, j->waiter);
    if (c) {
      char msg[160];
      int err = j->err;
      /* an app that does not answer: its reason, before the pages it kept */
      if (!err && j->waiting_pages && !j->swapped_pages && !j->zero_pages) err = ETIMEDOUT;
      if (!err && j->kept_pages && !j->swapped_pages && !j->zero_pages) err = EIO;
      if (err == ETIMEDOUT)
        snprintf(msg, sizeof msg, "the app has not answered its drops: %llu of its pages stay resident",
                 (unsigned long long)j->waiting_pages);
      else if (err == ENOSPC)
        snprintf(msg, sizeof msg, "swap area full: %llu pages swapped out, the rest stays resident",
                 (unsigned long long)j->swapped_pages);
      else if (err == EIO)
        snprintf(msg, sizeof msg, "write errors: %llu pages stay resident", (unsigned long long)j->kept_pages);
      else if (err == EAGAIN)
        snprintf(msg, sizeof msg, "restart grace period: no new swap slots yet");
      else
        snprintf(msg, sizeof msg, "%llu pages swapped out, %llu zero pages dropped%s",
                 (unsigned long long)j->swapped_pages, (unsigned long long)j->zero_pages,
                 j->waiting_pages ? "; some apps have not answered their drops" : "");
      iosr_conn_reply(e, c, j->waiter_seq, err, (j->swapped_pages + j->zero_pages) * 4096, msg);
    }
  }
  free(j->cand);
  free(j->again);
  free(j);
}

void iosr_reclaim_pump(iosr_engine *e) {
  for (;;) {
    uint32_t inflight = iosr_swapout_inflight(e);
    int progress = 0;
    for (iosr_job *j = e->jobs, *next; j; j = next) {
      next = j->next;
      if (inflight < e->set.reclaim_inflight && iosr_swapout_step(e, j)) {
        progress = 1;
        inflight = iosr_swapout_inflight(e);
      }
      iosr_reclaim_job_done_maybe(e, j);
    }
    if (!progress || inflight >= e->set.reclaim_inflight) break;
  }
}

static int bg_older(iosr_app *a, iosr_app *b) { return a->bg_since_ns < b->bg_since_ns; }

void iosr_reclaim_fg_changed(iosr_engine *e, iosr_app *was, iosr_app *now) {
  if (was) was->ws_pages = iosr_budget_app_charged(was);
  e->fg_room_pages = e->fg_room_base = 0;
  if (now) {
    /* what it held when it last left the foreground, less what it holds, and
     * no more than it can bring back (what it freed since is not expected) */
    e->fg_room_base = iosr_budget_app_charged(now);
    e->fg_room_pages = now->ws_pages > e->fg_room_base ? now->ws_pages - e->fg_room_base : 0;
    if (e->fg_room_pages > now->swapped) e->fg_room_pages = now->swapped;
  }
  /* a running budget job was sized for the foreground app before: it ends
   * with the batches it has in flight */
  for (iosr_job *j = e->jobs; j; j = j->next)
    if (j->budget) {
      uint64_t done = j->swapped_pages + j->zero_pages;
      j->target_pages = done ? done : 1;
    }
}

/* Pages the foreground app is still expected to bring back: what it held
 * when it last left the foreground, less what it has brought back since it
 * came to the foreground; nothing until it brings back a first page (a
 * switch away and back before it touches anything evicts nothing). */
static uint64_t fg_room_left(const iosr_engine *e) {
  const iosr_app *fg = iosr_engine_app((iosr_engine *)e, e->fg_app);
  if (!fg || fg->forked || !e->fg_room_pages) return 0;
  uint64_t now = iosr_budget_app_charged(fg), got = now > e->fg_room_base ? now - e->fg_room_base : 0;
  return got && got < e->fg_room_pages ? e->fg_room_pages - got : 0;
}

void iosr_reclaim_check_budget(iosr_engine *e) {
  if (!e->set.budget) return;
  uint64_t now = iosr_now_ns();
  if ((e->grace_until_ns && now < e->grace_until_ns) || now < e->budget_backoff_ns) return;
  uint64_t budget = e->set.budget / 4096;
  uint64_t low = e->set.budget_low ? e->set.budget_low / 4096 : budget - budget / 16;
  if (low >= budget) low = budget - budget / 16;
  /* charged pages (resident and being read) and the faults held for room
   * against the high watermark, halfway between low and the budget: the
   * budget is hard, so reclaim starts before it (design note section 9,
   * "Memory budget") */
  uint64_t charged = e->resident_total + e->reading_total + e->grave_total + e->nheld;
  /* and what the foreground app is expected to bring back still: room made
   * for it before its faults wait for it */
  uint64_t expect = fg_room_left(e);
  if (charged + expect <= budget - (budget - low) / 2) return;
  for (iosr_job *j = e->jobs; j; j = j->next)
    if (j->budget) return; /* one at a time */
  uint64_t need = charged > low ? charged - low : 0;
  uint64_t want = charged + expect > low ? charged + expect - low : 0;
  iosr_app *apps[IOSR_MAX_APPS];
  unsigned n = 0;
  uint64_t bg_pages = 0;
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (!a || a->state != IOSR_APP_ACTIVE || a->forked || !a->conn || a->id == e->fg_app || !a->resident) continue;
    apps[n++] = a;
    bg_pages += a->resident;
  }
  /* least recently backgrounded first (insertion sort: few apps) */
  for (unsigned i = 1; i < n; i++)
    for (unsigned k = i; k > 0 && bg_older(apps[k], apps[k - 1]); k--) {
      iosr_app *t = apps[k];
      apps[k] = apps[k - 1];
      apps[k - 1] = t;
    }
  /* the expected part only from the background: never the foreground
   * app's own pages to make room for its own */
  uint64_t from_bg = want < bg_pages ? want : bg_pages;
  if (from_bg > need) need = from_bg;
  if (!need) return;
  if (bg_pages < need) {
    /* not enough in the background: the foreground app's oldest pages too */
    iosr_app *fg = iosr_engine_app(e, e->fg_app);
    if (fg && fg->conn && fg->resident) apps[n++] = fg;
  }
  if (!n) return;
  if (e->full_warned && e->slots.used >= e->slots.nslots - e->slots.bad) return; /* full: nothing to do */
  iosr_job *j = iosr_reclaim_start(e, apps, n, need, 1);
  if (j) iosr_debug("budget: reclaiming %llu pages from %u apps", (unsigned long long)need, n);
}
