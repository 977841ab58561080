/* The page source (page_source.h) on closed sibling trees: allocation by
 * exact class or size-friendly split, free with merging of free siblings,
 * lock-free lookup, roots returned with their metadata.
 *
 * Brief: "Backend: size-class-exact ranges", "Metadata". Design:
 * docs/design/backend.md. Locks: one backend lock (lock.h) over trees, bins
 * and roots; lookup and mark_interior take none; a free that finds the lock
 * busy is deferred, never waits.
 */
#include <errno.h>
#include <stdlib.h>

#include "../common/log.h"
#include "../os/os_mem.h"
#include "../reclaim/policy.h"
#include "../reclaim/reclaim.h"
#include "backend_internal.h"
#include "meta.h"
#include "release.h"
#include "root_map.h"
#include "roots.h"
#include "tree.h"

#ifndef JWMALLOC_CHECK_DEFAULT
#define JWMALLOC_CHECK_DEFAULT 0
#endif

jw_backend_state jw_be = {.lock = JW_LOCK_INIT};

/* Statistics counters: relaxed, they order nothing. */
static inline void bump(jw_atomic_u64 *c, uint64_t d) { jw_fetch_add(c, d, JW_RELAXED); }

static unsigned env_uint(const char *name, unsigned dflt) {
  const char *s = getenv(name); /* reads environ only: no allocation */
  if (s == NULL || *s < '0' || *s > '9') return dflt;
  unsigned v = 0;
  while (*s >= '0' && *s <= '9' && v < 100000000u) v = v * 10 + (unsigned)(*s++ - '0');
  return v;
}

void jw_backend_init_once(void) {
  /* Acquire pairs with the release below: options are read before use. Two
   * threads may both read the environment; they store the same values. */
  if (jw_load(&jw_be.inited, JW_ACQUIRE)) return;
  jw_store(&jw_be.check, env_uint("JWMALLOC_CHECK", JWMALLOC_CHECK_DEFAULT) ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_be.retain_roots, env_uint("JWMALLOC_RETAIN_ROOTS", 1), JW_RELAXED);
  jw_reclaim_init(); /* its options set the reclamation mode (jw_backend_set_reclaim_mode) */
  jw_store(&jw_be.inited, 1, JW_RELEASE);
}

/* Entirely free roots kept mapped (the root class's free ranges). */
static uint32_t free_roots(void) { return jw_load(&jw_be.bins.bin[JW_ROOT_CLASS].total, JW_RELAXED); }

static inline int checking(void) { return jw_load(&jw_be.check, JW_RELAXED) != 0; }

static void check_root(jw_rec *recs, uintptr_t base, const char *op) {
  char err[256];
  jw_tree t = {recs, JW_ROOT_GRANULES};
  if (jw_tree_check(&t, 1, err, sizeof err) != 0)
    jw_fatal("backend invariant broken after %s in root %p: %s", op, (void *)base, err);
}

static inline unsigned kind_state(jw_range_kind k) {
  return k == JW_KIND_SMALL_SLAB ? JW_RS_LIVE_SMALL : k == JW_KIND_MID_SLAB ? JW_RS_LIVE_MID : JW_RS_LIVE_LARGE;
}

static inline jw_range_kind state_kind(unsigned st) {
  return st == JW_RS_LIVE_SMALL ? JW_KIND_SMALL_SLAB : st == JW_RS_LIVE_MID ? JW_KIND_MID_SLAB : JW_KIND_LARGE;
}

/* ---- allocation --------------------------------------------------------- */

static void *alloc_locked(unsigned c, jw_range_kind kind, bool *zeroed) {
  uint32_t n = jw_class_granules[c];
  int k = jw_bins_find(&jw_be.bins, c);
  uintptr_t base;
  jw_rec *recs;
  uint32_t g;
  if (k < 0) {
    /* A fresh root has no physical pages: its remainders are filed as
     * released (docs/design/reclamation.md, section 2). */
    base = jw_roots_map(JW_RS_FREE_RELEASED, &recs);
    if (base == 0) return NULL;
    g = 0;
    k = JW_ROOT_CLASS;
  } else {
    unsigned buf;
    jw_rid r = jw_bins_pop(&jw_be.bins, (unsigned)k, &buf);
    base = jw_meta_rid_base(r);
    recs = jw_root_map_get((const void *)base);
    g = jw_meta_rid_granule(r);
  }
  jw_tree t = {recs, JW_ROOT_GRANULES};
  uint32_t tag = jw_tree_tag(&t, g);
  unsigned st = kind_state(kind);
  *zeroed = jw_tag_zeroed(tag);
  if (jw_tag_given_back(tag)) bump(&jw_be.allocs_refault, 1); /* its pages fault back in */
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
  /* Slabs resolve from every granule (page_source.h): interior records. */
  if (kind != JW_KIND_LARGE)
    for (uint32_t i = 1; i < n; i++) jw_store(&recs[g + i].tag, jw_tag_interior(i), JW_RELAXED);
  bump(&jw_be.live_granules, n);
  bump(&jw_be.allocs, 1);
  if (checking()) check_root(recs, base, "alloc");
  return (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT));
}

void *jw_pages_alloc(size_t granules, jw_range_kind kind, uint32_t *out_granules, bool *out_zeroed) {
  if (granules == 0 || granules > JW_ROOT_GRANULES || kind < JW_KIND_SMALL_SLAB || kind > JW_KIND_LARGE) {
    errno = ENOMEM;
    return NULL;
  }
  jw_backend_init_once();
  unsigned c = jw_class_index_up((uint32_t)granules);
  bool zeroed = false;
  jw_lock_take(&jw_be.lock);
  unsigned drained = jw_backend_drain_deferred();
  void *p = alloc_locked(c, kind, &zeroed);
  drained += jw_backend_drain_deferred();
  jw_lock_give(&jw_be.lock);
  /* Deferred frees filed here are frees too: their memory must age. */
  if (drained) jw_reclaim_after_free();
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
static void absorb(void *arg, uint32_t pos, uint32_t tag) {
  merge_ctx *m = arg;
  unsigned buf = jw_bins_remove(&jw_be.bins, jw_meta_rid(m->base, pos), jw_tag_class(tag));
  unsigned piece = buf == JW_BUF_RELEASED ? JW_PIECE_RELEASED
                   : buf == jw_bins_active(&jw_be.bins) ? JW_PIECE_ACTIVE
                                                        : JW_PIECE_STANDBY;
  if (m->given_back || jw_tag_given_back(tag)) m->after_release++;
  m->given_back |= jw_tag_given_back(tag);
  m->pieces |= piece;
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
  unsigned buf = f == JW_FILE_RELEASED ? JW_BUF_RELEASED : f == JW_FILE_STANDBY ? active ^ 1u : active;
  jw_bins_push(&jw_be.bins, jw_meta_rid(base, g), c, buf);
  if (checking() && jw_root_map_get((const void *)base) != NULL) check_root(recs, base, "filing");
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
    free_locked((void *)(jw_meta_rid_base(r) + ((uintptr_t)jw_meta_rid_granule(r) << JW_GRANULE_SHIFT)),
                FREE_DEFERRED);
    r = next;
    drained++;
  }
  return drained;
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
  jw_rid r = jw_meta_rid(base, g);
  jw_rid top = jw_load(&jw_be.deferred, JW_RELAXED);
  do {
    jw_store(&rec->next, top, JW_RELAXED);
    /* Release: the drainer's acquire sees the link and the DEFERRED state. */
  } while (!jw_cas_weak(&jw_be.deferred, &top, r, JW_RELEASE, JW_RELAXED));
  bump(&jw_be.deferred_frees, 1);
  return 0;
bad:
  errno = EINVAL;
  return -1;
}

/* A free that never waits: under the lock if it is free, else deferred. */
static int free_now_or_defer(void *start, int aged) {
  jw_backend_init_once();
  if (!jw_lock_try(&jw_be.lock)) return defer_free(start, aged ? JW_RS_DEFERRED_AGED : JW_RS_DEFERRED);
  jw_backend_drain_deferred();
  int rc = free_locked(start, aged ? FREE_LIVE_AGED : FREE_LIVE);
  jw_backend_drain_deferred();
  jw_lock_give(&jw_be.lock);
  return rc;
}

int jw_backend_free(void *start) {
  int rc = free_now_or_defer(start, 0);
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
    info->kind = jw_state_is_live(st) ? state_kind(st) : JW_KIND_NONE;
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

bool jw_pages_lookup(const void *p, jw_range_info *info) {
  jw_rec *recs = jw_root_map_get(p);
  if (recs == NULL) return false;
  uintptr_t a = (uintptr_t)p, base = a & ~(uintptr_t)(JW_ROOT - 1);
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT);
  /* Relaxed: see jw_backend_classify. */
  uint32_t tag = jw_load(&recs[g].tag, JW_RELAXED);
  uint32_t off = 0;
  if (jw_tag_state(tag) == JW_RS_INTERIOR) {
    off = jw_tag_offset(tag);
    if (off > g) return false;
    g -= off;
    tag = jw_load(&recs[g].tag, JW_RELAXED);
  }
  unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
  if (!jw_state_is_live(st) || c >= JW_NCLASSES || jw_class_granules[c] <= off) return false;
  info->start = (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT));
  info->granules = jw_class_granules[c];
  info->kind = state_kind(st);
  return true;
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
  /* Relaxed: published to lookups of p by whatever hands p over, as for the
   * head (jw_backend_classify). */
  jw_store(&recs[i].tag, jw_tag_interior(i - g), JW_RELAXED);
  /* The head remembers it has interior records, for free to clear them. */
  while (jw_tag_state(old) == JW_RS_LIVE_LARGE &&
         !jw_cas_weak(&head->tag, &old, (old & ~JW_REC_STATE_MASK) | JW_RS_LIVE_LARGE_MARKED, JW_RELAXED,
                      JW_RELAXED)) {
  }
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
  o->pages.cached_bytes =
      (jw_load(&b->granules[0], JW_RELAXED) + jw_load(&b->granules[1], JW_RELAXED)) * JW_GRANULE;
  o->released_bytes = jw_load(&b->granules[JW_BUF_RELEASED], JW_RELAXED) * JW_GRANULE;
  o->pages.roots = rs.roots;
  o->pages.splits = jw_load(&jw_be.splits, JW_RELAXED);
  o->pages.merges = jw_load(&jw_be.merges, JW_RELAXED);
  o->free_ranges = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) o->free_ranges += jw_load(&b->bin[c].total, JW_RELAXED);
  o->free_roots = free_roots();
  o->peak_roots = rs.peak_roots;
  o->roots_mapped_total = rs.mapped_total;
  o->roots_unmapped_total = rs.unmapped_total;
  o->allocs = jw_load(&jw_be.allocs, JW_RELAXED);
  o->frees = jw_load(&jw_be.frees, JW_RELAXED);
  o->deferred_frees = jw_load(&jw_be.deferred_frees, JW_RELAXED);
  o->merges_after_release = jw_load(&jw_be.merges_after_release, JW_RELAXED);
  o->allocs_refault = jw_load(&jw_be.allocs_refault, JW_RELAXED);
}

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
  jw_lock_take(&jw_be.lock);
  jw_backend_drain_deferred();
  jw_release_quiesce();
  jw_backend_get_stats(out);
  jw_lock_give(&jw_be.lock);
}

void jw_backend_set_retain_roots(unsigned n) {
  jw_backend_init_once();
  jw_lock_take(&jw_be.lock);
  jw_backend_drain_deferred();
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
  jw_lock_give(&jw_be.lock);
}

uint64_t jw_backend_reclaim_step(void) { return jw_reclaim_cycle(); }

void jw_backend_test_lock(void) { jw_lock_take(&jw_be.lock); }

void jw_backend_test_unlock(void) {
  jw_backend_drain_deferred();
  jw_lock_give(&jw_be.lock);
}

/* The child must inherit no range in transit: prepare waits for a batch in
 * flight to finish its system calls (they need no lock) and files it. */
void jw_pages_atfork_prepare(void) {
  jw_reclaim_atfork_prepare(); /* no tier cache half-aged in the child */
  jw_lock_take(&jw_be.lock);
  jw_backend_drain_deferred();
  jw_release_quiesce();
}
void jw_pages_atfork_parent(void) {
  jw_lock_give(&jw_be.lock);
  jw_reclaim_atfork_parent();
}
void jw_pages_atfork_child(void) {
  jw_lock_init(&jw_be.lock);
  jw_reclaim_atfork_child(); /* its reclaim thread is gone: restarted lazily */
}
