/* Free (jw_pages_free, jw_backend_free): into the class's bitmap when the
 * range has no free sibling (lock-free), else under a try-lock with merging
 * and filing in the buffer the countdown names (filing.h), else deferred for
 * the lock holder. Also the filing every locked path shares
 * (jw_backend_put_free) and the drain of deferred frees.
 *
 * Design: docs/design/backend.md, sections 4 (merging), 7a ("Free") and 7c;
 * docs/design/reclamation.md, section 1 (filing). No free ever waits.
 */
#include <errno.h>

#include "../common/log.h"
#include "../common/test_hooks.h"
#include "../pages/root_map.h"
#include "backend_internal.h"
#include "filing.h"
#include "release.h"
#include "roots.h"
#include "tree.h"
#include "upcalls.h"

/* Merging: what the pieces of the range being filed were (filing.h). */
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
 * (filing.h: a fresh range that merged nothing starts its countdown
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
  jw_filing f = jw_backend_filing(m.pieces, jw_load(&jw_be.policy, JW_RELAXED));
  if (n == t.granules && (m.pieces & JW_PIECE_FRESH) && f != JW_FILE_RELEASED && reserve_root(base, recs))
    return;
  unsigned buf = f == JW_FILE_RELEASED ? JW_BUF_RELEASED : f == JW_FILE_STANDBY ? active ^ 1u : active;
  jw_rid r = jw_meta_rid(base, g);
  jw_bins_push(&jw_be.bins, r, c, buf);
  if (placing() && jw_bins_rank(r) < jw_load(&jw_be.place_root, JW_RELAXED)) set_place_root(jw_bins_rank(r));
  if (checking() && jw_root_map_get((const void *)base) != NULL) jw_backend_check_root(recs, base, "filing");
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
 * its countdown in the tier) is filed as a standby piece (filing.h). */
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
  jw_backend_deferred_push(jw_meta_rid(base, g), rec);
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
    if (rc == 0) jw_backend_deferred_help(); /* the holder may have released before the push */
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
