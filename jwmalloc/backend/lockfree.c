/* The allocation paths taken while the backend lock is held (docs/design/
 * backend.md, section 7a, steps 3-5): a larger bitmap range subdivided, a
 * range recycled from the deferred list, a fresh root carved; each without
 * the lock, its remainders filed lock-free (a bitmap, else the deferred
 * list). Step 1, the class's own bitmap, is alloc.c's. */
#include "ahead.h"
#include "backend_internal.h"
#include "tree.h"

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
    jw_backend_deferred_push(r, &recs[g]);
  }
}

/* Carves class c out of the owned free range at g (head BUSY) with nested
 * steps only, so every record written lies inside the range; the carved
 * range becomes live, the remainders are filed lock-free. */
void *jw_backend_lf_carve(uintptr_t base, jw_rec *recs, uint32_t g, unsigned c, jw_range_kind kind, bool *zeroed) {
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
void *jw_backend_lf_split_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
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
    p = jw_backend_lf_carve(jw_meta_rid_base(r), recs, g, c, kind, zeroed);
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
    p = jw_backend_lf_carve(jw_meta_rid_base(best), recs, g, c, kind, zeroed);
    bump(&jw_be.lf_recycled, 1);
  }
  if (list) { /* the rest goes back */
    jw_rid top = jw_load(&jw_be.deferred, JW_RELAXED);
    jw_rec *t = jw_bins_rec(tail);
    do {
      jw_store(&t->next, top, JW_RELAXED);
      /* Release: the drainer's acquire sees the chain's links and states;
       * acquire: the hand-over (jw_backend_deferred_help, which the caller runs). */
    } while (!jw_cas_weak(&jw_be.deferred, &top, list, JW_ACQ_REL, JW_RELAXED));
  }
  return p;
}

/* Step 5: nothing to recycle and the lock held: a fresh root, carved
 * without the lock like a bitmap range (its remainders are filed
 * lock-free): a root mapped ahead when one is ready (ahead.h: no system
 * call on this path), else mapped here. Waits only while a whole-tree check
 * or a fork holds the checker's flag (jw_backend_lf_pause: checking mode,
 * jw_backend_check_all, fork prepare), asleep after a few microseconds
 * (jw_backend_lf_enter_wait). */
void *jw_backend_lf_root_alloc(unsigned c, jw_range_kind kind, bool *zeroed) {
  jw_backend_lf_enter_wait(c);
  void *p = lf_deferred_alloc(c, kind, zeroed);
  if (p) {
    lf_exit(c);
    return p;
  }
  lf_exit(c);
  /* A root may have entered the reserve (or a larger range a bitmap)
   * during the grace. */
  if ((p = jw_backend_lf_split_alloc(c, kind, zeroed)) != NULL) return p;
  jw_backend_lf_enter_wait(c);
  jw_rec *recs;
  uintptr_t base = jw_ahead_take(&recs);
  if (base) jw_backend_note_root_mapped();
  else base = jw_backend_map_root(&recs);
  p = base ? jw_backend_lf_carve(base, recs, 0, c, kind, zeroed) : NULL;
  if (p) bump(&jw_be.lf_roots, 1);
  lf_exit(c);
  return p;
}
