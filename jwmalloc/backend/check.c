/* Whole-backend invariant check (backend.h, jw_backend_check_all). */
#include "../common/log.h"
#include "ahead.h"
#include "backend_internal.h"
#include "fast.h"
#include "meta.h"
#include "release.h"
#include "../pages/root_map.h"
#include "roots.h"
#include "tree.h"

#define FAIL(...)                                \
  do {                                           \
    if (cap) jw_format(err, cap, __VA_ARGS__);   \
    rc = -1;                                     \
    goto out;                                    \
  } while (0)

/* Free ranges found in the roots, per class and buffer. */
typedef struct census {
  uint32_t free[JW_NCLASSES][JW_NBUFS];
  uint64_t live_granules, free_granules[JW_NBUFS], roots, fast_granules;
} census;

static int check_root(uintptr_t base, jw_rec *recs, census *cs, char *err, size_t cap) {
  jw_tree t = {recs, JW_ROOT_GRANULES};
  char why[200];
  if (jw_tree_check(&t, 1, why, sizeof why) != 0) {
    if (cap) jw_format(err, cap, "root %p: %s", (void *)base, why);
    return -1;
  }
  cs->roots++;
  for (uint32_t g = 0; g < JW_ROOT_GRANULES;) {
    uint32_t tag = jw_tree_tag(&t, g);
    unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
    uint32_t n = jw_class_granules[c];
    if (jw_state_in_list(st)) {
      /* Zeroed means never touched since mapped or released: no pages to
       * give back, so it must not count as cached. */
      if (jw_tag_zeroed(tag) && st != JW_RS_FREE_RELEASED) {
        if (cap) jw_format(err, cap, "root %p granule %u: zeroed free range in a backed buffer", (void *)base, g);
        return -1;
      }
      cs->free[c][st - JW_RS_FREE_BUF0]++;
      cs->free_granules[st - JW_RS_FREE_BUF0] += n;
    } else if (st == JW_RS_FREE_FAST) {
      /* Put in a bitmap after the flush above: it must sit in exactly one
       * slot of its class. */
      jw_rid r = jw_meta_rid(base, g);
      unsigned seen = 0;
      for (unsigned i = 0; i < jw_fast_slots(c); i++) seen += jw_load(&jw_fast[c].slot[i], JW_RELAXED) == r;
      if (seen != 1) {
        if (cap) jw_format(err, cap, "root %p granule %u: bitmap range in %u slots", (void *)base, g, seen);
        return -1;
      }
      cs->fast_granules += n;
    } else if (st == JW_RS_DEFERRED_FREE) {
      /* A lock-free split's remainder pushed after the drain above. */
    } else if (jw_state_is_live(st) || jw_state_is_deferred(st)) {
      /* A deferred range (freed by a thread that found the lock held, maybe
       * while this check holds it) counts as live until it is drained. */
      cs->live_granules += n;
    } else {
      if (cap) jw_format(err, cap, "root %p granule %u: state %u outside an operation", (void *)base, g, st);
      return -1;
    }
    g += n;
  }
  return 0;
}

int jw_backend_check_all(char *err, size_t cap) {
  static census cs; /* big; under the lock, so one at a time */
  int rc = 0;
  if (cap) err[0] = 0;
  jw_backend_init_once();
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce(); /* no range in transit while we look */
  jw_backend_lf_pause(1); /* nor a lock-free operation half-way */
  __builtin_memset(&cs, 0, sizeof cs);
  /* Every root, through the root map leaves that hold roots. */
  uint32_t leaves = jw_meta_leaves();
  for (uint32_t id = 1; id <= leaves; id++) {
    uintptr_t l1 = jw_load(&jw_meta_leaf_l1[id], JW_RELAXED);
    if (jw_load(&jw_meta_l1_leaf[l1], JW_RELAXED) != id) continue; /* an id that lost a race (meta.h) */
    for (uintptr_t l2 = 0; l2 < JW_ROOT_MAP_L2_SIZE; l2++) {
      uintptr_t base = (l1 << JW_ROOT_MAP_L1_SHIFT) | (l2 << JW_ROOT_SHIFT);
      jw_rec *recs = jw_root_map_get((const void *)base);
      if (recs && check_root(base, recs, &cs, err, cap) != 0) {
        rc = -1;
        goto out;
      }
    }
  }
  /* Every list: members are free heads of its class and buffer, links agree. */
  jw_bins *b = &jw_be.bins;
  uint64_t nonempty = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    for (unsigned k = 0; k < JW_NBUFS; k++) {
      uint32_t want = jw_load(&b->bin[c].count[k], JW_RELAXED), seen = 0;
      jw_rid first = jw_bins_first(b, c, k), prev = first ? jw_load(&jw_bins_rec(first)->prev, JW_RELAXED) : 0;
      for (jw_rid r = first; r; r = jw_load(&jw_bins_rec(r)->next, JW_RELAXED)) {
        if (jw_root_map_get((const void *)jw_meta_rid_base(r)) == NULL)
          FAIL("class %u buffer %u: range id %x in no mapped root", c, k, r);
        jw_rec *rec = jw_bins_rec(r);
        uint32_t tag = jw_load(&rec->tag, JW_RELAXED);
        if (jw_tag_state(tag) != JW_RS_FREE_BUF0 + k || jw_tag_class(tag) != c)
          FAIL("class %u buffer %u: member %x has state %u class %u", c, k, r, jw_tag_state(tag), jw_tag_class(tag));
        if (jw_load(&rec->prev, JW_RELAXED) != prev) FAIL("class %u buffer %u: bad back link at %x", c, k, r);
        if (++seen > want) FAIL("class %u buffer %u: more members than its count %u", c, k, want);
        prev = r;
        if (jw_load(&rec->next, JW_RELAXED) == first) break; /* circular: back at the front */
      }
      if (seen != want || seen != cs.free[c][k])
        FAIL("class %u buffer %u: count %u, list %u, roots %u", c, k, want, seen, cs.free[c][k]);
      if (seen) nonempty |= (uint64_t)1 << c;
    }
    uint32_t total = jw_load(&b->bin[c].count[0], JW_RELAXED) + jw_load(&b->bin[c].count[1], JW_RELAXED) +
                     jw_load(&b->bin[c].count[2], JW_RELAXED);
    if (total != jw_load(&b->bin[c].total, JW_RELAXED)) FAIL("class %u: total %u, buffers hold %u", c,
                                                             jw_load(&b->bin[c].total, JW_RELAXED), total);
  }
  if (nonempty != jw_load(&b->nonempty, JW_RELAXED)) FAIL("non-empty class mask disagrees with the lists");
  for (unsigned k = 0; k < JW_NBUFS; k++)
    if (cs.free_granules[k] != jw_load(&b->granules[k], JW_RELAXED))
      FAIL("buffer %u: %llu free granules counted, %llu in roots", k,
           (unsigned long long)jw_load(&b->granules[k], JW_RELAXED), (unsigned long long)cs.free_granules[k]);
  if (cs.fast_granules != jw_fast_granules() || cs.fast_granules != jw_fast_granules_scan())
    FAIL("bitmaps: %llu granules counted, %llu in slots, %llu in roots", (unsigned long long)jw_fast_granules(),
         (unsigned long long)jw_fast_granules_scan(), (unsigned long long)cs.fast_granules);
  if (cs.live_granules != jw_load(&jw_be.live_granules, JW_RELAXED))
    FAIL("live granules: counter %llu, roots %llu", (unsigned long long)jw_load(&jw_be.live_granules, JW_RELAXED),
         (unsigned long long)cs.live_granules);
  jw_roots_stats rs;
  jw_roots_get_stats(&rs);
  if (rs.roots != cs.roots) FAIL("roots: counter %llu, root map %llu", (unsigned long long)rs.roots,
                                 (unsigned long long)cs.roots);
  /* Roots mapped ahead hold records slots but are in no root map. */
  int ahead = jw_ahead_check(err, cap);
  if (ahead < 0) {
    rc = -1;
    goto out;
  }
  if (jw_meta_slot_bytes() != (cs.roots + (uint64_t)ahead) * JW_META_SLOT_BYTES)
    FAIL("record bytes %llu for %llu roots and %d mapped ahead", (unsigned long long)jw_meta_slot_bytes(),
         (unsigned long long)cs.roots, ahead);
  if (!jw_load(&jw_be.age_roots, JW_RELAXED)) { /* with reclamation on, whole free roots age instead */
    uint32_t kept = jw_load(&b->bin[JW_ROOT_CLASS].total, JW_RELAXED);
    uint32_t retain = jw_load(&jw_be.retain_roots, JW_RELAXED);
    if (kept > retain) FAIL("%u entirely free roots kept, retain limit %u", kept, retain);
  }
out:
  jw_backend_lf_resume();
  jw_backend_unlock();
  return rc;
}

/* After one operation in checking mode (JWMALLOC_CHECK=1): the tree of the
 * root it touched; a violation is fatal. */
void jw_backend_check_root(jw_rec *recs, uintptr_t base, const char *op) {
  char err[256];
  jw_tree t = {recs, JW_ROOT_GRANULES};
  /* A lock-free operation in flight may be half-way through a range of this
   * root: skip this check (the next one, or jw_backend_check_all, sees it). */
  if (!jw_backend_lf_pause(0)) return;
  int bad = jw_tree_check(&t, 1, err, sizeof err) != 0;
  jw_backend_lf_resume();
  if (bad) jw_fatal("backend invariant broken after %s in root %p: %s", op, (void *)base, err);
}
