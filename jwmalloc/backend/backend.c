/* The page source (page_source.h) on closed sibling trees: the backend's
 * state, its lock and what guards the lock-free paths.
 *
 * Brief: "Backend: size-class-exact ranges", "Metadata". Design:
 * docs/design/backend.md. Locks: one backend lock (common/lock.h) over trees,
 * lists and the locked paths, taken by malloc and free paths only with a
 * try-lock; in front of it the per-class bitmaps (fast.h) and, when it is
 * held, the lock-free subdivision and root paths (section 7a); lookup and
 * mark_interior take none. No malloc or free ever waits.
 *
 * The backend's files, one concern each (backend_internal.h holds what they
 * share): this one the state, the checker's flag and the deferred hand-over;
 * options.c the JWMALLOC_* options; alloc.c allocation (jw_pages_alloc);
 * lockfree.c the allocation paths taken while the lock is held (section 7a,
 * steps 3-5); free.c free, merging and filing; classify.c lookups and
 * interior records; placement.c placement on demand (section 7b); stats.c
 * the figures; control.c settings, test hooks and fork; check.c the
 * invariant checks; release.c the release mechanism of reclamation.
 */
#include "../common/backoff.h"
#include "../common/test_hooks.h"
#include "backend_internal.h"

jw_backend_state jw_be = {.lock = JW_LOCK_INIT, .place_mode = JW_ATOMIC_INIT(JW_PLACE_UNSET)};

/* ---- lock-free operations and whole-tree checks exclude each other
 * (lf_enter, lf_exit: backend_internal.h). */

/* lf_enter for the paths that have no other way to go (a fresh root): while
 * the flag is up, spin and yield briefly, then sleep on the flag until the
 * checker lowers it (common/backoff.h). A checker preempted with the flag
 * up costs each waiter a few microseconds of CPU, not its time off the CPU. */
void jw_backend_lf_enter_wait(unsigned c) {
  jw_backoff b = JW_BACKOFF_INIT;
  while (!lf_enter(c)) jw_backoff_futex(&b, &jw_be.lf_checking, LF_SLEEPER);
}

static int lf_any_inflight(void) {
  for (unsigned c = 0; c < JW_NCLASSES; c++)
    if (jw_load(&jw_fast[c].inflight, JW_SEQ_CST) != 0) return 1; /* seq-cst: see above */
  return 0;
}

int jw_backend_lf_pause(int wait) {
  jw_store(&jw_be.lf_checking, LF_RAISED, JW_SEQ_CST); /* see above */
  /* Operations that entered before the flag finish without waiting for
   * anything; new ones back off. One of them may be descheduled half-way:
   * spin, yield, then sleep (nobody wakes the checker: it looks again). */
  jw_backoff b = JW_BACKOFF_INIT;
  while (lf_any_inflight()) {
    if (!wait) {
      jw_backend_lf_resume();
      return 0;
    }
    jw_backoff_pause(&b);
  }
  JW_TEST_POINT(JW_TP_BE_CHECKING);
  return 1;
}

void jw_backend_lf_resume(void) {
  /* Release (see lf_enter); an exchange, to see a sleeper's mark. */
  if (jw_xchg(&jw_be.lf_checking, 0, JW_RELEASE) == LF_SLEEPER) jw_futex_wake(&jw_be.lf_checking, 1 << 30);
}

/* ---- the hand-over of deferred frees (section 7c, "The deferred hand-over") ----
 * A free (or a lock-free split's remainder) that finds the lock held is
 * pushed on the deferred list for the holder to file. The holder drains the
 * list before it releases, but a push can land after that last drain, or
 * after the release itself (the pusher's try-lock failed just before it).
 * Nobody would then file the range until some later backend call takes the
 * lock: it stays counted live, out of the locked path's reach, never ages
 * (in a process gone quiet, for ever). So both sides look again: the holder
 * after its release, the pusher after its push (of a push and a release, at
 * least one side sees the other's store: the orders below make the one
 * that comes second in the list's modification order see the first through
 * happens-before: every change of the list is a read-modify-write), and
 * whichever sees ranges waiting and the lock free takes it (a try-lock:
 * nobody waits) and drains. A pusher that sees the lock held leaves them to
 * that holder, whose own look comes after its release. Returns the ranges
 * drained. */
unsigned jw_backend_deferred_help(void) {
  unsigned drained = 0;
#ifndef JW_MUTATE_NO_HANDOFF /* planted bug (tests/backend): the look again left out */
  /* The look is a read-modify-write (it reads the list's latest value), acq_rel:
   * a holder's release of the lock, then this, heads a release sequence of
   * the list that a later push (acq_rel) reads from, so that pusher sees the
   * lock released; a push earlier in the list's order is what this reads. */
  while (jw_fetch_or(&jw_be.deferred, 0, JW_ACQ_REL) != 0 && jw_lock_try(&jw_be.lock, JW_LK_BACKEND)) {
    drained += jw_backend_drain_deferred();
    jw_lock_release(&jw_be.lock);
  }
#endif
  return drained;
}

unsigned jw_backend_unlock(void) {
  unsigned drained = jw_backend_drain_deferred();
  JW_TEST_POINT(JW_TP_BE_UNLOCK); /* tests/backend/test_handoff.c */
  jw_lock_release(&jw_be.lock);
  return drained + jw_backend_deferred_help();
}

/* Pushes range r (head rec, state already DEFERRED*) on the deferred list. */
void jw_backend_deferred_push(jw_rid r, jw_rec *rec) {
  jw_rid top = jw_load(&jw_be.deferred, JW_RELAXED);
  do {
    jw_store(&rec->next, top, JW_RELAXED);
    /* Release: the drainer's acquire sees the link and the DEFERRED state;
     * acquire: the hand-over (jw_backend_deferred_help, which the pusher runs next). */
  } while (!jw_cas_weak(&jw_be.deferred, &top, r, JW_ACQ_REL, JW_RELAXED));
}
