/* I/O scheduling, unit level (issue 5, "Must be shown": with a writer
 * saturating the queue, sios dispatches waiting foreground reads ahead of
 * queued writes, checked on the dispatch order, deterministically). The
 * scheduler is a pure data structure: no I/O, no clock except the one given. */
#include <assert.h>
#include "util.h"
#include <string.h>

#include "common/opts.h"
#include "sched/sched.h"


static iosr_sreq reqs[512];
static unsigned nreq;

static iosr_sreq *mk(int cls, uint64_t slot) {
  iosr_sreq *r = &reqs[nreq++];
  memset(r, 0, sizeof *r);
  r->cls = (uint8_t)cls;
  r->write = cls == IOSR_CLS_WRITE;
  r->slot = slot;
  r->npages = 1;
  return r;
}

static int saturating_writer(int policy, int *first_read_pos, int *writes_before_last_read) {
  static iosr_sched s;
  nreq = 0;
  iosr_sched_init(&s, policy, 32, 1000000, 60000);
  uint64_t t = 1000;
  /* a writer has queued 100 writes; 8 are already at the device */
  for (int i = 0; i < 100; i++) iosr_sched_push(&s, mk(IOSR_CLS_WRITE, 10000 + i), t++);
  iosr_sreq *inflight[64];
  int ni = 0;
  iosr_sreq *r;
  while ((r = iosr_sched_next(&s, t))) inflight[ni++] = r;
  /* then the foreground app faults: 6 reads, plus read-ahead and a background fault */
  for (int i = 0; i < 6; i++) iosr_sched_push(&s, mk(IOSR_CLS_FG_FAULT, i), t++);
  iosr_sched_push(&s, mk(IOSR_CLS_READAHEAD, 100), t++);
  iosr_sched_push(&s, mk(IOSR_CLS_BG_FAULT, 200), t++);
  /* completions trickle in; each frees one place at the device */
  int pos = 0, last_read = -1, writes_seen = 0, writes_before_fg = 0;
  *first_read_pos = -1;
  int order_ok = 1, seen_ra = 0, seen_bg = 0, fg_left = 6;
  for (int step = 0; step < 400 && (iosr_sched_queued(&s) || ni); step++) {
    if (ni) iosr_sched_done(&s, inflight[--ni]);
    while ((r = iosr_sched_next(&s, t))) {
      if (!r->write) {
        if (*first_read_pos < 0) *first_read_pos = pos;
        last_read = pos;
        if (r->cls == IOSR_CLS_FG_FAULT) {
          fg_left--;
          writes_before_fg = writes_seen;
          if (seen_ra || seen_bg) order_ok = 0;
        }
        if (r->cls == IOSR_CLS_BG_FAULT) {
          seen_bg = 1;
          if (fg_left || seen_ra) order_ok = 0;
        }
        if (r->cls == IOSR_CLS_READAHEAD) {
          seen_ra = 1;
          if (fg_left) order_ok = 0;
        }
      }
      writes_seen += r->write;
      inflight[ni++] = r;
      pos++;
    }
  }
  (void)last_read;
  *writes_before_last_read = writes_before_fg; /* writes dispatched before the last foreground read */
  if (policy == IOSR_SCHED_SIOS && !order_ok) return -1;
  return pos;
}

int main(void) {
  int first, wb;
  /* sios: 8 writes are at the device (a quarter of the depth); from the
   * first completion on, the six foreground reads go before any of the 92
   * writes still queued, then the background fault, then read-ahead */
  int n = saturating_writer(IOSR_SCHED_SIOS, &first, &wb);
  CHECK(n == 100);
  printf("sios: first read is dispatch %d after the writer's, %d queued writes before the last foreground read\n",
         first, wb);
  CHECK(first == 0);
  CHECK(wb == 0);
  /* fifo: the reads wait behind all 100 writes (32 at the device, 68 queued) */
  n = saturating_writer(IOSR_SCHED_FIFO, &first, &wb);
  CHECK(n == 76);
  printf("fifo: first read is dispatch %d after the writer's (%d queued writes before the last foreground read)\n",
         first, wb);
  CHECK(first == 68 && wb == 68);

  /* the hold-back bound: a steady stream of foreground reads lets one write
   * through after every hold_max read dispatches */
  static iosr_sched s;
  nreq = 0;
  iosr_sched_init(&s, IOSR_SCHED_SIOS, 4, 3, 60000);
  for (int i = 0; i < 4; i++) iosr_sched_push(&s, mk(IOSR_CLS_WRITE, 500 + i), 1);
  int writes = 0, reads = 0, since = 0, max_gap = 0;
  for (int step = 0; step < 40; step++) {
    iosr_sched_push(&s, mk(IOSR_CLS_FG_FAULT, (uint64_t)step), 2);
    iosr_sreq *r = iosr_sched_next(&s, 2);
    if (!r) continue;
    if (r->write) {
      writes++;
      if (since > max_gap) max_gap = since;
      since = 0;
    } else {
      reads++;
      since++;
    }
    iosr_sched_done(&s, r);
  }
  printf("bound: %d writes among %d reads, at most %d reads between writes\n", writes, reads, max_gap);
  CHECK(writes == 4 && max_gap <= 3);
  CHECK(s.forced_writes == 4);

  /* the time bound: an old write goes even while foreground reads wait */
  nreq = 0;
  iosr_sched_init(&s, IOSR_SCHED_SIOS, 4, 0, 50);
  iosr_sched_push(&s, mk(IOSR_CLS_WRITE, 1), 0);
  iosr_sched_push(&s, mk(IOSR_CLS_FG_FAULT, 2), 0);
  iosr_sreq *r = iosr_sched_next(&s, 1000000); /* 1 ms: the read first */
  CHECK(r && !r->write);
  r = iosr_sched_next(&s, 1000000);
  CHECK(!r); /* held: a foreground read is in flight */
  CHECK(iosr_sched_timeout_ms(&s, 1000000) == 49);
  r = iosr_sched_next(&s, 51000000);
  CHECK(r && r->write);

  /* depth: never more than depth in flight; fifo keeps arrival order */
  nreq = 0;
  iosr_sched_init(&s, IOSR_SCHED_FIFO, 3, 32, 50);
  for (int i = 0; i < 10; i++) iosr_sched_push(&s, mk(i % 2 ? IOSR_CLS_WRITE : IOSR_CLS_FG_FAULT, (uint64_t)i), 0);
  for (int i = 0; i < 3; i++) CHECK(iosr_sched_next(&s, 0)->slot == (uint64_t)i);
  CHECK(!iosr_sched_next(&s, 0));

  /* switching the policy at run time keeps every queued request */
  iosr_sched_set_policy(&s, IOSR_SCHED_SIOS);
  CHECK(iosr_sched_queued(&s) == 7);
  iosr_sched_set_policy(&s, IOSR_SCHED_FIFO);
  CHECK(iosr_sched_queued(&s) == 7);
  printf("sched: ok\n");
  return 0;
}
