/* Allocation (jw_pages_alloc, page_source.h): a range of a class from its
 * bitmap (step 1, lock-free), else from the lists under a try-lock, else by
 * the paths that go around a held lock (lockfree.c), else from a fresh root.
 *
 * Design: docs/design/backend.md, sections 7a ("Allocation"), 7b (placement)
 * and 7c (the root reserve). No allocation ever waits for the lock holder.
 */
#include <errno.h>

#include "../common/options.h"
#include "../pages/root_map.h"
#include "backend_internal.h"
#include "roots.h"
#include "tree.h"
#include "upcalls.h"

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

/* Step 1 (section 7a, lock-free): a range of class c from its bitmap. */
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

/* A fresh root, mapped without the lock (roots.c and meta.c are lock-free):
 * private until published with one BUSY leaf, which the caller owns; the
 * caller is inside lf_enter(), so that no whole-tree check sees the BUSY
 * root. Every root is mapped so, also when a locked allocation found
 * nothing free: an mmap inside the critical section made the hold a system
 * call long, and the return from it is where the scheduler preempts
 * (section 7a, "Roots are mapped outside the lock"). */
uintptr_t jw_backend_map_root(jw_rec **recs) {
  uintptr_t base = jw_roots_map(JW_RS_BUSY, recs);
  if (base) jw_backend_note_root_mapped();
  return base;
}

/* A root was just mapped: the load is at or near a peak. The live bytes
 * now are the trough detector's peak (reclamation.md 6a), which its own
 * samples (a few per second) would miss. Relaxed: a figure. Only in auto
 * mode, the one that reads it: a relaxed load of the live count, which
 * every allocation and free writes, is also a branch per value it may read
 * under the model checker (verification.md), where the mode is off. */
void jw_backend_note_root_mapped(void) {
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
  if (checking()) jw_backend_check_root(recs, base, "alloc");
  return (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT));
}

/* The locked path found nothing free: a root mapped with the lock given
 * back, then split under the lock as before when it is free again, else
 * carved without it as in step 5 (without counting as step 5: no holder was
 * in the way when the allocation looked). */
static void *root_alloc(unsigned c, jw_range_kind kind, bool *zeroed, unsigned *drained) {
  jw_backend_lf_enter_wait(c);
  jw_rec *recs;
  uintptr_t base = jw_backend_map_root(&recs);
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
  if (base != 0) p = jw_backend_lf_carve(base, recs, 0, c, kind, zeroed);
  lf_exit(c);
  if (base != 0) *drained += jw_backend_deferred_help(); /* the remainders' hand-over */
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
    if (round == 1 && jw_opt(JW_OPT_LOCK_YIELD)) { /* a setting, read at each busy lock as the midend does */
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
    if (round == 0) p = jw_backend_lf_split_alloc(c, kind, &zeroed);
    else p = jw_backend_lf_root_alloc(c, kind, &zeroed);
    /* A lock-free path may have pushed remainders (or a recycled list's
     * rest) on the deferred list: the hand-over's look again. */
    if (jw_backend_deferred_help()) jw_reclaim_after_free();
  }
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (out_granules) *out_granules = jw_class_granules[c];
  if (out_zeroed) *out_zeroed = zeroed;
  return p;
}
