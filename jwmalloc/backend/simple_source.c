/* A simple page source: TEMPORARY, until the closed-sibling-tree backend of
 * issue 3 (brief "Backend", "Metadata") replaces it behind the same
 * interface (page_source.h). jwmalloc/CMakeLists.txt selects it in one line.
 *
 * - Roots: 4 MiB, 4 MiB-aligned spans from jw_os_map, registered in the root
 *   map; a root that becomes entirely free is unmapped unless it is the only
 *   entirely free root (kept as a spare against map/unmap ping-pong).
 * - Allocation: first fit in a 1024-bit used bitmap per root, exact granule
 *   counts (the "range size class" is the request itself).
 * - Lookup: one 32-bit atomic record per granule, written for every granule
 *   of SMALL_SLAB and MID_SLAB ranges and for the first (and marked interior)
 *   granules of LARGE ranges; lock-free.
 * - Freed ranges of 64 KiB or more are released with MADV_DONTNEED at once;
 *   smaller ones stay resident (there is no reclamation policy here; part 3
 *   brings one).
 * - One global spin lock around alloc and free: the one blocking lock left on
 *   malloc/free paths (docs/design/concurrency.md), removed with this file.
 *
 * Root descriptors are never unmapped (recycled instead), so a lookup racing
 * with the unmapping of a root reads valid memory.
 */
#include <errno.h>
#include <string.h>

#include "../common/atomic.h"
#include "../common/lock.h"
#include "../common/log.h"
#include "../os/os_mem.h"
#include "page_source.h"
#include "root_map.h"

#define WORDS (JW_ROOT_GRANULES / 64)
#define RELEASE_MIN_GRANULES 16 /* 64 KiB */

/* Lookup record: kind | start granule << 2 | granules << 12 | interior << 23. */
#define REC(kind, start, n) ((uint32_t)(kind) | (uint32_t)(start) << 2 | (uint32_t)(n) << 12)
#define REC_KIND(r) ((r)&3u)
#define REC_START(r) (((r) >> 2) & 1023u)
#define REC_LEN(r) (((r) >> 12) & 2047u)
#define REC_INTERIOR (1u << 23)

typedef struct root {
  uintptr_t base;
  struct root *next;         /* lock: list of mapped roots / free descriptors */
  uint32_t free_granules;    /* lock */
  uint32_t hint;             /* lock: no free granule below */
  uint64_t used[WORDS];      /* lock: granule in a live range */
  uint64_t dirty[WORDS];     /* lock: granule written since mapped or released */
  jw_atomic_u32 rec[JW_ROOT_GRANULES];
} root;

static jw_lock lock;
static root *roots;      /* lock */
static root *free_descs; /* lock */
static uint32_t empty_roots; /* lock */
static jw_atomic_u64 st_mapped, st_peak_mapped, st_meta, st_peak_meta, st_live, st_cached, st_roots;

#define DESC_BYTES ((sizeof(root) + 4095) & ~(size_t)4095)

static void stat_add(jw_atomic_u64 *v, jw_atomic_u64 *peak, int64_t d) {
  /* Relaxed: statistics; updated under the lock. */
  uint64_t now = jw_load(v, JW_RELAXED) + (uint64_t)d;
  jw_store(v, now, JW_RELAXED);
  if (peak && now > jw_load(peak, JW_RELAXED)) jw_store(peak, now, JW_RELAXED);
}

static bool bit(const uint64_t *m, unsigned i) { return (m[i >> 6] >> (i & 63)) & 1; }

static void set_bits(uint64_t *m, unsigned i, unsigned n, bool on) {
  for (unsigned j = i; j < i + n; j++) {
    if (on) m[j >> 6] |= (uint64_t)1 << (j & 63);
    else m[j >> 6] &= ~((uint64_t)1 << (j & 63));
  }
}

/* First run of n free granules at or after `from`; -1 if none. */
static int find_run(const root *r, unsigned n, unsigned from) {
  unsigned i = from;
  while (i + n <= JW_ROOT_GRANULES) {
    uint64_t w = r->used[i >> 6] >> (i & 63);
    if (w & 1) { /* skip used granules */
      uint64_t inv = ~w;
      i += inv ? (unsigned)__builtin_ctzll(inv) : 64 - (i & 63);
      continue;
    }
    unsigned j = i;
    while (j < i + n) {
      w = r->used[j >> 6] >> (j & 63);
      if (w & 1) break;
      j += w ? (unsigned)__builtin_ctzll(w) : 64 - (j & 63);
      if (j > JW_ROOT_GRANULES) j = JW_ROOT_GRANULES;
      if (j >= JW_ROOT_GRANULES) break;
    }
    if (j >= i + n) return (int)i;
    i = j;
  }
  return -1;
}

static root *root_new(void) {
  void *base = jw_os_map(JW_ROOT, JW_ROOT);
  if (base == NULL) return NULL;
  root *r = free_descs;
  if (r) {
    free_descs = r->next;
  } else {
    r = jw_os_map(DESC_BYTES, 4096);
    if (r == NULL) {
      jw_os_unmap(base, JW_ROOT);
      return NULL;
    }
    stat_add(&st_meta, &st_peak_meta, (int64_t)DESC_BYTES);
  }
  memset(r->used, 0, sizeof r->used);
  memset(r->dirty, 0, sizeof r->dirty);
  for (unsigned i = 0; i < JW_ROOT_GRANULES; i++) jw_store(&r->rec[i], 0, JW_RELAXED); /* published by set() */
  r->base = (uintptr_t)base;
  r->free_granules = JW_ROOT_GRANULES;
  r->hint = 0;
  if (jw_root_map_set(r->base, r) != 0) {
    r->next = free_descs;
    free_descs = r;
    jw_os_unmap(base, JW_ROOT);
    return NULL;
  }
  /* Append: older roots are searched first (less fragmentation). */
  r->next = NULL;
  root **tail = &roots;
  while (*tail) tail = &(*tail)->next;
  *tail = r;
  stat_add(&st_mapped, &st_peak_mapped, (int64_t)JW_ROOT);
  stat_add(&st_roots, NULL, 1);
  empty_roots++;
  return r;
}

static void root_drop(root *r) {
  root **pp = &roots;
  while (*pp != r) pp = &(*pp)->next;
  *pp = r->next;
  jw_root_map_clear(r->base);
  jw_os_unmap((void *)r->base, JW_ROOT);
  r->next = free_descs;
  free_descs = r;
  stat_add(&st_mapped, NULL, -(int64_t)JW_ROOT);
  stat_add(&st_roots, NULL, -1);
}

static size_t dirty_count(const root *r, unsigned i, unsigned n) {
  size_t c = 0;
  for (unsigned j = i; j < i + n; j++) c += bit(r->dirty, j);
  return c;
}

void *jw_pages_alloc(size_t granules, jw_range_kind kind, uint32_t *out_granules, bool *out_zeroed) {
  if (granules == 0 || granules > JW_ROOT_GRANULES || kind == JW_KIND_NONE || kind > JW_KIND_LARGE) {
    errno = ENOMEM;
    return NULL;
  }
  unsigned n = (unsigned)granules;
  jw_lock_acquire(&lock);
  root *r;
  int at = -1;
  for (r = roots; r; r = r->next) {
    if (r->free_granules < n) continue;
    at = find_run(r, n, r->hint);
    if (at >= 0) break;
  }
  if (r == NULL) {
    r = root_new();
    if (r == NULL) {
      jw_lock_release(&lock);
      errno = ENOMEM;
      return NULL;
    }
    at = 0;
  }
  unsigned i = (unsigned)at;
  if (r->free_granules == JW_ROOT_GRANULES) empty_roots--;
  size_t dirty = dirty_count(r, i, n);
  set_bits(r->used, i, n, true);
  set_bits(r->dirty, i, n, true);
  r->free_granules -= n;
  if (i == r->hint) r->hint = i + n;
  uint32_t rec = REC(kind, i, n);
  /* Release: a lookup that reads the record (acquire) sees the range's
   * state; the caller publishes the range itself through its own hand-off. */
  if (kind == JW_KIND_LARGE) jw_store(&r->rec[i], rec, JW_RELEASE);
  else
    for (unsigned j = i; j < i + n; j++) jw_store(&r->rec[j], rec, JW_RELEASE);
  stat_add(&st_live, NULL, (int64_t)n << JW_GRANULE_SHIFT);
  stat_add(&st_cached, NULL, -(int64_t)(dirty << JW_GRANULE_SHIFT));
  jw_lock_release(&lock);
  if (out_granules) *out_granules = n;
  if (out_zeroed) *out_zeroed = dirty == 0;
  return (void *)(r->base + ((uintptr_t)i << JW_GRANULE_SHIFT));
}

void jw_pages_free(void *start) {
  root *r = jw_root_map_get(start);
  if (r == NULL) return;
  unsigned i = (unsigned)(((uintptr_t)start - r->base) >> JW_GRANULE_SHIFT);
  jw_lock_acquire(&lock);
  uint32_t rec = jw_load(&r->rec[i], JW_RELAXED); /* written under this lock */
  if (rec == 0 || REC_START(rec) != i) {
    jw_lock_release(&lock);
    return; /* not a live range start: callers check first */
  }
  unsigned n = REC_LEN(rec);
  if (REC_KIND(rec) != JW_KIND_LARGE || (rec & REC_INTERIOR))
    for (unsigned j = i; j < i + n; j++) jw_store(&r->rec[j], 0, JW_RELAXED);
  else jw_store(&r->rec[i], 0, JW_RELAXED);
  /* Relaxed: clearing publishes nothing; a racing lookup of a freed
   * range is a caller bug and may see either value. */
  set_bits(r->used, i, n, false);
  r->free_granules += n;
  if (i < r->hint) r->hint = i;
  stat_add(&st_live, NULL, -((int64_t)n << JW_GRANULE_SHIFT));
  if (n >= RELEASE_MIN_GRANULES) {
    jw_os_release(start, (size_t)n << JW_GRANULE_SHIFT);
    set_bits(r->dirty, i, n, false);
  } else {
    stat_add(&st_cached, NULL, (int64_t)n << JW_GRANULE_SHIFT);
  }
  if (r->free_granules == JW_ROOT_GRANULES) {
    if (empty_roots >= 1) {
      stat_add(&st_cached, NULL, -(int64_t)(dirty_count(r, 0, JW_ROOT_GRANULES) << JW_GRANULE_SHIFT));
      root_drop(r);
    } else {
      empty_roots++;
    }
  }
  jw_lock_release(&lock);
}

bool jw_pages_lookup(const void *p, jw_range_info *info) {
  root *r = jw_root_map_get(p);
  if (r == NULL) return false;
  unsigned i = (unsigned)(((uintptr_t)p - r->base) >> JW_GRANULE_SHIFT);
  /* Acquire: pairs with the release store in jw_pages_alloc. */
  uint32_t rec = jw_load(&r->rec[i], JW_ACQUIRE);
  if (rec == 0) return false;
  info->start = (void *)(r->base + ((uintptr_t)REC_START(rec) << JW_GRANULE_SHIFT));
  info->granules = REC_LEN(rec);
  info->kind = (jw_range_kind)REC_KIND(rec);
  return true;
}

void jw_pages_mark_interior(void *start, const void *p) {
  root *r = jw_root_map_get(start);
  if (r == NULL) jw_fatal("page source: mark_interior(%p): no such range", start);
  unsigned i = (unsigned)(((uintptr_t)start - r->base) >> JW_GRANULE_SHIFT);
  unsigned j = (unsigned)(((uintptr_t)p - r->base) >> JW_GRANULE_SHIFT);
  /* Relaxed load: the caller allocated this range itself. */
  uint32_t rec = jw_load(&r->rec[i], JW_RELAXED);
  if (REC_KIND(rec) != JW_KIND_LARGE || REC_START(rec) != i || (uintptr_t)p < (uintptr_t)start || j >= i + REC_LEN(rec))
    jw_fatal("page source: mark_interior(%p, %p): not inside a live large range", start, p);
  /* Release: like the start record; the flag tells free to clear the range. */
  jw_fetch_or(&r->rec[i], REC_INTERIOR, JW_RELEASE);
  jw_store(&r->rec[j], rec & ~REC_INTERIOR, JW_RELEASE);
}

void jw_pages_get_stats(jw_pages_stats *o) {
  memset(o, 0, sizeof *o);
  o->mapped_bytes = jw_load(&st_mapped, JW_RELAXED);
  o->peak_mapped_bytes = jw_load(&st_peak_mapped, JW_RELAXED);
  o->metadata_bytes = jw_load(&st_meta, JW_RELAXED) + jw_root_map_bytes();
  o->peak_metadata_bytes = jw_load(&st_peak_meta, JW_RELAXED) + jw_root_map_bytes();
  o->live_bytes = jw_load(&st_live, JW_RELAXED);
  o->cached_bytes = jw_load(&st_cached, JW_RELAXED);
  o->roots = jw_load(&st_roots, JW_RELAXED);
}

void jw_pages_atfork_prepare(void) { jw_lock_acquire(&lock); }
void jw_pages_atfork_parent(void) { jw_lock_release(&lock); }
void jw_pages_atfork_child(void) { jw_lock_reset(&lock); }
