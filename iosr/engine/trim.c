/* Trims before a swap-out (docs/design/stack.md, "Free memory is not
 * written"). An app that answers trim requests (attach flag
 * IOSR_ATTACH_TRIMS: libjwmalloc under `jwmalloc run --swap`) is asked to
 * give back what its allocator holds free before a reclaim that takes it
 * starts: those pages then leave by REMOVE events, dropped without a write,
 * instead of being written like live ones. The reclaim is held until every
 * app asked has answered, or trim_wait_ms passed: a trim only saves writes,
 * the swap-out never depends on it, and an app that does not answer (busy,
 * stopped, gone) delays its reclaim by that much at most.
 *
 * Requests and answers carry an id; an answer that is not the one the app's
 * entry waits for (late, after a timeout) is ignored. A held reclaim keeps the
 * ids of its apps and its control connection's id: an app or a connection
 * gone meanwhile is skipped, never dereferenced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine_int.h"

typedef struct iosr_trim_wait {
  struct iosr_trim_wait *next;
  uint32_t conn, seq; /* the control connection that waits for the reclaim's answer */
  uint64_t bytes;     /* as asked (0: all) */
  uint64_t deadline_ns;
  unsigned n;
  uint32_t app[];     /* app ids */
} iosr_trim_wait;

static int pending(iosr_engine *e, uint32_t id) {
  iosr_app *a = iosr_engine_app(e, id);
  return a && a->state == IOSR_APP_ACTIVE && a->trim_id != 0;
}

int iosr_trim_hold(iosr_engine *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n, uint64_t bytes) {
  unsigned asked = 0;
  for (unsigned i = 0; i < n; i++) {
    iosr_app *a = apps[i];
    if (!a->trims || !a->conn) continue;
    if (!a->trim_id) {
      iosr_m_trim t = {++e->next_trim_id};
      if (iosr_conn_send(e, a->conn, IOSR_M_TRIM, 0, 0, &t, sizeof t, NULL, 0)) continue;
      a->trim_id = t.id;
      a->trim_sent_ns = iosr_now_ns();
    }
    asked++;
  }
  if (!asked || !e->set.trim_wait_ms) return 0;
  iosr_trim_wait *w = calloc(1, sizeof *w + n * sizeof w->app[0]);
  if (!w) return 0; /* out of memory: the reclaim goes on without waiting */
  w->conn = c->id;
  w->seq = seq;
  w->bytes = bytes;
  w->deadline_ns = iosr_now_ns() + (uint64_t)e->set.trim_wait_ms * 1000000u;
  w->n = n;
  for (unsigned i = 0; i < n; i++) w->app[i] = apps[i]->id;
  w->next = e->trim_waits;
  e->trim_waits = w;
  iosr_debug("reclaim held for the trims of %u of %u apps", asked, n);
  return 1;
}

/* Starts every held reclaim whose apps all answered, or whose time is up
 * (now != 0); the apps that did not answer are asked afresh next time. */
static void release(iosr_engine *e, uint64_t now) {
  for (iosr_trim_wait **pp = &e->trim_waits; *pp;) {
    iosr_trim_wait *w = *pp;
    int ready = now && now >= w->deadline_ns;
    if (!ready) {
      ready = 1;
      for (unsigned i = 0; i < w->n && ready; i++) ready = !pending(e, w->app[i]);
    }
    if (!ready) {
      pp = &w->next;
      continue;
    }
    *pp = w->next;
    iosr_app *apps[IOSR_MAX_APPS];
    unsigned n = 0;
    for (unsigned i = 0; i < w->n; i++) {
      iosr_app *a = iosr_engine_app(e, w->app[i]);
      if (!a || a->state != IOSR_APP_ACTIVE || !a->conn) continue;
      if (a->trim_id) {
        iosr_info("app %s did not answer its trim within %u ms; swapping out what is resident", a->name,
                  e->set.trim_wait_ms);
        a->trim_id = 0;
      }
      apps[n++] = a;
    }
    iosr_conn *c = iosr_conn_by_id(e, w->conn);
    if (c && n) iosr_conn_reclaim_now(e, c, w->seq, apps, n, w->bytes);
    else if (c) iosr_conn_reply(e, c, w->seq, ESRCH, 0, "the apps to reclaim are gone");
    free(w);
  }
}

void iosr_trim_answered(iosr_engine *e, iosr_app *a, uint64_t id) {
  if (!id || a->trim_id != id) return; /* late: its reclaim went on without it */
  a->trim_id = 0;
  iosr_info("app %s trimmed (request %llu, %.1f ms)", a->name, (unsigned long long)id,
            (double)(iosr_now_ns() - a->trim_sent_ns) / 1e6);
  release(e, 0);
}

uint64_t iosr_trim_timer(iosr_engine *e, uint64_t now) {
  if (!e->trim_waits) return 0;
  release(e, now);
  iosr_engine_pump(e); /* the end of the loop's turn: submit what a started reclaim queued */
  uint64_t due = 0;
  for (iosr_trim_wait *w = e->trim_waits; w; w = w->next)
    if (!due || w->deadline_ns < due) due = w->deadline_ns;
  return due;
}
