/* Swap I/O scheduling (design note section 8; brief: SIOS).
 *
 * A pure data structure: the engine pushes requests and asks which one to
 * dispatch next; nothing here does I/O, so the dispatch order is tested
 * deterministically. Classes: IOSR_CLS_FG_FAULT (reads a foreground app's
 * fault waits for), IOSR_CLS_BG_FAULT, IOSR_CLS_READAHEAD, IOSR_CLS_WRITE.
 *
 * fifo: one queue in arrival order. sios: highest class first, FIFO within a
 * class; writes held back while a foreground fault read is queued or in
 * flight, at most depth/4 writes in flight, and the bound: a write waits at
 * most hold_max read dispatches or hold_ms milliseconds.
 *
 * Not thread-safe: owned by the engine thread.
 */
#ifndef IOSR_SCHED_SCHED_H
#define IOSR_SCHED_SCHED_H

#include <stdint.h>

#include "iosr.h"

enum { IOSR_CLS_FG_FAULT = 0, IOSR_CLS_BG_FAULT = 1, IOSR_CLS_READAHEAD = 2, IOSR_CLS_WRITE = 3,
       IOSR_NCLS = 4 };

typedef struct iosr_sreq {
  struct iosr_sreq *next;
  uint64_t enq_ns;
  uint64_t slot;
  uint32_t npages;
  uint32_t app;
  uint8_t cls;
  uint8_t write;
} iosr_sreq;

#define IOSR_SCHED_LOG 8192u

typedef struct iosr_sched {
  int policy;          /* IOSR_SCHED_FIFO / IOSR_SCHED_SIOS */
  unsigned depth;
  unsigned hold_max, hold_ms;
  iosr_sreq *head[IOSR_NCLS], *tail[IOSR_NCLS]; /* fifo uses head[0]/tail[0] */
  unsigned queued[IOSR_NCLS];
  unsigned inflight, inflight_writes, inflight_fg;
  unsigned reads_peak; /* most reads in flight at once so far (faults served in parallel) */
  unsigned passed;     /* reads dispatched while the oldest write waited */
  int paused;
  uint64_t dispatched; /* dispatch sequence */
  uint64_t forced_writes; /* writes released by the hold-back bound */
  iosr_dispatch_rec log[IOSR_SCHED_LOG];
  uint64_t log_head, log_tail; /* records [tail, head) not yet read */
} iosr_sched;

void iosr_sched_init(iosr_sched *s, int policy, unsigned depth, unsigned hold_max, unsigned hold_ms);
/* Changes the policy at run time; queued requests are kept (re-filed). */
void iosr_sched_set_policy(iosr_sched *s, int policy);
void iosr_sched_push(iosr_sched *s, iosr_sreq *r, uint64_t now_ns);
/* The request to dispatch now, removed from its queue and counted in
 * flight, or NULL (queue empty, depth reached, writes held, or paused). */
iosr_sreq *iosr_sched_next(iosr_sched *s, uint64_t now_ns);
/* A dispatched request completed. */
void iosr_sched_done(iosr_sched *s, const iosr_sreq *r);
/* Moves a queued read to the foreground-fault class (its app came to the
 * foreground or a fault now waits on it). Returns 1 if it was queued. */
int iosr_sched_promote(iosr_sched *s, iosr_sreq *r, uint8_t cls);
unsigned iosr_sched_queued(const iosr_sched *s);
/* Milliseconds until a held write must go (for the engine's timer), or -1. */
int iosr_sched_timeout_ms(const iosr_sched *s, uint64_t now_ns);

#endif
