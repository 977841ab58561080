/* The page source (page_source.h) on closed sibling trees: allocation by
 * exact class or size-friendly split, free with merging of free siblings,
 * lock-free lookup, roots returned with their metadata.
 *
 * Brief: "Backend: size-class-exact ranges", "Metadata". Design:
 * docs/design/backend.md. Locks: one backend lock (common/lock.h) over trees,
 * lists and the locked paths, taken by malloc and free paths only with a
 * try-lock; in front of it the per-class bitmaps (fast.h) and, when it is
 * held, the lock-free subdivision and root paths (section 7a); lookup and
 * mark_interior take none. No malloc or free ever waits.
 */
#include <errno.h>
#include <stdlib.h>

#include "../common/backoff.h"
#include "../common/log.h"
#include "../common/options.h"
#include "../common/test_hooks.h"
#include "../os/os_mem.h"
#include "../reclaim/policy.h"
#include "../reclaim/reclaim.h"
#include "ahead.h"
#include "backend_internal.h"
#include "fast.h"
#include "lookup.h"
#include "meta.h"
#include "release.h"
#include "root_map.h"
#include "roots.h"
#include "tree.h"

jw_backend_state jw_be = {.lock = JW_LOCK_INIT, .place_mode = JW_ATOMIC_INIT(JW_PLACE_UNSET)};
jw_atomic_u32 jw_place_word = JW_ATOMIC_INIT(0);

_Static_assert(JW_LOOKUP_RANGE_CLASSES == JW_NCLASSES, "lookup.h knows the class count");

/* Statistics counters: relaxed, they order nothing. */
static inline void bump(jw_atomic_u64 *c, uint64_t d) { jw_fetch_add(c, d, JW_RELAXED); }

_Static_assert((int)JW_OPT_DEFAULT_PLACEMENT == (int)JW_PLACE_AUTO, "the options table's PLACEMENT default is auto");
_Static_assert(JW_AHEAD_MAX == 4u, "the options table's AHEAD_ROOTS maximum");

void jw_backend_init_once(void) {
  /* Acquire pairs with the release below: options are read before use. Two
   * threads may both initialize; they store the same values. */
  if (jw_load(&jw_be.inited, JW_ACQUIRE)) return;
  jw_options_init(); /* the table's values (common/options.h): once per process, also without the tiers */
  jw_store(&jw_be.check, jw_opt(JW_OPT_CHECK) ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_be.retain_roots, (uint32_t)jw_opt(JW_OPT_RETAIN_ROOTS), JW_RELAXED);
  jw_ahead_set_target((unsigned)jw_opt(JW_OPT_AHEAD_ROOTS)); /* section 7a, "Roots mapped ahead" */
  jw_store(&jw_be.lock_yield, (uint32_t)jw_opt(JW_OPT_LOCK_YIELD), JW_RELAXED); /* read at start-up here */
  /* The tiers set the placement mode at their initialization (default
   * auto); the backend alone (tests) takes the variable's value, and off
   * when it is unset or refused. */
  if (jw_load(&jw_be.place_mode, JW_RELAXED) == JW_PLACE_UNSET) {
    unsigned mode = JW_PLACE_OFF;
    if (jw_opt_origin(JW_OPT_PLACEMENT) == JW_ORIGIN_ENV) mode = (unsigned)jw_opt(JW_OPT_PLACEMENT);
    uint32_t unset = JW_PLACE_UNSET;
    /* Relaxed: a setting; the CAS only keeps a value the tiers set meanwhile. */
    if (jw_cas(&jw_be.place_mode, &unset, mode, JW_RELAXED, JW_RELAXED) && mode == JW_PLACE_ON)
      jw_pages_place_switch(true);
  }
  jw_reclaim_init(); /* its options set the reclamation mode (jw_backend_set_reclaim_mode) */
  jw_store(&jw_be.inited, 1, JW_RELEASE);
}

/* Entirely free roots kept mapped: the root class's free ranges in the lists
 * and in the root reserve (section 7c). */
static uint32_t free_roots(void) {
  uint32_t n = jw_load(&jw_be.bins.bin[JW_ROOT_CLASS].total, JW_RELAXED);
  return n + (uint32_t)jw_fast_count(JW_ROOT_CLASS);
}

static void note_root_mapped(void);

static inline int checking(void) { return jw_load(&jw_be.check, JW_RELAXED) != 0; }
static inline int placing(void) { return jw_place_on(); /* follows the switch (section 7b) */ }

/* ---- lock-free operations and whole-tree checks exclude each other
 * (lf_enter, lf_exit: backend_internal.h). */

/* lf_enter for the paths that have no other way to go (a fresh root): while
 * the flag is up, spin and yield briefly, then sleep on the flag until the
 * checker lowers it (common/backoff.h). A checker preempted with the flag
 * up costs each waiter a few microseconds of CPU, not its time off the CPU. */
static void lf_enter_wait(unsigned c) {
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

static void check_root(jw_rec *recs, uintptr_t base, const char *op) {
  char err[256];
  jw_tree t = {recs, JW_ROOT_GRANULES};
  /* A lock-free operation in flight may be half-way through a range of this
   * root: skip this check (the next one, or jw_backend_check_all, sees it). */
  if (!jw_backend_lf_pause(0)) return;
  int bad = jw_tree_check(&t, 1, err, sizeof err) != 0;
  jw_backend_lf_resume();
  if (bad) jw_fatal("backend invariant broken after %s in root %p: %s", op, (void *)base, err);
}

static inline unsigned kind_state(jw_range_kind k) {
  return k == JW_KIND_SMALL_SLAB ? JW_RS_LIVE_SMALL : k == JW_KIND_MID_SLAB ? JW_RS_LIVE_MID : JW_RS_LIVE_LARGE;
}


/* ---- allocation --------------------------------------------------------- */

/* Spins on a held lock before an allocation maps a root without it (a few
 * microseconds; a scheduling point each under the model checker). */
#ifdef JW_VERIFY
#define JW_LF_GRACE_SPINS 2
#else
#define JW_LF_GRACE_SPINS 128
#endif

/* A short bounded wait for the lock holder to finish (section 7a, step 4):
 * bounded, so a descheduled holder costs at most the grace; then the caller
 * goes another way (a lock-free path), it never waits on. */
static inline void lf_grace(void) {
  for (unsigned spin = 0; spin < JW_LF_GRACE_SPINS && jw_lock_is_held(&jw_be.lock); spin++) jw_cpu_relax();
}

/* A range [g, g+n) whose head just became live: slabs resolve from every
 * granule (page_source.h), so they get interior records. Relaxed stores: a
 * lookup of an address in the range follows the hand-over of the pointer,
 * which orders them (jw_backend_classify). */
static void made_live(jw_rec *recs, uint32_t g, uint32_t n, jw_range_kind kind) {
  if (kind != JW_KIND_LARGE)
    for (uint32_t i = 1; i < n; i++) jw_store(&recs[g + i].tag, jw_tag_interior(i), JW_RELAXED);
  bump(&jw_be.live_granules, n);
  bump(&jw_be.allocs, 1);
}

/* An allocation of n granules of memory given back (madvise): its pages
 * fault in again (the refault figures; reclamation.md 4a reads the bytes). */
static inline void note_refault(uint32_t n) {
  bump(&jw_be.allocs_refault, 1);
  bump(&jw_be.refault_granules, n);
}

static inline void *range_addr(uintptr_t base, uint32_t g) { return (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT)); }

/* Records of range id r's root. */
static inline jw_rec *rid_recs(jw_rid r) { return jw_meta_rid_rec(r) - jw_meta_rid_granule(r); }

static void deferred_push(jw_rid r, jw_rec *rec);


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
static unsigned deferred_help(void) {
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
  return drained + deferred_help();
}

/* ---- the lock-free paths (docs/design/backend.md, section 7a) ----------- */

/* Step 1: a range of class c from its bitmap. */
static void *fast_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
  if (jw_fast_slots(c) == 0 || !jw_fast_nonempty(c) || !lf_enter(c)) return NULL;
  void *p = NULL;
  jw_rid r = jw_fast_take(c);
  if (r) {
    /* We own the range: its head bits are ours, its boundary bits may
     * change under a neighbour's owner (read-modify-writes keep them). */
    jw_rec *recs = rid_recs(r);
    uint32_t g = jw_meta_rid_granule(r);
    uint32_t tag = jw_load(&recs[g].tag, JW_RELAXED); /* its flags are ours: the take's acquire ordered them */
    *zeroed = jw_tag_zeroed(tag);
    if (jw_tag_given_back(tag)) note_refault(jw_class_granules[c]);
    jw_rec_update(&recs[g], JW_REC_STATE_MASK | JW_REC_FREE_FLAGS, kind_state(kind));
    made_live(recs, g, jw_class_granules[c], kind);
    bump(&jw_be.fast_allocs, 1);
    if (c == JW_ROOT_CLASS) bump(&jw_be.roots_reused, 1); /* a reserved root (section 7c) */
    p = range_addr(jw_meta_rid_base(r), g);
  }
  lf_exit(c);
  return p;
}

/* A free remainder [g, g+n) of a lock-free split (head BUSY, owned by the
 * caller) goes into its class's bitmap, or when that is full onto the
 * deferred list for the next lock holder to file. */
static void lf_file_piece(uintptr_t base, jw_rec *recs, uint32_t g, uint32_t n) {
  unsigned c = jw_class_index(n);
  jw_rid r = jw_meta_rid(base, g);
  int i = jw_fast_reserve(c);
  if (i >= 0) {
    jw_rec_update(&recs[g], JW_REC_STATE_MASK, JW_RS_FREE_FAST);
    jw_fast_publish(c, i, r);
  } else {
    jw_rec_update(&recs[g], JW_REC_STATE_MASK, JW_RS_DEFERRED_FREE);
    deferred_push(r, &recs[g]);
  }
}

/* Carves class c out of the owned free range at g (head BUSY) with nested
 * steps only, so every record written lies inside the range; the carved
 * range becomes live, the remainders are filed lock-free. */
static void *lf_carve(uintptr_t base, jw_rec *recs, uint32_t g, unsigned c, jw_range_kind kind, bool *zeroed) {
  jw_tree t = {recs, JW_ROOT_GRANULES};
  uint32_t tag = jw_tree_tag(&t, g), n = jw_class_granules[c];
  *zeroed = jw_tag_zeroed(tag);
  if (jw_tag_given_back(tag)) note_refault(n);
  jw_tree_piece pieces[JW_TREE_MAX_PIECES];
  unsigned np = 0;
  if (jw_class_granules[jw_tag_class(tag)] != n)
    g = jw_tree_split_nested(&t, g, n, kind_state(kind), pieces, &np);
  else
    jw_tree_tag_update(&t, g, JW_REC_STATE_MASK | JW_REC_FREE_FLAGS, kind_state(kind));
  for (unsigned i = 0; i < np; i++) lf_file_piece(base, recs, pieces[i].pos, pieces[i].granules);
  bump(&jw_be.splits, np);
  made_live(recs, g, n, kind);
  return range_addr(base, g);
}

/* Step 3: the lock is held; a range of the smallest larger class that has
 * one in its bitmap, subdivided. */
static void *lf_split_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
  void *p = NULL;
  int entered = 0;
  for (unsigned k = c + 1; k < JW_NCLASSES && jw_fast_slots(k) != 0; k++) {
    if (!jw_fast_nonempty(k)) continue; /* a miss costs no read-modify-write */
    if (!entered && !(entered = lf_enter(c))) return NULL;
    jw_rid r = jw_fast_take(k);
    if (r == 0) continue;
    jw_rec *recs = rid_recs(r);
    uint32_t g = jw_meta_rid_granule(r);
    /* Owned (the slot was ours): FREE_FAST -> BUSY, for lookups and checks
     * a free range in transit. */
    jw_rec_update(&recs[g], JW_REC_STATE_MASK, JW_RS_BUSY);
    p = lf_carve(jw_meta_rid_base(r), recs, g, c, kind, zeroed);
    bump(&jw_be.lf_splits, 1);
    if (k == JW_ROOT_CLASS) bump(&jw_be.roots_reused, 1);
    break;
  }
  if (entered) lf_exit(c);
  return p;
}

/* Step 4: every bitmap empty and the lock held: recycle a range from the
 * deferred list. Taking the whole list with one exchange (acquire: the
 * pushers' states and links) makes its ranges ours: no ABA, no other taker.
 * The smallest range of class >= c is unlinked and carved (a deferred live
 * range is freed first: its interior records cleared, the figures); the
 * rest of the chain goes back with one compare-and-swap loop (release). */
static void *lf_deferred_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
  /* Relaxed peek: an empty list costs no read-modify-write. */
  if (jw_load(&jw_be.deferred, JW_RELAXED) == 0) return NULL;
  jw_rid list = jw_xchg(&jw_be.deferred, 0, JW_ACQUIRE);
  jw_rid best = 0, best_prev = 0, prev = 0, tail = 0;
  unsigned best_c = JW_NCLASSES;
  for (jw_rid r = list; r; r = jw_load(&jw_bins_rec(r)->next, JW_RELAXED)) {
    unsigned k = jw_tag_class(jw_load(&jw_bins_rec(r)->tag, JW_RELAXED)); /* ours: relaxed */
    if (k >= c && k < best_c) best = r, best_prev = prev, best_c = k;
    prev = tail = r;
  }
  void *p = NULL;
  if (best) {
    jw_rec *rec = jw_bins_rec(best);
    jw_rid next = jw_load(&rec->next, JW_RELAXED);
    if (best_prev) jw_store(&jw_bins_rec(best_prev)->next, next, JW_RELAXED);
    else list = next;
    if (tail == best) tail = best_prev;
    jw_store(&rec->next, 0, JW_RELAXED);
    jw_rec *recs = rid_recs(best);
    uint32_t g = jw_meta_rid_granule(best), n = jw_class_granules[best_c];
    unsigned st = jw_tag_state(jw_load(&rec->tag, JW_RELAXED));
    if (st != JW_RS_DEFERRED_FREE) { /* a live range's free, completed here */
      for (uint32_t i = 1; i < n; i++) jw_store(&recs[g + i].tag, 0, JW_RELAXED);
      jw_fetch_sub(&jw_be.live_granules, n, JW_RELAXED);
      bump(&jw_be.frees, 1);
    }
    jw_rec_update(rec, JW_REC_STATE_MASK, JW_RS_BUSY);
    p = lf_carve(jw_meta_rid_base(best), recs, g, c, kind, zeroed);
    bump(&jw_be.lf_recycled, 1);
  }
  if (list) { /* the rest goes back */
    jw_rid top = jw_load(&jw_be.deferred, JW_RELAXED);
    jw_rec *t = jw_bins_rec(tail);
    do {
      jw_store(&t->next, top, JW_RELAXED);
      /* Release: the drainer's acquire sees the chain's links and states;
       * acquire: the hand-over (deferred_help, which the caller runs). */
    } while (!jw_cas_weak(&jw_be.deferred, &top, list, JW_ACQ_REL, JW_RELAXED));
  }
  return p;
}

/* A fresh root, mapped without the lock (roots.c and meta.c are lock-free):
 * private until published with one BUSY leaf, which the caller owns; the
 * caller is inside lf_enter(), so that no whole-tree check sees the BUSY
 * root. Every root is mapped so, also when a locked allocation found
 * nothing free: an mmap inside the critical section made the hold a system
 * call long, and the return from it is where the scheduler preempts
 * (section 7a, "Roots are mapped outside the lock"). */
static uintptr_t root_map(jw_rec **recs) {
  uintptr_t base = jw_roots_map(JW_RS_BUSY, recs);
  if (base) note_root_mapped();
  return base;
}

/* Step 5: nothing to recycle and the lock held: a fresh root, carved
 * without the lock like a bitmap range (its remainders are filed
 * lock-free): a root mapped ahead when one is ready (ahead.h: no system
 * call on this path), else mapped here. Waits only while a whole-tree check
 * or a fork holds the checker's flag (jw_backend_lf_pause: checking mode,
 * jw_backend_check_all, fork prepare), asleep after a few microseconds
 * (lf_enter_wait). */
static void *lf_root_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
  lf_enter_wait(c);
  void *p = lf_deferred_alloc(c, kind, zeroed);
  if (p) {
    lf_exit(c);
    return p;
  }
  lf_exit(c);
  /* A root may have entered the reserve (or a larger range a bitmap)
   * during the grace. */
  if ((p = lf_split_alloc(c, kind, zeroed)) != NULL) return p;
  lf_enter_wait(c);
  jw_rec *recs;
  uintptr_t base = jw_ahead_take(&recs);
  if (base) note_root_mapped();
  else base = root_map(&recs);
  p = base ? lf_carve(base, recs, 0, c, kind, zeroed) : NULL;
  if (p) bump(&jw_be.lf_roots, 1);
  lf_exit(c);
  return p;
}

/* A root was just mapped: the load is at or near a peak. The live bytes
 * now are the trough detector's peak (reclamation.md 6a), which its own
 * samples (a few per second) would miss. Relaxed: a figure. Only in auto
 * mode, the one that reads it: a relaxed load of the live count, which
 * every allocation and free writes, is also a branch per value it may read
 * under the model checker (verification.md), where the mode is off. */
static void note_root_mapped(void) {
  if (jw_load(&jw_be.place_mode, JW_RELAXED) != JW_PLACE_AUTO) return; /* a setting */
  uint64_t l = jw_load(&jw_be.live_granules, JW_RELAXED), p = jw_load(&jw_be.peak_live_granules, JW_RELAXED);
  while (l > p && !jw_cas_weak(&jw_be.peak_live_granules, &p, l, JW_RELAXED, JW_RELAXED)) {
  }
}

uint64_t jw_backend_peak_live(int reset) {
  uint64_t p = jw_load(&jw_be.peak_live_granules, JW_RELAXED) * JW_GRANULE;
  if (reset) jw_store(&jw_be.peak_live_granules, jw_load(&jw_be.live_granules, JW_RELAXED), JW_RELAXED);
  return p;
}

/* Placement (section 7b): how many classes from the requested one up the
 * locked path compares by root: two doublings, so a range at most four
 * times the request is split for a lower root. Wider windows mapped more at
 * the peak (larger ranges split for small requests fragment the trees). */
#define JW_PLACE_WINDOW 8u

/* Lock held: the root placement now fills (section 7b). */
static inline void set_place_root(uint32_t root) { jw_store(&jw_be.place_root, root, JW_RELAXED); /* a hint: see fast_free */ }

/* Lock held: class c from the lists, a reserved root or a larger range;
 * from `spare` (a fresh root the caller mapped and owns, records
 * spare_recs) when not 0. Returns NULL with *need_root set when nothing is
 * free and there is no spare: the caller maps one with the lock given back
 * and calls again. */
static void *alloc_locked(unsigned c, jw_range_kind kind, bool *zeroed, uintptr_t spare, jw_rec *spare_recs,
                          bool *need_root) {
  uint32_t n = jw_class_granules[c];
  int k = spare ? -1 : jw_bins_find(&jw_be.bins, c);
  uintptr_t base;
  jw_rec *recs;
  uint32_t g;
  jw_rid r0 = 0;
  if (spare) {
    /* Mapped for this call while the lock was given back: used even if a
     * free range came meanwhile (rare; the root's rest is filed below). */
  } else if (k < 0 && (r0 = jw_fast_take(JW_ROOT_CLASS)) != 0) {
    /* A reserved root (section 7c): ours now; its head becomes a free
     * range of the active buffer for the split below. */
    jw_rec_update(jw_bins_rec(r0), JW_REC_STATE_MASK, JW_RS_FREE_BUF0 + jw_bins_active(&jw_be.bins));
    bump(&jw_be.roots_reused, 1);
  } else if (k < 0 && jw_fast_granules() != 0) {
    /* Free ranges wait in the bitmaps: file them (they merge) before
     * mapping a root. */
    jw_backend_flush_fast();
    k = jw_bins_find(&jw_be.bins, c);
  }
  if (r0 != 0) {
    base = jw_meta_rid_base(r0);
    recs = rid_recs(r0);
    g = 0;
    k = JW_ROOT_CLASS;
    if (placing()) set_place_root(jw_bins_rank(r0));
  } else if (spare) {
    /* A fresh root has no physical pages: its remainders are filed as
     * released (docs/design/reclamation.md, section 2). Owned (BUSY) until
     * now: its head becomes a released free root for the split below. */
    base = spare;
    recs = spare_recs;
    jw_rec_update(&recs[0], JW_REC_STATE_MASK, JW_RS_FREE_RELEASED);
    g = 0;
    k = JW_ROOT_CLASS;
    if (placing()) set_place_root(jw_bins_rank(jw_meta_rid(base, 0)));
  } else if (k < 0) {
    *need_root = true;
    return NULL;
  } else {
    unsigned buf;
    jw_rid r;
    if (placing()) {
      /* Placement (section 7b): the lowest root among the ranges of the
       * next JW_PLACE_WINDOW classes, even where that means a larger split
       * or faulting a released range in, so that the ranges of higher roots
       * stay free, merge and go back with their roots. */
      unsigned kk = (unsigned)k;
      r = jw_bins_lowest(&jw_be.bins, (unsigned)k, JW_PLACE_WINDOW, &kk);
      k = (int)kk;
      jw_bins_remove(&jw_be.bins, r, kk);
      set_place_root(jw_bins_rank(r));
    } else {
      r = jw_bins_pop(&jw_be.bins, (unsigned)k, &buf);
    }
    base = jw_meta_rid_base(r);
    recs = jw_root_map_get((const void *)base);
    g = jw_meta_rid_granule(r);
  }
  jw_tree t = {recs, JW_ROOT_GRANULES};
  uint32_t tag = jw_tree_tag(&t, g);
  unsigned st = kind_state(kind);
  *zeroed = jw_tag_zeroed(tag);
  if (jw_tag_given_back(tag)) note_refault(n); /* its pages fault back in */
  if ((unsigned)k != c) {
    unsigned buf = jw_tag_state(tag) - JW_RS_FREE_BUF0; /* remainders stay in the range's buffer */
    jw_tree_piece pieces[JW_TREE_MAX_PIECES];
    unsigned np;
    g = jw_tree_split(&t, g, n, st, pieces, &np);
    for (unsigned i = 0; i < np; i++)
      jw_bins_push(&jw_be.bins, jw_meta_rid(base, pieces[i].pos), jw_class_index(pieces[i].granules), buf);
    bump(&jw_be.splits, np);
  } else {
    jw_tree_tag_update(&t, g, JW_REC_STATE_MASK | JW_REC_FREE_FLAGS, st);
  }
  made_live(recs, g, n, kind);
  if (checking()) check_root(recs, base, "alloc");
  return (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT));
}

/* The locked path found nothing free: a root mapped with the lock given
 * back, then split under the lock as before when it is free again, else
 * carved without it as in step 5 (without counting as step 5: no holder was
 * in the way when the allocation looked). */
static void *root_alloc(unsigned c, jw_range_kind kind, bool *zeroed, unsigned *drained) {
  lf_enter_wait(c);
  jw_rec *recs;
  uintptr_t base = root_map(&recs);
  void *p = NULL;
  bool locked = base != 0 && jw_lock_try(&jw_be.lock, JW_LK_BACKEND);
  if (locked) {
    /* The lock now keeps whole-tree checks and fork away from the BUSY
     * root, and out of flight the split below gets its per-operation
     * check (checking mode). */
    lf_exit(c);
    bool need_root = false; /* not set: the spare serves */
    *drained += jw_backend_drain_deferred();
    p = alloc_locked(c, kind, zeroed, base, recs, &need_root);
    *drained += jw_backend_unlock();
    return p;
  }
  if (base != 0) p = lf_carve(base, recs, 0, c, kind, zeroed);
  lf_exit(c);
  if (base != 0) *drained += deferred_help(); /* the remainders' hand-over */
  return p;
}

void *jw_pages_alloc(size_t granules, jw_range_kind kind, uint32_t *out_granules, bool *out_zeroed) {
  if (granules == 0 || granules > JW_ROOT_GRANULES || kind < JW_KIND_SMALL_SLAB || kind > JW_KIND_LARGE) {
    errno = ENOMEM;
    return NULL;
  }
  jw_backend_init_once();
  unsigned c = jw_class_index_up((uint32_t)granules);
  bool zeroed = false;
  /* Section 7a: the class's bitmap, the lists under a try-lock, a larger
   * class's bitmap range subdivided, a fresh root; none waits. */
  void *p = fast_alloc(c, kind, &zeroed);
  for (int round = 0; p == NULL && round < 2; round++) {
    /* Before the last resort (a fresh root), a short bounded grace: most
     * critical sections are list work of well under a microsecond, and a
     * root mapped for one allocation scatters survivors over more roots.
     * While placement is on, the grace comes before the lock-free
     * subdivision too: that takes the smallest larger bitmap range wherever
     * its root lies, not the lowest root the lists would give (section 7b,
     * "Placement and the lock-free paths"). */
    bool locked;
    if (round == 1 && jw_load(&jw_be.lock_yield, JW_RELAXED)) { /* a setting: relaxed */
      /* Opt-in: the grace and one yield before a fresh root (a holder
       * preempted on this CPU may finish; concurrency.md, "One yield before
       * a fallback"). */
      locked = jw_lock_try_after_yield(&jw_be.lock, JW_LK_BACKEND, JW_LF_GRACE_SPINS);
    } else {
      if (round == 1 || placing()) lf_grace();
      locked = jw_lock_try(&jw_be.lock, JW_LK_BACKEND);
    }
    if (locked) {
      unsigned drained = jw_backend_drain_deferred();
      bool need_root = false;
      p = alloc_locked(c, kind, &zeroed, 0, NULL, &need_root);
      drained += jw_backend_unlock();
      if (need_root) p = root_alloc(c, kind, &zeroed, &drained);
      /* Deferred frees filed here are frees too: their memory must age. */
      if (drained) jw_reclaim_after_free();
      break;
    }
    /* Held: subdivide a larger bitmap range; then try the lock once more
     * (a short critical section may have ended) before mapping a root. */
    if (round == 0) p = lf_split_alloc(c, kind, &zeroed);
    else p = lf_root_alloc(c, kind, &zeroed);
    /* A lock-free path may have pushed remainders (or a recycled list's
     * rest) on the deferred list: the hand-over's look again. */
    if (deferred_help()) jw_reclaim_after_free();
  }
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (out_granules) *out_granules = jw_class_granules[c];
  if (out_zeroed) *out_zeroed = zeroed;
  return p;
}

/* ---- free --------------------------------------------------------------- */

/* Merging: what the pieces of the range being filed were (policy.h). */
typedef struct merge_ctx {
  uintptr_t base;
  unsigned pieces;
  unsigned given_back;    /* the range being filed holds memory given back */
  uint64_t after_release; /* merges that joined memory already given back */
} merge_ctx;

/* A free sibling about to be merged leaves its list. */
static int absorb(void *arg, uint32_t pos, uint32_t tag) {
  merge_ctx *m = arg;
  jw_rid r = jw_meta_rid(m->base, pos);
  unsigned piece;
  if (jw_tag_state(tag) == JW_RS_FREE_FAST) {
    /* In a bitmap: merge only if we win its slot (section 7a, "claim"), of
     * the class the leaf test read (tree.h): a range that took its place
     * since sits in another class's slots. */
    if (!jw_fast_claim(jw_tag_class(tag), r)) return 0;
    tag = jw_load(&jw_bins_rec(r)->tag, JW_RELAXED); /* now ours: its flags as they are */
    piece = jw_tag_zeroed(tag) ? JW_PIECE_RELEASED : JW_PIECE_FRESH;
  } else {
    unsigned buf = jw_bins_remove(&jw_be.bins, r, jw_tag_class(tag));
    piece = buf == JW_BUF_RELEASED ? JW_PIECE_RELEASED
            : buf == jw_bins_active(&jw_be.bins) ? JW_PIECE_ACTIVE
                                                 : JW_PIECE_STANDBY;
  }
  if (m->given_back || jw_tag_given_back(tag)) m->after_release++;
  m->given_back |= jw_tag_given_back(tag);
  m->pieces |= piece;
  return 1;
}

void jw_backend_set_reclaim_mode(int age_roots, unsigned policy) {
  /* Read under the lock; set once at initialization or by tests: relaxed. */
  jw_store(&jw_be.age_roots, age_roots ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_be.policy, policy, JW_RELAXED);
}

/* Merges the range [g, g+n) of a root (head in a free or in-transit state)
 * with every free sibling leaf while one exists (the merged size is a class
 * by closure), then files it in the buffer the countdown rule names
 * (reclaim/policy.h: a fresh range that merged nothing starts its countdown
 * in active; a merge restarts or keeps it by policy), or, with reclamation
 * off, gives the root back when it became entirely free beyond the retained
 * count. */
static int reserve_root(uintptr_t base, jw_rec *recs);

void jw_backend_put_free(uintptr_t base, jw_rec *recs, uint32_t g, uint32_t n, unsigned pieces) {
  jw_tree t = {recs, JW_ROOT_GRANULES};
  uint64_t merges = 0;
  merge_ctx m = {base, pieces, jw_tag_given_back(jw_tree_tag(&t, g)), 0};
  g = jw_tree_coalesce(&t, g, &n, absorb, &m, &merges);
  bump(&jw_be.merges, merges);
  bump(&jw_be.merges_after_release, m.after_release);
  unsigned c = jw_class_index(n);
  if (n == t.granules && !jw_load(&jw_be.age_roots, JW_RELAXED) &&
      free_roots() >= jw_load(&jw_be.retain_roots, JW_RELAXED)) {
    jw_roots_unmap(base, recs);
    return;
  }
  unsigned active = jw_bins_active(&jw_be.bins);
  jw_filing f = jw_reclaim_filing(m.pieces, jw_load(&jw_be.policy, JW_RELAXED));
  if (n == t.granules && (m.pieces & JW_PIECE_FRESH) && f != JW_FILE_RELEASED && reserve_root(base, recs))
    return;
  unsigned buf = f == JW_FILE_RELEASED ? JW_BUF_RELEASED : f == JW_FILE_STANDBY ? active ^ 1u : active;
  jw_rid r = jw_meta_rid(base, g);
  jw_bins_push(&jw_be.bins, r, c, buf);
  if (placing() && jw_bins_rank(r) < jw_load(&jw_be.place_root, JW_RELAXED)) set_place_root(jw_bins_rank(r));
  if (checking() && jw_root_map_get((const void *)base) != NULL) check_root(recs, base, "filing");
}

/* Lock held: an entirely free, backed root that a free just emptied goes
 * into the root reserve (section 7c) when it has room, where allocations
 * that find the lock held reach it. Its countdown starts at the next flush
 * (filed as an active piece, not a fresh one: it does not come back here). */
static int reserve_root(uintptr_t base, jw_rec *recs) {
  int i = jw_fast_reserve(JW_ROOT_CLASS);
  if (i < 0) return 0;
  jw_rec_update(&recs[0], JW_REC_STATE_MASK, JW_RS_FREE_FAST);
  jw_fast_publish(JW_ROOT_CLASS, i, jw_meta_rid(base, 0));
  bump(&jw_be.roots_reserved, 1);
  return 1;
}

/* How free_locked finds the range: live (a plain or an aged free), or on the
 * deferred list (its state says whether it was aged). */
enum { FREE_LIVE, FREE_DEFERRED, FREE_LIVE_AGED };

/* Frees the range at start. An aged range (a tier's page that already served
 * its countdown in the tier) is filed as a standby piece (reclaim/policy.h). */
static int free_locked(void *start, int how) {
  uintptr_t a = (uintptr_t)start, base = a & ~(uintptr_t)(JW_ROOT - 1);
  jw_rec *recs = jw_root_map_get(start);
  if (recs == NULL || (a & (JW_GRANULE - 1)) != 0) goto bad;
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT);
  jw_tree t = {recs, JW_ROOT_GRANULES};
  uint32_t tag = jw_tree_tag(&t, g);
  unsigned st = jw_tag_state(tag);
  unsigned aged = how == FREE_LIVE_AGED || st == JW_RS_DEFERRED_AGED;
  if (how == FREE_DEFERRED ? !jw_state_is_deferred(st) : !jw_state_is_live(st)) goto bad;
  uint32_t n = jw_class_granules[jw_tag_class(tag)];
  /* The range stops resolving first, then its interior records go. */
  jw_tree_tag_update(&t, g, JW_REC_STATE_MASK | JW_REC_ZEROED_MASK,
                     JW_RS_FREE_BUF0 + jw_bins_active(&jw_be.bins));
  if (st != JW_RS_LIVE_LARGE)
    for (uint32_t i = 1; i < n; i++) jw_store(&recs[g + i].tag, 0, JW_RELAXED);
  jw_fetch_sub(&jw_be.live_granules, n, JW_RELAXED);
  bump(&jw_be.frees, 1);
  jw_backend_put_free(base, recs, g, n, aged ? JW_PIECE_STANDBY : JW_PIECE_FRESH);
  return 0;
bad:
  errno = EINVAL;
  return -1;
}

unsigned jw_backend_drain_deferred(void) {
  jw_release_file(); /* a released batch waiting for a lock holder */
  /* Relaxed peek: an empty list (the common case) costs no atomic
   * read-modify-write; a push racing with it waits for the next operation. */
  if (jw_load(&jw_be.deferred, JW_RELAXED) == 0) return 0;
  unsigned drained = 0;
  /* Acquire pairs with the pushers' release: their state change to DEFERRED
   * and their link are visible. Takes the whole stack at once (no ABA). */
  jw_rid r = jw_xchg(&jw_be.deferred, 0, JW_ACQUIRE);
  while (r) {
    jw_rec *rec = jw_bins_rec(r);
    jw_rid next = jw_load(&rec->next, JW_RELAXED);
    jw_store(&rec->next, 0, JW_RELAXED);
    uint32_t tag = jw_load(&rec->tag, JW_RELAXED); /* published by the push's release */
    if (jw_tag_state(tag) == JW_RS_DEFERRED_FREE) /* a lock-free split's remainder */
      jw_backend_put_free(jw_meta_rid_base(r), rid_recs(r), jw_meta_rid_granule(r),
                          jw_class_granules[jw_tag_class(tag)], jw_tag_zeroed(tag) ? JW_PIECE_RELEASED : JW_PIECE_FRESH);
    else
      free_locked(range_addr(jw_meta_rid_base(r), jw_meta_rid_granule(r)), FREE_DEFERRED);
    r = next;
    drained++;
  }
  return drained;
}

/* Pushes range r (head rec, state already DEFERRED*) on the deferred list. */
static void deferred_push(jw_rid r, jw_rec *rec) {
  jw_rid top = jw_load(&jw_be.deferred, JW_RELAXED);
  do {
    jw_store(&rec->next, top, JW_RELAXED);
    /* Release: the drainer's acquire sees the link and the DEFERRED state;
     * acquire: the hand-over (deferred_help, which the pusher runs next). */
  } while (!jw_cas_weak(&jw_be.deferred, &top, r, JW_ACQ_REL, JW_RELAXED));
}

/* Lock held: every range in the bitmaps is filed through the lists (it
 * merges, then ages like any free range). */
void jw_backend_flush_fast(void) {
  for (unsigned c = 0; c < JW_NCLASSES && jw_fast_slots(c) != 0; c++)
    for (unsigned i = 0; i < jw_fast_slots(c); i++) {
      jw_rid r = jw_fast_flush_slot(c, i);
      if (r == 0) continue;
      uint32_t tag = jw_load(&jw_bins_rec(r)->tag, JW_RELAXED); /* ours now */
      /* A reserved root is filed as an active piece: its countdown starts
       * here, and it does not go straight back into the reserve. */
      unsigned piece = jw_tag_zeroed(tag) ? JW_PIECE_RELEASED : c == JW_ROOT_CLASS ? JW_PIECE_ACTIVE : JW_PIECE_FRESH;
      jw_backend_put_free(jw_meta_rid_base(r), rid_recs(r), jw_meta_rid_granule(r), jw_class_granules[c], piece);
    }
}

/* The lock is busy: mark the range DEFERRED or DEFERRED_AGED (this also
 * catches a double or invalid free) and push it for the holder or a later
 * operation to finish. */
static int defer_free(void *start, unsigned state) {
  uintptr_t a = (uintptr_t)start, base = a & ~(uintptr_t)(JW_ROOT - 1);
  jw_rec *recs = jw_root_map_get(start);
  if (recs == NULL || (a & (JW_GRANULE - 1)) != 0) goto bad;
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT);
  jw_rec *rec = &recs[g];
  uint32_t old = jw_load(&rec->tag, JW_RELAXED);
  do {
    if (!jw_state_is_live(jw_tag_state(old))) goto bad;
    /* Relaxed: the push below publishes with release. */
  } while (!jw_cas_weak(&rec->tag, &old, (old & ~JW_REC_STATE_MASK) | state, JW_RELAXED, JW_RELAXED));
  JW_TEST_POINT(JW_TP_BE_DEFER);
  deferred_push(jw_meta_rid(base, g), rec);
  bump(&jw_be.deferred_frees, 1);
  return 0;
bad:
  errno = EINVAL;
  return -1;
}


/* Is a sibling of the live range [g, g+n) free in a list or a bitmap? Read
 * without the lock while the holder may be rewriting these records: single
 * atomic loads, every index checked; a wrong answer only picks the other
 * path (section 7a, "Free"). */
static int probe_free_sibling(jw_rec *recs, uint32_t g, uint32_t n) {
  const uint32_t R = JW_ROOT_GRANULES;
  /* Relaxed: a hint (see above). */
  uint32_t tg = jw_load(&recs[g].tag, JW_RELAXED), te = g + n < R ? jw_load(&recs[g + n].tag, JW_RELAXED) : 0;
  unsigned lg = g ? jw_tag_level(tg) : 0, le = g + n < R ? jw_tag_level(te) : 0, d = lg > le ? lg : le;
  if (d == 0) return 0; /* the root has no sibling */
  if (lg == d && jw_tag_spanl(tg) < JW_NCLASSES) {
    unsigned k = jw_tag_spanl(tg);
    uint32_t w = jw_class_granules[k];
    if (w <= g) {
      uint32_t ts = jw_load(&recs[g - w].tag, JW_RELAXED);
      if (jw_state_mergeable(jw_tag_state(ts)) && jw_tag_class(ts) == k) return 1;
    }
  }
  if (le == d && jw_tag_spanr(te) < JW_NCLASSES && jw_state_mergeable(jw_tag_state(te)) &&
      jw_tag_class(te) == jw_tag_spanr(te))
    return 1;
  return 0;
}

/* A free into the range's class bitmap, when the range has no free sibling
 * to merge with: first for classes up to JW_FAST_MAX_GRANULES, and for every
 * class when the lock is busy (`contended`: a large range is then reused by
 * the next allocation of its class instead of waiting on the deferred list).
 * Returns 1 done, 0 not taken (the caller frees through the lists or defers),
 * -1 with errno = EINVAL (not a live range). */
static int fast_free(void *start, int contended) {
  uintptr_t a = (uintptr_t)start, base = a & ~(uintptr_t)(JW_ROOT - 1);
  jw_rec *recs = jw_root_map_get(start);
  if (recs == NULL || (a & (JW_GRANULE - 1)) != 0) return 0; /* the slow path reports it */
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT);
  /* Relaxed: the caller owns the live range it frees (its allocation
   * happened before, through whatever handed the pointer over). */
  uint32_t old = jw_load(&recs[g].tag, JW_RELAXED);
  unsigned c = jw_tag_class(old);
  if (!jw_state_is_live(jw_tag_state(old)) || c >= JW_NCLASSES ||
      (((size_t)jw_class_granules[c] << JW_GRANULE_SHIFT) > JW_FAST_MAX_BYTES && !contended))
    return 0;
  uint32_t n = jw_class_granules[c];
  if (probe_free_sibling(recs, g, n)) return 0; /* merging first: the locked path */
  /* Placement (section 7b): a range of a root above the one allocation now
   * fills goes to the lists (where it merges and ages) rather than the
   * bitmap (where the next allocation of its class would take it), unless
   * the lock is busy. Relaxed: a hint; a stale value picks the other path. */
  if (!contended && placing() && jw_bins_rank(jw_meta_rid(base, g)) > jw_load(&jw_be.place_root, JW_RELAXED))
    return 0;
  if (!lf_enter(c)) return 0;
  /* Stage 1: reserve a slot. */
  int i = jw_fast_reserve(c);
  if (i < 0) {
    lf_exit(c);
    return 0;
  }
  /* Stage 2: transfer the range from its owner to the bitmap (live ->
   * FREE_FAST, keeping the boundary bits). Relaxed: stage 3's release
   * publishes it. */
  do {
    if (!jw_state_is_live(jw_tag_state(old))) {
      /* A double or invalid free raced us: roll stage 1 back. */
#ifndef JW_MUTATE_NO_ROLLBACK
      jw_fast_unreserve(c, i);
#endif
      lf_exit(c);
      errno = EINVAL;
      return -1;
    }
  } while (!jw_cas_weak(&recs[g].tag, &old, (old & ~JW_REC_STATE_MASK) | JW_RS_FREE_FAST, JW_RELAXED, JW_RELAXED));
  /* The range stopped resolving; its interior records go before it is
   * published (a taker rewrites them). */
  if (jw_tag_state(old) != JW_RS_LIVE_LARGE)
    for (uint32_t k = 1; k < n; k++) jw_store(&recs[g + k].tag, 0, JW_RELAXED);
  jw_fetch_sub(&jw_be.live_granules, n, JW_RELAXED);
  bump(&jw_be.frees, 1);
  bump(&jw_be.fast_frees, 1);
  /* Stage 3: publish. */
  jw_fast_publish(c, i, jw_meta_rid(base, g));
  lf_exit(c);
  return 1;
}

/* A free that never waits: under the lock if it is free, else deferred. */
static int free_now_or_defer(void *start, int aged) {
  jw_backend_init_once();
  if (!jw_lock_try(&jw_be.lock, JW_LK_BACKEND)) {
    int rc = aged ? 0 : fast_free(start, 1); /* aged memory is due for release: no bitmap */
    if (rc != 0) return rc == 1 ? 0 : -1;
    rc = defer_free(start, aged ? JW_RS_DEFERRED_AGED : JW_RS_DEFERRED);
    if (rc == 0) deferred_help(); /* the holder may have released before the push */
    return rc;
  }
  jw_backend_drain_deferred();
  int rc = free_locked(start, aged ? FREE_LIVE_AGED : FREE_LIVE);
  jw_backend_unlock();
  return rc;
}

int jw_backend_free(void *start) {
  jw_backend_init_once();
  int rc = fast_free(start, 0);
  if (rc == 1)
    rc = 0;
  else if (rc == 0)
    rc = free_now_or_defer(start, 0);
  /* Outside the lock: start the reclaim thread, or release past the
   * watermark (reclaim/reclaim.h). */
  if (rc == 0) jw_reclaim_after_free();
  return rc;
}

void jw_pages_free(void *start) {
  if (jw_backend_free(start) != 0) jw_fatal("backend: free of %p: not the start of a live range", start);
}

void jw_pages_free_aged(void *start) {
  /* Called by the reclaimer's aging pass (reclaim/): no watermark check and
   * no thread start, the cycle that called it releases what is due. */
  if (free_now_or_defer(start, 1) != 0) jw_fatal("backend: aged free of %p: not the start of a live range", start);
}

/* ---- lock-free lookup --------------------------------------------------- */

jw_ptr_class jw_backend_classify(const void *p, jw_range_info *info) {
  jw_rec *recs = jw_root_map_get(p);
  if (recs == NULL) return JW_PTR_NOT_OURS;
  uintptr_t a = (uintptr_t)p, base = a & ~(uintptr_t)(JW_ROOT - 1);
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT), h = g;
  /* Relaxed: a caller holding a valid pointer got it after the allocation
   * that wrote these records (happens-before through whatever handed the
   * pointer over). For an invalid pointer any value read is acceptable: the
   * records stay mapped, so nothing faults. */
  uint32_t tag = jw_load(&recs[g].tag, JW_RELAXED);
  jw_ptr_class res = JW_PTR_RANGE_START;
  if (jw_tag_state(tag) == JW_RS_INTERIOR) {
    uint32_t off = jw_tag_offset(tag);
    if (off > g) return JW_PTR_FREE;
    h = g - off;
    tag = jw_load(&recs[h].tag, JW_RELAXED); /* as above */
    if (jw_tag_class(tag) >= JW_NCLASSES || jw_class_granules[jw_tag_class(tag)] <= off) return JW_PTR_FREE;
    res = JW_PTR_RESOLVED;
  } else if (jw_tag_state(tag) == JW_RS_NONE) {
    /* Inside some range without a record of its own: find the head by
     * walking back (diagnostics only; jw_pages_lookup never does this). */
    while (h > 0 && jw_tag_state(jw_load(&recs[h].tag, JW_RELAXED)) < JW_RS_LIVE_SMALL) h--;
    tag = jw_load(&recs[h].tag, JW_RELAXED);
    res = JW_PTR_INTERIOR;
  }
  unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
  if (c >= JW_NCLASSES || h + jw_class_granules[c] <= g) return JW_PTR_FREE;
  if (info) {
    info->start = (void *)(base + ((uintptr_t)h << JW_GRANULE_SHIFT));
    info->granules = jw_class_granules[c];
    info->kind = jw_state_is_live(st) ? jw_state_kind(st) : JW_KIND_NONE;
  }
  if (!jw_state_is_live(st)) return JW_PTR_FREE;
  if (res == JW_PTR_RANGE_START && a != base + ((uintptr_t)h << JW_GRANULE_SHIFT)) res = JW_PTR_RESOLVED;
  if (res == JW_PTR_INTERIOR && (st == JW_RS_LIVE_SMALL || st == JW_RS_LIVE_MID)) res = JW_PTR_RESOLVED;
  return res;
}

const char *jw_backend_ptr_class_name(jw_ptr_class c) {
  switch (c) {
    case JW_PTR_NOT_OURS: return "not in any backend range";
    case JW_PTR_RANGE_START: return "start of a live range";
    case JW_PTR_RESOLVED: return "inside a live range (resolvable)";
    case JW_PTR_INTERIOR: return "inside a live range, not its start";
    case JW_PTR_FREE: return "inside a free range";
  }
  return "?";
}

/* ---- placement on demand (section 7b) ---- */

bool jw_pages_checking(void) { return checking(); }

unsigned jw_pages_place_mode(void) {
  unsigned m = jw_load(&jw_be.place_mode, JW_RELAXED); /* a setting */
  return m == JW_PLACE_UNSET ? JW_PLACE_OFF : m;
}

int jw_pages_set_place_mode(unsigned mode) {
  if (mode > JW_PLACE_AUTO) {
    errno = EINVAL;
    return -1;
  }
  /* Seq_cst store, and seq_cst loads in jw_pages_place_sync; the switch's
   * write of the word is seq_cst too (place_word_raise): a setter and the
   * detector (switch, then jw_pages_place_sync) each store and then load
   * the other's variable, so one of the two sees the other (Dekker). */
  jw_store(&jw_be.place_mode, mode, JW_SEQ_CST);
  jw_pages_place_sync();
  return 0;
}

/* Concurrent setters (and the detector) each loop until a mode read after
 * the switch in force agrees with it still asks for it: whoever switched
 * last against the mode in force sees the newer mode and switches back, so
 * once they are done the mode and the switch agree. Two threads setting 0
 * and 1 at once could otherwise each look before the other switched and
 * leave mode 0 with placement on (or 1 with it off) for good. */
void jw_pages_place_sync(void) {
  for (;;) {
    /* Seq_cst loads: see jw_pages_set_place_mode. */
    unsigned m = jw_load(&jw_be.place_mode, JW_SEQ_CST);
    if (m == JW_PLACE_UNSET) m = JW_PLACE_OFF;
    if (m == JW_PLACE_AUTO) return;
    bool want = m == JW_PLACE_ON;
    if (((jw_load(&jw_place_word, JW_SEQ_CST) & 1u) != 0) != want) {
      jw_pages_place_switch(want);
      continue;
    }
    if (jw_load(&jw_be.place_mode, JW_SEQ_CST) == m) return;
  }
}

/* Raises the epoch (bits 1..) and sets bit 0 to `on`, or keeps it as the CAS
 * finds it (`on` < 0: a trim request). The word is a setting: what a tier
 * does on seeing it is ordered by that tier's own guard (owner, class lock,
 * backend lock); the CAS is seq_cst only for the mode's agreement
 * (jw_pages_set_place_mode). */
static void place_word_raise(int on) {
  uint32_t w = jw_load(&jw_place_word, JW_RELAXED);
  /* Seq_cst: see jw_pages_set_place_mode (a switch or trim is rare). */
  while (!jw_cas_weak(&jw_place_word, &w, on < 0 ? w + 2u : ((w + 2u) & ~1u) | (unsigned)on, JW_SEQ_CST,
                      JW_RELAXED)) {
  }
}

/* A trim request keeps bit 0 as the CAS finds it: reading it first and
 * writing it back could undo a switch made in between by
 * jw_pages_set_place_mode, whose sync had already looked (mode 0 with
 * placement on for good: test_breakit6 setrace). */
void jw_pages_place_trim(void) { place_word_raise(-1); }

void jw_pages_place_switch(bool on) {
  if (!on) {
    place_word_raise(0);
    return;
  }
  /* Until the lock holder knows better, nothing is "above": a stale hint
   * must not send every pooled page away. Relaxed: a hint (see fast_free). */
  jw_store(&jw_be.place_root, UINT32_MAX, JW_RELAXED);
  place_word_raise(1);
  if (!jw_lock_try(&jw_be.lock, JW_LK_BACKEND)) return; /* the next locked allocation sets place_root */
  unsigned drained = jw_backend_drain_deferred();
  /* The bitmaps' ranges into the lists, where the lowest-root choice sees
   * them (a bitmap hands a range out in place). */
  if (jw_fast_granules() != 0) jw_backend_flush_fast();
  unsigned k = 0;
  jw_rid r = jw_bins_lowest(&jw_be.bins, 0, JW_NCLASSES, &k);
  if (r) set_place_root(jw_bins_rank(r));
  drained += jw_backend_unlock();
  if (drained) jw_reclaim_after_free(); /* frees filed here age like any */
}

bool jw_pages_above_place(const void *p) {
  if (!placing()) return false;
  uintptr_t base = (uintptr_t)p & ~(uintptr_t)(JW_ROOT - 1);
  if (jw_root_map_get(p) == NULL) return false;
  /* Relaxed: a hint (see place_root). */
  return jw_bins_rank(jw_meta_rid(base, 0)) > jw_load(&jw_be.place_root, JW_RELAXED);
}

bool jw_pages_lookup(const void *p, jw_range_info *info) { return jw_pages_lookup_inline(p, info); }

bool jw_pages_lookup_rec(jw_rec *r, const void *p, jw_range_info *info) {
  uintptr_t start = 0;
  uint32_t n = 0;
  unsigned st = jw_pages_resolve_rec(r, (uintptr_t)p, &start, &n); /* before start and n are read */
  return jw_pages_info(st, start, n, info);
}

void jw_pages_mark_interior(void *start, const void *p) {
  uintptr_t a = (uintptr_t)start, base = a & ~(uintptr_t)(JW_ROOT - 1);
  jw_rec *recs = jw_root_map_get(start);
  uintptr_t q = (uintptr_t)p;
  if (recs == NULL || (a & (JW_GRANULE - 1)) != 0 || (q & ~(uintptr_t)(JW_ROOT - 1)) != base) goto bad;
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT), i = (uint32_t)((q - base) >> JW_GRANULE_SHIFT);
  jw_rec *head = &recs[g];
  uint32_t old = jw_load(&head->tag, JW_RELAXED);
  unsigned st = jw_tag_state(old);
  if ((st != JW_RS_LIVE_LARGE && st != JW_RS_LIVE_LARGE_MARKED) || i < g ||
      i >= g + jw_class_granules[jw_tag_class(old)])
    goto bad;
  if (i == g) return; /* the head granule always resolves */
  /* The head remembers it has interior records, for free to clear them. It
   * is marked first: a root check running in another thread (it takes no
   * part in this owner-only operation) must never see an interior record
   * under a head that does not announce one. */
  while (jw_tag_state(old) == JW_RS_LIVE_LARGE &&
         !jw_cas_weak(&head->tag, &old, (old & ~JW_REC_STATE_MASK) | JW_RS_LIVE_LARGE_MARKED, JW_RELAXED,
                      JW_RELAXED)) {
  }
  /* Relaxed: published to lookups of p by whatever hands p over, as for the
   * head (jw_backend_classify). */
  jw_store(&recs[i].tag, jw_tag_interior(i - g), JW_RELAXED);
  return;
bad:
  jw_fatal("backend: mark_interior(%p, %p): not inside a live large range", start, p);
}

/* ---- figures, options, reclamation, fork -------------------------------- */

void jw_backend_get_stats(jw_backend_stats *o) {
  jw_roots_stats rs;
  jw_roots_get_stats(&rs);
  jw_bins *b = &jw_be.bins;
  o->record_bytes = jw_meta_slot_bytes();
  o->root_map_bytes = jw_root_map_bytes();
  o->metadata_arena_bytes = jw_meta_arena_bytes();
  o->pages.mapped_bytes = rs.roots * JW_ROOT;
  o->pages.peak_mapped_bytes = rs.peak_roots * JW_ROOT;
  o->pages.metadata_bytes = o->record_bytes + o->root_map_bytes;
  o->pages.peak_metadata_bytes = rs.peak_roots * JW_META_SLOT_BYTES + o->root_map_bytes;
  o->pages.live_bytes = jw_load(&jw_be.live_granules, JW_RELAXED) * JW_GRANULE;
  o->fast_bytes = jw_fast_granules() * JW_GRANULE;
  o->pages.cached_bytes =
      (jw_load(&b->granules[0], JW_RELAXED) + jw_load(&b->granules[1], JW_RELAXED)) * JW_GRANULE + o->fast_bytes;
  o->released_bytes = jw_load(&b->granules[JW_BUF_RELEASED], JW_RELAXED) * JW_GRANULE;
  o->pages.roots = rs.roots;
  o->pages.splits = jw_load(&jw_be.splits, JW_RELAXED);
  o->pages.merges = jw_load(&jw_be.merges, JW_RELAXED);
  o->free_ranges = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) o->free_ranges += jw_load(&b->bin[c].total, JW_RELAXED);
  o->free_ranges += jw_fast_count(JW_ROOT_CLASS); /* the root reserve's (section 7c) */
  o->free_roots = free_roots();
  o->peak_roots = rs.peak_roots;
  o->roots_mapped_total = rs.mapped_total;
  o->roots_unmapped_total = rs.unmapped_total;
  o->allocs = jw_load(&jw_be.allocs, JW_RELAXED);
  o->frees = jw_load(&jw_be.frees, JW_RELAXED);
  o->deferred_frees = jw_load(&jw_be.deferred_frees, JW_RELAXED);
  o->merges_after_release = jw_load(&jw_be.merges_after_release, JW_RELAXED);
  o->allocs_refault = jw_load(&jw_be.allocs_refault, JW_RELAXED);
  o->refault_bytes = jw_load(&jw_be.refault_granules, JW_RELAXED) * JW_GRANULE;
  o->fast_allocs = jw_load(&jw_be.fast_allocs, JW_RELAXED);
  o->fast_frees = jw_load(&jw_be.fast_frees, JW_RELAXED);
  o->lf_splits = jw_load(&jw_be.lf_splits, JW_RELAXED);
  o->lf_roots = jw_load(&jw_be.lf_roots, JW_RELAXED);
  o->lf_recycled = jw_load(&jw_be.lf_recycled, JW_RELAXED);
  o->roots_reserved = jw_load(&jw_be.roots_reserved, JW_RELAXED);
  o->roots_reused = jw_load(&jw_be.roots_reused, JW_RELAXED);
  jw_ahead_stats as;
  jw_ahead_get_stats(&as);
  o->ahead_bytes = as.held * JW_ROOT;
  o->released_bytes += o->ahead_bytes; /* mapped, never touched */
  o->ahead_filled = as.filled;
  o->ahead_taken = as.taken;
  o->ahead_returned = as.returned;
}

uint64_t jw_backend_live_bytes(void) { return jw_load(&jw_be.live_granules, JW_RELAXED) * JW_GRANULE; /* a figure */ }

void jw_pages_get_stats(jw_pages_stats *out) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  *out = s.pages;
}

void jw_backend_set_check(int on) {
  jw_backend_init_once();
  jw_store(&jw_be.check, on ? 1u : 0u, JW_RELAXED); /* a flag read racily: relaxed */
}

void jw_backend_get_stats_quiet(jw_backend_stats *out) {
  jw_backend_init_once();
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce();
  jw_backend_lf_pause(1); /* a filler or taker of a root mapped ahead is not half-way */
  jw_backend_get_stats(out);
  jw_backend_lf_resume();
  jw_backend_unlock();
}

void jw_backend_set_retain_roots(unsigned n) {
  jw_backend_init_once();
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce(); /* ranges in flight have merged back by now */
  jw_store(&jw_be.retain_roots, n, JW_RELAXED); /* read under the lock */
  /* Entirely free roots beyond the new count go back now. */
  jw_bins *b = &jw_be.bins;
  for (;;) {
    if (free_roots() <= n) break;
    unsigned buf;
    jw_rid r = jw_bins_pop(b, JW_ROOT_CLASS, &buf);
    uintptr_t base = jw_meta_rid_base(r);
    jw_roots_unmap(base, jw_root_map_get((const void *)base));
  }
  jw_backend_unlock();
}

uint64_t jw_backend_reclaim_step(void) { return jw_reclaim_cycle(); }

void jw_backend_test_lock(void) { jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND); }

void jw_backend_test_unlock(void) { jw_backend_unlock(); }

/* The child must inherit no range in transit: prepare waits for a batch in
 * flight to finish its system calls (they need no lock) and files it. */
void jw_pages_atfork_prepare(void) {
  jw_reclaim_atfork_prepare(); /* no tier cache half-aged in the child */
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce();
  /* Nor a lock-free operation half-way (its thread does not exist in the
   * child): they finish, new ones back off until the parent resumes. */
  jw_backend_lf_pause(1);
}
void jw_pages_atfork_parent(void) {
  jw_backend_lf_resume();
  jw_backend_unlock(); /* frees deferred while the fork was prepared */
  jw_reclaim_atfork_parent();
}
void jw_pages_atfork_child(void) {
  /* One thread here. Prepare kept every lock-free operation out, but a
   * thread backing off may have been between its increment and decrement of
   * a count at the fork: those threads do not exist here. */
  for (unsigned c = 0; c < JW_NCLASSES; c++) jw_store(&jw_fast[c].inflight, 0, JW_RELAXED);
  jw_store(&jw_be.lf_checking, 0, JW_RELAXED);
  jw_lock_reset(&jw_be.lock);
  jw_reclaim_atfork_child(); /* its reclaim thread is gone: restarted lazily */
}
