/* Tier dispatch for every call that misses the fast paths (see core.h and
 * docs/design/api.md). */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "../backend/backend.h"
#include "../common/config.h"
#include "../common/counter.h"
#include "../common/log.h"
#include "../frontend/page_pool.h"
#include "../midend/midend.h"
#include "core.h"
#include "counters.h"
#include "fastpath.h"
#include "huge.h"
#include "large.h"
#include "runtime.h"

/* ---- handing blocks out ---- */

/* A small block of class c for the calling thread; without a thread cache,
 * the midend's smallest class serves it. */
static void *small_alloc(unsigned c) {
  jw_tls *t = &jw_tls_state;
  jw_tcache *tc = jw_thread_cache(t);
  jw_block *b;
  if (tc) {
    b = t->bin[c];
    if (b) {
      t->bin[c] = jw_block_next(b);
    } else {
      b = jw_tc_refill(t, tc, c);
      if (b == NULL) return NULL;
    }
    jw_unpoison(b, jw_class_size[c]);
    b->key = 0;
    t->n_malloc++;
    return b;
  }
  bool fallback;
  b = jw_mid_alloc(0, &fallback);
  if (b) {
    jw_counter_add(&jw_api_counters.small_via_mid, 1);
    jw_unpoison(b, jw_mid_class_size[0]);
    b->key = 0;
    return b;
  }
  return fallback ? jw_large_alloc(jw_class_size[c], JW_PAGE, NULL) : NULL;
}

static void *mid_alloc(size_t n) {
  unsigned mc = jw_mid_class_of(n);
  bool fallback;
  jw_block *b = jw_mid_alloc(mc, &fallback);
  if (b) {
    jw_unpoison(b, jw_mid_class_size[mc]);
    b->key = 0;
    return b;
  }
  return fallback ? jw_large_alloc(n, JW_PAGE, NULL) : NULL;
}

/* Any size at alignment <= 16 (the malloc path after the fast path). */
static void *alloc_any(size_t n, bool *zeroed) {
  if (n <= JW_SMALL_MAX) return small_alloc(jw_class_of(n));
  if (n <= JW_MID_MAX) return mid_alloc(n);
  if (n <= JW_LARGE_MAX) return jw_large_alloc(n, JW_PAGE, zeroed);
  if (n > PTRDIFF_MAX) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = jw_huge_alloc(n, JW_PAGE);
  if (p && zeroed) *zeroed = true;
  return p;
}

void *jw_malloc_slow(size_t n) { return alloc_any(n, NULL); }

void *jw_calloc_impl(size_t n, size_t size) {
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
  return jw_huge_alloc(n, align);
}

/* ---- taking blocks back ---- */

void jw_fast_free_emptied(jw_tls *t, jw_slab *s) { jw_tc_slab_emptied(t->tc, s); }

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

/* op names the call in reports ("free", "realloc", ...). rec: p's record
 * when the caller already walked the root map for it (jw_pages_record), else
 * NULL. */
static ptr_kind classify_rec(const void *p, jw_rec *rec, jw_range_info *info, const char *op, bool check_free) {
  ptr_kind k = PTR_BAD;
  if (rec ? jw_pages_lookup_rec(rec, p, info) : jw_pages_lookup(p, info)) {
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
  /* Slab blocks carry FREE_KEY while free (set once at init: relaxed). */
  if (check_free && (k == PTR_SMALL || k == PTR_MID) &&
      jw_block_key((const jw_block *)p) == jw_load(&jw_free_key, JW_RELAXED)) {
    jw_report_bad(op, "double free detected", p);
    return PTR_BAD;
  }
  return k;
}

static ptr_kind classify(const void *p, jw_range_info *info, const char *op, bool check_free) {
  return classify_rec(p, NULL, info, op, check_free);
}

/* Frees p, a validated live block of slab s; own: s is the caller's
 * (then t has a thread cache). */
static inline __attribute__((always_inline)) void free_small_block(jw_tls *t, jw_slab *s, void *p, bool own) {
  jw_poison(p, jw_class_size[s->cls]);
  bool ok;
  if (own) {
    t->n_free++;
    ok = jw_tc_free(t, t->tc, s, p);
  } else {
    jw_tcache *tc = t->state == JW_TLS_ACTIVE ? t->tc : NULL;
    if (tc == NULL) jw_counter_add(&jw_api_counters.small_frees_no_cache, 1);
    ok = jw_tc_free_remote(tc, s, p);
  }
  if (!ok) jw_report_bad("free", "double free detected", p);
}

/* The frontend's share of the free slow path: a block of a small slab that
 * the fast path did not take (frontend.md, "Frees from other threads"):
 * the caller's own parked slab, whose tag (the thread's key with the low bit
 * set) proves ownership as on the fast path; or any other thread's slab,
 * whose page the backend's record must show as a live SMALL_SLAB before its
 * header is read (one root-map lookup, no jw_range_info). Then the same
 * checks as the general path: a block boundary of the slab's class, not
 * already free. Returns false when p is not such a block; the general path
 * then decides and reports. */
static inline __attribute__((always_inline)) bool free_small(void *p, jw_rec **rec) {
  uintptr_t a = (uintptr_t)p;
  if ((a & 0xfc0) == 0 || (a & 15) != 0) return false; /* header, page start or misaligned */
  jw_tls *t = &jw_tls_state;
  jw_slab *s = jw_slab_of(p);
  /* The caller's slab: tag key (current, partial) or key | 1 (parked); keys
   * have the low bit clear, and key is 0 without a thread cache. */
  uint64_t key = t->key;
  bool own = key != 0 && (jw_fast_tag(s) | 1) == (key | 1);
  if (!own) {
    *rec = jw_pages_record(p); /* the general path reuses it (midend blocks) */
    if (*rec == NULL || !jw_rec_is_small_slab(*rec)) return false;
  }
  if (!jw_slab_is_block(s, p)) return false;
  if (jw_block_key((const jw_block *)p) == jw_load(&jw_free_key, JW_RELAXED)) {
    jw_report_bad("free", "double free detected", p);
    return true;
  }
  free_small_block(t, s, p, own);
  return true;
}

/* Every other pointer: the backend's lookup decides, bad ones are reported.
 * rec: p's record if free_small fetched it, else NULL. */
static __attribute__((noinline)) void free_general(void *p, jw_rec *rec) {
  jw_range_info info;
  switch (classify_rec(p, rec, &info, "free", true)) {
    case PTR_SMALL: { /* free_small takes every such block; kept for any it would not */
      jw_tls *t = &jw_tls_state;
      jw_slab *s = jw_slab_of(p);
      free_small_block(t, s, p, t->key != 0 && (jw_fast_tag(s) | 1) == (t->key | 1));
      break;
    }
    case PTR_MID: {
      jw_poison(p, jw_mid_usable(&info));
      jw_block_set_free(p, NULL, jw_load(&jw_free_key, JW_RELAXED));
      jw_mid_free(&info, p);
      break;
    }
    case PTR_LARGE:
      jw_large_free(&info);
      break;
    case PTR_HUGE:
      if (!jw_huge_free(p)) jw_report_bad("free", "double free detected", p);
      break;
    case PTR_BAD:
      break;
  }
}

void jw_free_slow(void *p) {
  jw_rec *rec = NULL;
  if (p == NULL || free_small(p, &rec)) return;
  free_general(p, rec);
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
  if (p == NULL) return 0;
  jw_range_info info;
  ptr_kind k = classify(p, &info, "malloc_usable_size", false);
  return usable_of(k, &info, p);
}

void *jw_realloc_impl(void *p, size_t n) {
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
    jw_free_slow(p);
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
  if (!jw_fast_free(p)) jw_free_slow(p);
  return q;
}

int jw_trim_impl(void) {
  jw_tls *t = &jw_tls_state;
  bool released = false;
  if (t->state == JW_TLS_ACTIVE) released = jw_tc_trim(t, t->tc);
  released |= jw_mid_trim();
  return released;
}
