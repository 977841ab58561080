/* malloc_iterate (Android's extension): every live block whose start lies in
 * a range, found from the allocator's own metadata.
 *
 * Design: docs/design/api.md, "Android's extensions". The walk visits the
 * roots the root map holds inside the range (root_map.h), and in each root
 * the head record of every range (record.h): a frontend slab's blocks, a
 * midend slab's blocks below its bump index, a LARGE range's block (at its
 * start, or at the interior granule an over-aligned block was registered
 * at), then the direct-mapping registry (huge.c). A slab block or a range is
 * free exactly when its second word holds FREE_KEY: every free block in a
 * slab carries it (on a free list, a remote list, a thread's bin or pending
 * chain, a midend class cache or a block cache), and so does a range that a
 * block cache holds; a block handed out had its key cleared. So blocks that
 * threads and tiers keep for reuse are not reported, with no look at their
 * caches.
 *
 * Runs with malloc disabled (android.c): no allocation call starts, the
 * reclaimer is held (no aging pass, no release batch), and the walk of the
 * roots holds the backend lock, so no root is unmapped under it; only calls
 * already in flight when the gate closed change blocks meanwhile (the blocks
 * they touch are reported or not). Never allocates; the callback must not
 * allocate either (it would pause for ever).
 */
#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "../../include/jwmalloc.h"
#include "../pages/lookup.h"
#include "../backend/release.h"
#include "../frontend/slab.h"
#include "../frontend/thread_cache.h"
#include "../midend/midend.h"
#include "android.h"
#include "huge.h"

typedef struct walk {
  uintptr_t lo, hi; /* report blocks starting in [lo, hi) */
  void (*fn)(uintptr_t base, size_t size, void *arg);
  void *arg;
  uint64_t fkey;
} walk;

/* The second word of a block in a live slab or range: FREE_KEY while it is
 * free, program data while it is live, which another thread may be writing
 * now (malloc_disable pauses allocation calls, not the program). The value is
 * only compared with FREE_KEY, a secret random 64-bit value, so a live block
 * is taken for a free one with probability 2^-64 per block: the validated
 * racy read of concurrency.md, as the free fast path's tag read. Left alone
 * by the sanitizers for that reason (and a free block is poisoned). */
static __attribute__((no_sanitize("address", "thread"))) uint64_t key_word(uintptr_t b) {
  return jw_load((jw_atomic_u64 *)(b + offsetof(jw_block, key)), JW_RELAXED); /* validated above */
}

static inline void report(walk *w, uintptr_t p, size_t size) {
  if (p >= w->lo && p < w->hi) w->fn(p, size, w->arg);
}

/* Blocks of the frontend slab s (one granule). A pooled page (an empty slab
 * kept by a thread) holds no live block; a header whose class and capacity
 * disagree is a page being formatted by a call in flight: skipped. */
static void walk_small(walk *w, jw_slab *s) {
  if ((jw_load(&s->remote, JW_RELAXED) & JW_RS_MASK) == JW_RS_POOLED) return; /* quiet heap: relaxed */
  unsigned c = s->cls;
  if (c >= JW_NCLASSES || s->capacity != jw_class_blocks(c)) return;
  size_t size = jw_class_size[c];
  uintptr_t b = (uintptr_t)jw_slab_blocks(s);
  for (unsigned i = 0; i < s->capacity; i++, b += size)
    if (key_word(b) != w->fkey) report(w, b, size);
}

/* Blocks of the midend slab s of `granules`, below its bump index (the rest
 * was never handed out). */
static void walk_mid(walk *w, jw_mid_slab *s, uint32_t granules) {
  unsigned c = s->cls;
  if (c >= JW_MID_NCLASSES || s->granules != granules) return; /* a slab being formatted */
  uint32_t n = jw_load(&s->bump, JW_RELAXED); /* quiet heap: relaxed */
  if (n > s->capacity) n = s->capacity;
  size_t size = jw_mid_class_size[c];
  uintptr_t b = (uintptr_t)s + JW_MID_HEADER;
  for (uint32_t i = 0; i < n; i++, b += size)
    if (key_word(b) != w->fkey) report(w, b, size);
}

/* The over-aligned block of the marked LARGE range of `n` granules at
 * recs[g]: at its first interior record (jw_pages_mark_interior), up to the
 * range's end. */
static void walk_marked(walk *w, uintptr_t base, jw_rec *recs, uint32_t g, uint32_t n) {
  for (uint32_t i = g + 1; i < g + n; i++) {
    if (jw_tag_state(jw_load(&recs[i].tag, JW_RELAXED)) != JW_RS_INTERIOR) continue; /* quiet heap */
    report(w, base + ((uintptr_t)i << JW_GRANULE_SHIFT), (size_t)(g + n - i) << JW_GRANULE_SHIFT);
    return;
  }
}

/* Every range of the root at base whose records are recs, head by head. */
static void walk_root(walk *w, uintptr_t base, jw_rec *recs) {
  for (uint32_t g = 0; g < JW_ROOT_GRANULES;) {
    uint32_t tag = jw_load(&recs[g].tag, JW_RELAXED); /* quiet heap: relaxed */
    unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
    if (!jw_state_is_head(st) || c >= JW_LOOKUP_RANGE_CLASSES) {
      g++; /* a record inside a range: only heads start one */
      continue;
    }
    uint32_t n = jw_class_granules[c];
    uintptr_t start = base + ((uintptr_t)g << JW_GRANULE_SHIFT);
    size_t bytes = (size_t)n << JW_GRANULE_SHIFT;
    if (start < w->hi && start + bytes > w->lo) {
      if (st == JW_RS_LIVE_SMALL) walk_small(w, (jw_slab *)start);
      else if (st == JW_RS_LIVE_MID) walk_mid(w, (jw_mid_slab *)start, n);
      else if (st == JW_RS_LIVE_LARGE && key_word(start) != w->fkey) report(w, start, bytes);
      else if (st == JW_RS_LIVE_LARGE_MARKED) walk_marked(w, base, recs, g, n);
    }
    g += n;
  }
}

/* The roots the root map registers in [lo, hi): only the level-1 entries of
 * the range and the leaves that exist are read. */
static void walk_roots(walk *w) {
  /* What the root map covers (its level-1 table times a leaf's span). */
  uint64_t span = (uint64_t)JW_ROOT_MAP_L1_SIZE << JW_ROOT_MAP_L1_SHIFT, hi = w->hi < span ? w->hi : span;
  if (w->lo >= hi) return;
  uint64_t first = w->lo >> JW_ROOT_SHIFT, last = (hi - 1) >> JW_ROOT_SHIFT; /* root numbers */
  unsigned l2_bits = JW_ROOT_MAP_L1_SHIFT - JW_ROOT_SHIFT;
  for (uint64_t r = first; r <= last;) {
    /* Acquire: the leaf's contents (root_map.h). */
    jw_atomic_ptr *leaf = jw_load(&jw_root_map_l1[r >> l2_bits], JW_ACQUIRE);
    uint64_t leaf_end = ((r >> l2_bits) + 1) << l2_bits; /* first root of the next leaf */
    for (; leaf != NULL && r < leaf_end && r <= last; r++) {
      jw_rec *recs = jw_load(&leaf[r & (JW_ROOT_MAP_L2_SIZE - 1)], JW_ACQUIRE); /* the records */
      if (recs != NULL) walk_root(w, (uintptr_t)(r << JW_ROOT_SHIFT), recs);
    }
    r = leaf_end;
  }
}

static void huge_found(uintptr_t start, size_t size, void *arg) {
  walk *w = arg;
  w->fn(start, size, w->arg);
}

JW_EXPORT int jw_malloc_iterate(uintptr_t base, size_t size, void (*callback)(uintptr_t, size_t, void *),
                                void *arg) {
  if (callback == NULL) {
    errno = EINVAL;
    return -1;
  }
  walk w = {.lo = base, .hi = base + size < base ? UINTPTR_MAX : base + size, .fn = callback, .arg = arg};
  w.fkey = jw_load(&jw_free_key, JW_RELAXED); /* set once at init */
  int own = !jw_malloc_is_disabled();
  if (own) jw_malloc_disable();
  /* The backend lock over the walk: a free in flight that would unmap an
   * entirely free root (reclamation off, past JWMALLOC_RETAIN_ROOTS) waits
   * its turn as a deferred free, so no root's records are reused for
   * another root under the walk. Calls in flight take the lock-free paths
   * meanwhile (their frees are deferred). */
  jw_release_lock(1);
  walk_roots(&w);
  jw_release_unlock();
  jw_huge_each(w.lo, w.hi, huge_found, &w);
  if (own) jw_malloc_enable();
  return 0;
}
