/* Roots mapped ahead of need: prepared, unpublished 4 MiB roots that an
 * allocation finding the backend lock held (section 7a, step 5) takes
 * instead of calling mmap on its own path; the reclaim thread maps them.
 *
 * Brief: "Non-blocking interface" (a descheduled lock holder must not make
 * the others wait: here, on the kernel's address-space lock behind an mmap).
 * Design, footprint, rejected alternatives: docs/design/backend.md,
 * section 7a, "Roots mapped ahead". Option: JWMALLOC_AHEAD_ROOTS (0-4,
 * default 2; backend.h).
 *
 * Thread-safety: every function is lock-free and may be called from any
 * thread (the taker and the filler are counted in flight with lf_enter, so
 * a whole-tree check or fork prepare never sees a slot half-way);
 * allocation-free (jw_os_map underneath).
 */
#ifndef JW_BACKEND_AHEAD_H
#define JW_BACKEND_AHEAD_H

#include <stddef.h>
#include <stdint.h>

#include "../pages/record.h"

#define JW_AHEAD_MAX 4u /* slots: JWMALLOC_AHEAD_ROOTS is at most this */

/* The number of roots to keep mapped ahead (0: none), from now on. */
void jw_ahead_set_target(unsigned n);
unsigned jw_ahead_target(void);

/* Step 5's root: a root mapped ahead, published now (root map, counters),
 * its records in *recs, its head one BUSY leaf that the caller owns; or 0
 * when none is ready. Either way the demand is noted (the next cycle keeps
 * the set) and the reclaim thread is woken to fill the empty slots. The
 * caller is inside lf_enter. */
uintptr_t jw_ahead_take(jw_rec **recs);

/* Fills the empty slots up to the target (jw_roots_prepare: the system
 * calls happen here). Returns the roots mapped. Fills nothing while the
 * checker's flag is up. The reclaim thread's (jw_backend_ahead_fill). */
unsigned jw_ahead_fill(void);

/* Once per reclaim cycle (under the reclaimer token): with demand since the
 * last call, fills the empty slots when `fill` (the reclaim thread only: a
 * cycle run by a freeing thread maps nothing); without demand, gives one
 * ready root back (munmap); and any beyond the target. Returns the roots
 * still held. */
unsigned jw_ahead_cycle(int fill);

/* Roots held ready now (a racy figure outside a quiet point). */
unsigned jw_ahead_held(void);

/* Quiet point (checker's flag up, no lock-free operation in flight): checks
 * each ready root (one BUSY leaf of the whole root, not in the root map).
 * Returns the ready roots, or -1 with a message in err. */
int jw_ahead_check(char *err, size_t cap);

typedef struct jw_ahead_stats {
  uint64_t held;     /* roots ready now */
  uint64_t filled;   /* roots mapped ahead so far */
  uint64_t taken;    /* of them, taken by an allocation (step 5) */
  uint64_t returned; /* of them, given back unused */
} jw_ahead_stats;
void jw_ahead_get_stats(jw_ahead_stats *out);

#endif
