/* Tier dispatch for every call that misses the fast paths (see core.h and
 * docs/design/api.md). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../backend/backend.h"
#include "../pages/lookup.h"
#include "../common/config.h"
#include "../common/counter.h"
#include "../common/log.h"
#include "../frontend/page_pool.h"
#include "../midend/midend.h"
#include "core.h"
#include "counters.h"
#include "fastpath.h"
#include "gate.h"
#include "huge.h"
#include "huge_cache.h"
#include "large.h"
#include "runtime.h"

/* ---- handing blocks out ---- */

/* A malloc slow path pushes the thread's pending chain of cross-thread frees
 * first (frontend.md, "Batched remote frees", flush point 2). */
static inline void flush_chain(jw_tls *t) {
  if (JW_UNLIKELY(t->rf_mask != 0)) jw_free_remote_flush(t);
}

/* A small block of class c for the calling thread; without a thread cache,
 * the midend's smallest class serves it. */
static void *small_alloc(unsigned c) {
  jw_tls *t = &jw_tls_state;
  jw_tcache *tc = JW_LIKELY(t->state == JW_TLS_ACTIVE) ? t->tc : jw_thread_cache(t);
  jw_block *b;
  if (tc) {
    b = t->bin[c];
    if (b == NULL) {
      flush_chain(t);
      return jw_tc_refill(t, tc, c); /* a tail call */
    }
    t->bin[c] = jw_block_next(b);
    t->room[c]++;
    jw_unpoison(b, jw_class_size[c]);
    b->key = 0;
    t->n_malloc++;
    return b;
  }
  flush_chain(t);
  bool fallback;
  b = jw_mid_alloc_uncached(&fallback);
  if (b) {
    jw_counter_add(&jw_api_counters.small_via_mid, 1);
    jw_unpoison(b, jw_mid_class_size[0]);
    b->key = 0;
    return b;
  }
  return fallback ? jw_large_alloc(jw_class_size[c], JW_GRANULE, NULL) : NULL;
}

/* The calling thread's cache, attached on first use (NULL: none now). */
static inline jw_tcache *cache_of(jw_tls *t) { return JW_LIKELY(t->state == JW_TLS_ACTIVE) ? t->tc : jw_thread_cache(t); }

/* Block-cache bin of a request of 2017 bytes to 1 MiB. */
static inline unsigned bc_bin_of(size_t n) {
  return n <= JW_MID_MAX ? jw_mid_class_of(n) : jw_bc_range_bin[(n + 4095) >> 12]; /* 4 KiB units (block_cache.h) */
}

/* A block of bin i from the calling thread's block cache (docs/design/
 * frontend.md, "The block cache"), ready to hand out; NULL on a miss. */
static inline __attribute__((always_inline)) void *bc_alloc(jw_tls *t, unsigned i) {
  jw_tcache *tc = cache_of(t);
  if (JW_UNLIKELY(tc == NULL)) return NULL;
  jw_block *b = jw_bc_take(&tc->bc, &tc->pool_lock, i);
  if (JW_UNLIKELY(b == NULL)) return NULL;
  if (i < JW_BC_MID_BINS) t->n_mid_malloc++;
  else t->n_large_malloc++;
  jw_unpoison(b, jw_bc_bytes[i]);
  b->key = 0;
  return b;
}

/* 2017-16384 bytes, the block cache missed: the midend. */
static void *mid_alloc(size_t n) {
  flush_chain(&jw_tls_state);
  unsigned mc = jw_mid_class_of(n);
  bool fallback;
  jw_block *b = jw_mid_alloc(mc, &fallback);
  if (b) {
    jw_unpoison(b, jw_mid_class_size[mc]);
    b->key = 0;
    return b;
  }
  return fallback ? jw_large_alloc(n, JW_GRANULE, NULL) : NULL;
}

/* Any size at alignment <= 16 (the malloc path after the fast path; the
 * ranges of 64 KiB-1 MiB come here from jw_malloc_slow: the block cache
 * first, frontend.md "Ranges of 80 KiB-1 MiB"). */
static void *alloc_any(size_t n, bool *zeroed) {
  if (n <= JW_SMALL_MAX) return small_alloc(jw_class_of(n));
  if (n <= (size_t)JW_BC_RANGE_MAX_GRANULES << 12) {
    void *p = bc_alloc(&jw_tls_state, bc_bin_of(n));
    if (p) {
      if (zeroed) *zeroed = false;
      return p;
    }
  }
  if (n <= JW_MID_MAX) return mid_alloc(n);
  flush_chain(&jw_tls_state);
  if (n <= JW_LARGE_MAX) return jw_large_alloc(n, JW_GRANULE, zeroed);
  if (n > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  return jw_huge_alloc(n, JW_PAGE, zeroed);
}

/* jw_malloc_slow's block-cache miss for n (2017 bytes-64 KiB), the cache
 * attached first if the thread has none yet. */
static JW_NOINLINE void *cache_miss(size_t n) {
  flush_chain(&jw_tls_state);
  void *p = bc_alloc(&jw_tls_state, bc_bin_of(n));
  if (p != NULL) return p;
  return n <= JW_MID_MAX ? mid_alloc(n) : jw_large_alloc(n, JW_GRANULE, NULL);
}

void *jw_malloc_slow(size_t n) {
  jw_gate_pass(); /* malloc_disable (gate.h): one load */
  /* The fast path missed: a bin to refill, */
  if (n <= JW_SMALL_MAX) return small_alloc(jw_class_of(n));
  /* or a midend block or range up to 64 KiB: the block cache first (every
   * other path a tail call, so that a hit needs no stack frame); larger
   * ranges try it in alloc_any. */
  if (JW_LIKELY(n <= (size_t)JW_BC_SMALL_RANGE_MAX_GRANULES << 12)) {
    jw_tls *t = &jw_tls_state;
    if (JW_UNLIKELY(t->state != JW_TLS_ACTIVE)) return cache_miss(n);
    unsigned i = bc_bin_of(n);
    jw_block *b = jw_bc_take(&t->tc->bc, &t->tc->pool_lock, i);
    if (JW_UNLIKELY(b == NULL)) return cache_miss(n);
    if (i < JW_BC_MID_BINS) t->n_mid_malloc++;
    else t->n_large_malloc++;
    jw_unpoison(b, jw_bc_bytes[i]);
    b->key = 0;
    return b;
  }
  return alloc_any(n, NULL);
}

void *jw_calloc_impl(size_t n, size_t size) {
  jw_gate_pass();
  size_t total;
  if (__builtin_mul_overflow(n, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  bool zeroed = false;
  void *p = jw_fast_malloc(total);
  if (p == NULL) p = alloc_any(total, &zeroed);
  if (p && !zeroed) memset(p, 0, total);
  return p;
}

/* Smallest frontend class >= n whose blocks are `align`-aligned (<= 64). */
static int small_class_aligned(size_t n, size_t align) {
  for (unsigned c = jw_class_of(n); c < JW_NCLASSES; c++)
    if (jw_class_size[c] % align == 0) return (int)c;
  return -1;
}

void *jw_memalign_impl(size_t align, size_t n) {
  jw_gate_pass();
  if (align <= JW_MIN_ALIGN) return alloc_any(n, NULL);
  if (n > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  if (align <= 64) { /* frontend classes with aligned sizes, midend blocks are 64-aligned */
    int c = n <= JW_SMALL_MAX ? small_class_aligned(n, align) : -1;
    if (c >= 0) return small_alloc((unsigned)c);
    if (n <= JW_MID_MAX) return mid_alloc(n);
  }
  if (jw_large_fits(n, align)) return jw_large_alloc(n, align, NULL);
  return jw_huge_alloc(n, align, NULL);
}

/* ---- taking blocks back ---- */

/* The header tag of s, a page the backend says is a frontend slab: its
 * owner may write it meanwhile (relaxed), and only a match with the
 * caller's own key is acted on. The checker reads it unchecked
 * (docs/design/verification.md). */
static inline uint64_t slab_tag(jw_slab *s) {
#ifdef JW_VERIFY
  return vrf_validated_load(&s->tag.v, sizeof s->tag.v, VRF_SITE);
#else
  return jw_load(&s->tag, JW_RELAXED);
#endif
}

void jw_fast_free_overflow(jw_tls *t, unsigned c) { jw_tc_bin_overflow(t, t->tc, c); }

JW_NOINLINE void jw_free_remote_flush(jw_tls *t) {
  void *bad = jw_tc_remote_flush(t, t->state == JW_TLS_ACTIVE ? t->tc : NULL);
  if (JW_UNLIKELY(bad != NULL)) jw_report_bad("free", "double free detected", bad);
}

/* What a pointer is, after validation (bad ones are reported). */
typedef enum { PTR_BAD, PTR_SMALL, PTR_MID, PTR_LARGE, PTR_HUGE } ptr_kind;

/* Reports p, which no tier accepts as a live block, in one line that says
 * what the backend's metadata lookup found there (docs/design/api.md, "Bad
 * input"): inside a range but not where a block starts, or in a free range
 * (a double free or a pointer into freed memory), or outside jwmalloc. */
static void report_invalid(const char *op, const void *p) {
  jw_range_info info;
  jw_ptr_class c = jw_backend_classify(p, &info);
  char why[160];
  size_t off = (size_t)((const char *)p - (const char *)info.start);
  unsigned kib = (unsigned)(info.granules * (JW_GRANULE >> 10));
  switch (c) {
    case JW_PTR_INTERIOR:
      jw_format(why, sizeof why, "invalid pointer: %zu bytes into the live %u KiB range at %p", off, kib,
                info.start);
      break;
    case JW_PTR_RESOLVED:
    case JW_PTR_RANGE_START:
      jw_format(why, sizeof why, "invalid pointer: not a block start in the live %u KiB %s at %p", kib,
                info.kind == JW_KIND_SMALL_SLAB ? "slab" : info.kind == JW_KIND_MID_SLAB ? "midend slab" : "range",
                info.start);
      break;
    case JW_PTR_FREE:
      jw_format(why, sizeof why, "invalid pointer: inside the free %u KiB range at %p (double free or freed memory)",
                kib, info.start);
      break;
    default:
      jw_format(why, sizeof why, "invalid pointer");
      break;
  }
  jw_report_bad(op, why, p);
}

/* op names the call in reports ("free", "realloc", ...). */
static ptr_kind classify(const void *p, jw_range_info *info, const char *op, bool check_free) {
  ptr_kind k = PTR_BAD;
  if (jw_pages_lookup_inline(p, info)) {
    if (info->kind == JW_KIND_SMALL_SLAB && jw_slab_is_block(jw_slab_of(p), p)) k = PTR_SMALL;
    else if (info->kind == JW_KIND_MID_SLAB && jw_mid_is_block(info, p)) k = PTR_MID;
    else if (info->kind == JW_KIND_LARGE && jw_large_is_block(info, p)) k = PTR_LARGE;
  } else if (jw_huge_usable(p)) {
    k = PTR_HUGE;
  }
  if (k == PTR_BAD) {
#ifdef JW_DEBUG
    jw_slab *sl = jw_slab_of(p);
    jw_dprintf(2, "debug: header cls %u cap %u where %u live %u tag %llx remote %llx\n", sl->cls, sl->capacity,
               sl->where, sl->live, (unsigned long long)jw_load(&sl->tag, JW_RELAXED),
               (unsigned long long)jw_load(&sl->remote, JW_RELAXED));
#endif
    report_invalid(op, p);
    return PTR_BAD;
  }
  /* Slab blocks carry FREE_KEY while free, ranges while a thread's block
   * cache holds them (set once at init: relaxed). */
  if (check_free && (k == PTR_SMALL || k == PTR_MID || (k == PTR_LARGE && p == info->start)) &&
      jw_block_key((const jw_block *)p) == jw_load(&jw_free_key, JW_RELAXED)) {
    jw_report_bad(op, "double free detected", p);
    return PTR_BAD;
  }
  return k;
}

/* free_remote's general case: counts the free, then batches it (or pushes
 * it alone when this thread's exit hook is not known to run). */
static JW_NOINLINE void free_remote_slow(jw_tls *t, jw_slab *s, void *p) {
  jw_tcache *tc = t->state == JW_TLS_ACTIVE ? t->tc : NULL;
  if (tc == NULL) {
    uint32_t n = ++t->n_free_uncached;
    if (JW_UNLIKELY(n == 1 || n >= JW_UNCACHED_FOLD_EVERY)) jw_uncached_frees_step(t); /* see runtime.h */
  }
  if (JW_LIKELY(t->rf_ok)) {
    uint64_t fkey = jw_load(&jw_free_key, JW_RELAXED); /* set once at init */
    if (tc) jw_counter_add_owner(&tc->n_remote_free, 1);
    if (jw_tc_chain_append(t, s, p, fkey)) return;
    /* A reported block is one of an earlier chain (its slab turned out to
     * be a pooled page). */
    void *bad = jw_tc_chain_add(t, tc, s, p, fkey);
    if (JW_UNLIKELY(bad != NULL)) jw_report_bad("free", "double free detected", bad);
    return;
  }
  if (!jw_tc_free_remote(tc, s, p)) jw_report_bad("free", "double free detected", p);
}

/* Frees p, a validated live block of slab s that is not the caller's: the
 * cross-thread free, batched on the thread's pending chain of its class
 * (frontend.md, "Batched remote frees"). Out of line and reached by a tail
 * call, so that jw_free_slow's other paths (midend blocks, ranges) keep no
 * stack frame; the common case (the chain is p's slab's, the free counted
 * without a fold) makes no call, so it keeps none either. */
static JW_NOINLINE void free_remote(jw_tls *t, jw_slab *s, void *p) {
  jw_poison(p, jw_class_size[s->cls]);
  bool cached = t->state == JW_TLS_ACTIVE;
  uint32_t n = t->n_free_uncached;
  /* Uncached: the count's first free and a full batch take the slow path. */
  if (JW_LIKELY(cached || n - 1 < JW_UNCACHED_FOLD_EVERY - 2) &&
      jw_tc_chain_append(t, s, p, jw_load(&jw_free_key, JW_RELAXED))) { /* the key: set once at init */
    if (cached) jw_counter_add_owner(&t->tc->n_remote_free, 1);
    else t->n_free_uncached = n + 1;
    return;
  }
  free_remote_slow(t, s, p); /* a tail call */
}

/* Whether slab s, holding a validated live block the caller is freeing, is
 * the caller's own. Keys have the low bit clear, and the key is 0 without a
 * thread cache. A tag of 0 is an abandoned slab (or no live slab): a thread
 * with a cache adopts it (frontend.md, "Thread exit, abandoned slabs and
 * adoption"), so that its later frees into it take the fast path and its
 * free blocks serve the thread's mallocs. */
static inline __attribute__((always_inline)) bool small_is_own(jw_tls *t, jw_slab *s) {
  uint64_t key = t->key, tag = slab_tag(s);
  if (JW_UNLIKELY(tag == 0) && key != 0 && jw_tc_adopt(t->tc, s)) return true;
  return key != 0 && (tag | 1) == (key | 1);
}

/* Frees p, a validated live block of slab s; own: s is the caller's
 * (then t has a thread cache). */
static inline __attribute__((always_inline)) void free_small_block(jw_tls *t, jw_slab *s, void *p, bool own) {
  if (!own) {
    free_remote(t, s, p); /* a tail call */
    return;
  }
  jw_poison(p, jw_class_size[s->cls]);
  t->n_free++;
  if (!jw_tc_free(t, t->tc, s, p)) jw_report_bad("free", "double free detected", p);
}

static JW_NOINLINE void free_general(void *p);

/* ---- midend blocks and ranges: the thread's block cache ---- */

/* p lies in the live midend slab s: when it is a block start that is not
 * free, frees it (block cache, else the midend) and returns true; otherwise
 * false, for the general path to decide and report. */
static inline __attribute__((always_inline)) bool free_mid(jw_tls *t, void *p, jw_mid_slab *s) {
  if (JW_UNLIKELY(!jw_mid_block_at(s, p))) return false;
  bool cached = JW_LIKELY(t->state == JW_TLS_ACTIVE);
  uint64_t fkey = cached ? t->fkey : jw_load(&jw_free_key, JW_RELAXED); /* set once at init */
  if (JW_UNLIKELY(jw_block_key(p) == fkey)) return false; /* double free */
  unsigned cls = s->cls;
  jw_poison(p, jw_mid_class_size[cls]);
  jw_block_set_free(p, NULL, fkey);
  if (cached && jw_bc_put(&t->tc->bc, &t->tc->pool_lock, cls, p, &t->n_mid_free)) return true;
  jw_mid_free(s, p);
  return true;
}

/* p is the start of the live LARGE range of `granules`: when it is not
 * cached already (a double free), frees it and returns true. A range of a
 * cached class (20 KiB-1 MiB, not over-aligned, so it has no interior
 * records) goes into the block cache, marked with FREE_KEY there. */
static inline __attribute__((always_inline)) bool free_large(jw_tls *t, void *p, uint32_t granules) {
  bool cached = JW_LIKELY(t->state == JW_TLS_ACTIVE);
  uint64_t fkey = cached ? t->fkey : jw_load(&jw_free_key, JW_RELAXED); /* set once at init */
  if (JW_UNLIKELY(jw_block_key(p) == fkey)) return false; /* cached: a double free */
  uint32_t units = granules << (JW_GRANULE_SHIFT - 12); /* 4 KiB units (block_cache.h) */
  if (units <= JW_BC_RANGE_MAX_GRANULES && cached) { /* up to 1 MiB */
    unsigned i = jw_bc_range_bin[units];
    if (i != JW_BC_NONE) {
      jw_poison(p, (size_t)granules << JW_GRANULE_SHIFT);
      jw_block_set_free(p, NULL, fkey);
      if (jw_bc_put(&t->tc->bc, &t->tc->pool_lock, i, p, &t->n_large_free)) return true;
      jw_block_set_free(p, NULL, 0); /* no FREE_KEY outside a thread cache */
    }
  }
  jw_large_free(p, granules);
  return true;
}

/* p lies in the live frontend slab s and the fast path did not take it:
 * another thread's slab (a cross-thread free, frontend.md "Frees from other
 * threads"), or one of the caller's own (tag key or key | 1) freed some other
 * way (realloc, a double free). When it is a block start not already free,
 * frees it and returns true; otherwise false, for the general path. */
static inline __attribute__((always_inline)) bool free_small(jw_tls *t, void *p, jw_slab *s) {
  if (!jw_slab_is_block(s, p) || jw_block_key((const jw_block *)p) == jw_load(&jw_free_key, JW_RELAXED))
    return false;
  free_small_block(t, s, p, small_is_own(t, s));
  return true;
}

/* free()'s slow path past the gate (jw_free_slow, free_any). */
static inline __attribute__((always_inline)) void free_body(void *p) {
  jw_tls *t = &jw_tls_state;
  /* A free into another GiB than the last: the fast path again with that
   * GiB's tag table (page_tag.h), which is where a thread's first free goes. */
  if (t->tag_last - ((uintptr_t)p >> 12) >= JW_TAG_WORDS && t->state == JW_TLS_ACTIVE &&
      jw_tag_cache(&t->tag_last, &t->tag_words, (uintptr_t)p) && jw_fast_free(p))
    return;
  if ((uintptr_t)p & (JW_GRANULE - 1)) {
    /* A frontend block the fast path did not take (another thread's), or a
     * midend block (never page-aligned: blocks start at 64 + i x 512k). One
     * root-map walk, whose record says which. */
    jw_rec *r = jw_pages_record(p);
    if (r != NULL) {
      if (jw_rec_is_small_slab(r)) {
        if (free_small(t, p, jw_slab_of(p))) return;
      } else {
        uintptr_t s = jw_pages_mid_slab_rec(r, p);
        if (s != 0 && free_mid(t, p, (jw_mid_slab *)s)) return;
      }
    }
  } else {
    /* A range freed at its start (NULL resolves to none: no root at 0). */
    uint32_t granules = jw_pages_large_at(p);
    if (granules != 0 && free_large(t, p, granules)) return;
  }
  if (p != NULL) free_general(p);
}

void jw_free_slow(void *p) {
  jw_gate_pass();
  free_body(p);
}

/* The same for a call already past the gate (realloc's free of the old
 * block, a parked slab's bad pointer): a call never pauses half done. */
static JW_NOINLINE void free_any(void *p) { free_body(p); }

/* Every other pointer: the backend's lookup decides, bad ones are reported
 * (the paths above take every valid block of the tiers; these cases serve
 * direct mappings and what they decline). */
static JW_NOINLINE void free_general(void *p) {
  jw_range_info info;
  switch (classify(p, &info, "free", true)) {
    case PTR_SMALL: {
      jw_tls *t = &jw_tls_state;
      jw_slab *s = jw_slab_of(p);
      free_small_block(t, s, p, small_is_own(t, s));
      break;
    }
    case PTR_MID: /* validated: free_mid takes it */
      free_mid(&jw_tls_state, p, info.start);
      break;
    case PTR_LARGE: /* validated (a cached range was reported as freed twice) */
      if (p != info.start) jw_large_free(info.start, info.granules); /* over-aligned: never cached */
      else if (!free_large(&jw_tls_state, p, info.granules)) jw_report_bad("free", "double free detected", p);
      break;
    case PTR_HUGE:
      if (!jw_huge_free(p)) jw_report_bad("free", "double free detected", p);
      break;
    case PTR_BAD:
      break;
  }
}

static size_t usable_of(ptr_kind k, const jw_range_info *info, const void *p) {
  switch (k) {
    case PTR_SMALL:
      return jw_class_size[jw_slab_of(p)->cls];
    case PTR_MID:
      return jw_mid_usable(info);
    case PTR_LARGE:
      return jw_large_usable(info, p);
    case PTR_HUGE:
      return jw_huge_usable(p);
    default:
      return 0;
  }
}

size_t jw_usable_impl(const void *p) {
  jw_gate_pass();
  if (p == NULL) return 0;
  jw_range_info info;
  ptr_kind k = classify(p, &info, "malloc_usable_size", false);
  return usable_of(k, &info, p);
}

void *jw_realloc_impl(void *p, size_t n) {
  jw_gate_pass();
  if (p == NULL) {
    void *q = jw_fast_malloc(n);
    return q ? q : alloc_any(n, NULL);
  }
  jw_range_info info;
  ptr_kind k = classify(p, &info, "realloc", true);
  if (k == PTR_BAD) {
    errno = EINVAL;
    return NULL;
  }
  if (n == 0) { /* glibc: frees, returns NULL */
    free_any(p);
    return NULL;
  }
  jw_counter_add(&jw_api_counters.reallocs, 1);
  size_t old = usable_of(k, &info, p);
  if (k == PTR_HUGE && n > JW_LARGE_MAX) {
    void *q = jw_huge_resize(p, n);
    if (q) jw_counter_add(&jw_api_counters.reallocs_in_place, q == p);
    return q;
  }
  /* In place when it fits and does not waste more than half. */
  if (n <= old && (n >= old / 2 || (k == PTR_SMALL && jw_class_of(n) == jw_slab_of(p)->cls))) {
    jw_counter_add(&jw_api_counters.reallocs_in_place, 1);
    return p;
  }
  void *q = jw_fast_malloc(n);
  if (q == NULL) q = alloc_any(n, NULL);
  if (q == NULL) return NULL;
  memcpy(q, p, old < n ? old : n);
  if (!jw_fast_free(p)) free_any(p);
  return q;
}

int jw_trim_impl(void) {
  jw_gate_pass();
  jw_tls *t = &jw_tls_state;
  bool released = false;
  flush_chain(t); /* the pending chain first: its slab may be this thread's to trim (an adopted page) */
  if (t->state == JW_TLS_ACTIVE) released = jw_tc_trim(t, t->tc);
  released |= jw_mid_trim();
  released |= jw_huge_cache_drop();
  return released;
}
