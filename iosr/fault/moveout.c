/* Move-out (design note section 3, "Moved out"): once a batch's pages are
 * written, the engine moves each run of them out of the app into the app's
 * graveyard with UFFDIO_MOVE, which the kernel refuses while an event the
 * daemon has not read is pending: the move takes exactly the page the table
 * says is there, and no REMOVE over the app's memory is made. The dropper
 * then discards the graveyard range; until it confirms, those pages are
 * charged to the budget and their range is not used again. A run the kernel
 * will not move (a page shared with a fork child, a locked or read-only VMA,
 * an event pending) is tried again once the events are read, or stays
 * resident (swapout.c); the dropper's madvise never touches the app's memory
 * while move-out is usable.
 *
 * Graveyard pages are allocated first fit in a bitmap of IOSR_GRAVE_PAGES
 * bits. Owned by the engine thread (no locks).
 */
#include <errno.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "fault/uffd.h"

#define CHUNK 256u /* most pages moved into one graveyard range: several batches fit at once */

static int grave_used(const iosr_app *a, uint64_t k) { return (a->grave_used[k / 64] >> (k % 64)) & 1; }

static void grave_mark(iosr_app *a, uint64_t k, uint64_t n, int used) {
  for (uint64_t i = k; i < k + n; i++) {
    if (used) a->grave_used[i / 64] |= 1ull << (i % 64);
    else a->grave_used[i / 64] &= ~(1ull << (i % 64));
  }
}

/* The first of n free graveyard pages, now used; -1 when there is no room. */
static int64_t grave_alloc(iosr_app *a, uint64_t n) {
  for (uint64_t k = 0, run = 0; k < IOSR_GRAVE_PAGES; k++) {
    run = grave_used(a, k) ? 0 : run + 1;
    if (run == n) {
      grave_mark(a, k + 1 - n, n, 1);
      return (int64_t)(k + 1 - n);
    }
  }
  return -1;
}

/* Asks the dropper to discard graveyard pages [k, k + n), `charged` of them
 * counted against the budget until then; batch b (or none) waits for it. */
static void grave_drop(iosr_engine_s *e, iosr_app *a, iosr_batch *b, uint64_t k, uint64_t n, uint64_t charged) {
  iosr_drop *d = iosr_drop_new(a, ++a->drop_seq, a->grave + k, n);
  if (!d) iosr_die("out of memory discarding graveyard pages");
  d->grave = 1;
  d->charged = charged;
  d->batch = b;
  if (b) b->drops_pending++;
  a->grave_pages += charged;
  e->grave_total += charged;
  iosr_swapout_send_drop(e, a, d);
}

/* The n pages from vpn left the app: only in their slots now (all-zero
 * ones hold no slot and read zero). Threads waiting on them retry. */
static void moved_out(iosr_engine_s *e, iosr_app *a, iosr_job *j, uint64_t vpn, uint64_t n) {
  for (uint64_t v = vpn; v < vpn + n; v++) {
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    if (!p) continue;
    int zero = (p->flags & IOSR_PTE_F_ZEROPG) != 0;
    if (zero) iosr_pte_put_slot(e, p);
    iosr_app_set_state(e, a, p, zero ? IOSR_PTE_ZERO : IOSR_PTE_SWAPPED);
    iosr_swapout_count_out(a, j, p, zero);
  }
  e->moveout_pages += n;
  iosr_uffd_wake(a->uffd, vpn << 12, n << 12);
}

int iosr_moveout_usable(const iosr_engine_s *e, const iosr_app *a) {
  /* the kernel moves only within the caller's own address space
   * (UFFDIO_MOVE: EINVAL across processes): an engine inside the app's
   * process, never iosrd */
  return e->set.moveout && a->grave && a->uffd >= 0 && (a->uffd_features & UFFD_FEATURE_MOVE) && a->pid == getpid();
}

uint64_t iosr_moveout_run(iosr_engine_s *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n, int *why) {
  *why = -EOPNOTSUPP;
  if (!iosr_moveout_usable(e, a)) return 0;
  *why = -ENOSPC;
  if (a->grave_dirty) {
    /* pages may be left in it (a daemon that died, a discard undone): the
     * whole graveyard is discarded before it is used; this run waits for
     * it */
    int64_t k = grave_alloc(a, IOSR_GRAVE_PAGES);
    if (k < 0) return 0; /* ranges still awaiting their discard: later */
    a->grave_dirty = 0;
    grave_drop(e, a, NULL, 0, IOSR_GRAVE_PAGES, 0);
    e->moveout_no_room++;
    return 0;
  }
  iosr_job *j = b ? b->job : NULL;
  uint64_t out = 0;
  *why = 0;
  while (out < n) {
    uint64_t want = n - out < CHUNK ? n - out : CHUNK;
    int64_t k = grave_alloc(a, want);
    if (k < 0) {
      e->moveout_no_room++;
      *why = -ENOSPC;
      break;
    }
    uint64_t done = 0;
    int r = iosr_uffd_move(a->uffd, (a->grave + (uint64_t)k) << 12, (vpn + out) << 12, want << 12, &done);
    uint64_t m = done >> 12;
    if (m) {
      moved_out(e, a, j, vpn + out, m);
      grave_drop(e, a, b, (uint64_t)k, m, m);
      out += m;
    }
    grave_mark(a, (uint64_t)k + m, want - m, 0);
    /* a graveyard page in use (an mlockall populated it, a discard was
     * undone): the whole graveyard is discarded before it is used again */
    if (r == -EEXIST) a->grave_dirty = 1;
    if (r) {
      iosr_debug("app %s: move-out of %#llx+%llu stopped after %llu pages: %d", a->name,
                 (unsigned long long)((vpn + out - m) << 12), (unsigned long long)want, (unsigned long long)m, r);
      e->moveout_refused++;
      *why = r;
      break;
    }
  }
  return out;
}

/* Marks the graveyard's pages [vpn, vpn + n) (virtual pages) used or free;
 * a range not inside it is left alone. */
static void grave_range(iosr_app *a, uint64_t vpn, uint64_t n, int used) {
  if (a->grave && vpn >= a->grave && vpn - a->grave < IOSR_GRAVE_PAGES && n <= IOSR_GRAVE_PAGES - (vpn - a->grave))
    grave_mark(a, vpn - a->grave, n, used);
}

void iosr_moveout_discarded(iosr_engine_s *e, iosr_app *a, const iosr_drop *d, int err) {
  grave_range(a, d->start_vpn, d->n, 0);
  a->grave_pages -= d->charged;
  e->grave_total -= d->charged;
  /* not discarded (never ran, or refused): whatever is left there is
   * discarded before the graveyard is used again */
  if (err && err != ENOTCONN) a->grave_dirty = 1;
}

void iosr_moveout_hold(iosr_app *a, uint64_t vpn, uint64_t n) { grave_range(a, vpn, n, 1); }

void iosr_moveout_forget(iosr_engine_s *e, iosr_app *a) {
  e->grave_total -= a->grave_pages;
  a->grave_pages = 0;
}
