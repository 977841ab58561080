/* jw_pages_lookup (page_source.h) as an inline function, for the free path:
 * every midend block and range that free() takes back is resolved here, so
 * the lookup is inlined into the API's dispatch instead of called. Same
 * contract and memory orders as jw_pages_lookup, which is this function.
 *
 * Brief: "Metadata" (found from an address by direct indexing: root map, the
 * granule's record, and for an interior granule its head's record).
 * Lock-free, allocation-free, never faults on a foreign address.
 */
#ifndef JW_PAGES_LOOKUP_H
#define JW_PAGES_LOOKUP_H

#include <stdbool.h>

#include <stddef.h>

#include "page_source.h"
#include "record.h"
#include "root_map.h"

/* The metadata record of the granule holding p, or NULL when p is in no
 * root of this backend: the root-map walk of jw_pages_lookup(), for a caller
 * that looks at the record first and may then resolve it with
 * jw_pages_lookup_rec() without walking again. Lock-free, never faults. */
static inline jw_rec *jw_pages_record(const void *p) {
  jw_rec *recs = jw_root_map_get(p);
  if (recs == NULL) return NULL;
  return &recs[((uintptr_t)p & (JW_ROOT - 1)) >> JW_GRANULE_SHIFT];
}

/* True when r, p's record, shows a live range of kind JW_KIND_SMALL_SLAB:
 * what jw_pages_lookup() says of such a pointer, for that one kind, without
 * resolving a head or filling a jw_range_info (the free path's check of a
 * block in another thread's slab, docs/design/frontend.md "Frees from other
 * threads"). A frontend slab is one granule, so its record is p's own, never
 * INTERIOR; false wherever jw_pages_lookup() would not report a SMALL_SLAB. */
static inline bool jw_rec_is_small_slab(jw_rec *r) {
  /* Relaxed: as in jw_backend_classify (a valid pointer was handed over
   * after the allocation that wrote the record; for an invalid one any value
   * is acceptable, records stay mapped). */
  return jw_tag_state(jw_load(&r->tag, JW_RELAXED)) == JW_RS_LIVE_SMALL;
}

/* jw_pages_lookup(p, info) for a caller that already has r =
 * jw_pages_record(p), not NULL. Same result, same thread-safety. */
bool jw_pages_lookup_rec(jw_rec *r, const void *p, jw_range_info *info);

/* The range classes by index: defined by the backend (backend/size_class.h,
 * whose JW_NCLASSES the frontend's size_class.h also defines, and the API
 * includes both; backend/classify.c checks the count). */
extern const uint16_t jw_class_granules[];
#define JW_LOOKUP_RANGE_CLASSES 36

static inline jw_range_kind jw_state_kind(unsigned st) {
  return st == JW_RS_LIVE_SMALL ? JW_KIND_SMALL_SLAB : st == JW_RS_LIVE_MID ? JW_KIND_MID_SLAB : JW_KIND_LARGE;
}

/* The live range whose records r (p's granule's record, jw_pages_record)
 * resolves p to: its head state (JW_RS_LIVE_*; 0 when p is in no live range
 * or in one that does not resolve it), *start and *granules. */
static inline unsigned jw_pages_resolve_rec(jw_rec *r, uintptr_t a, uintptr_t *start, uint32_t *granules) {
  uint32_t g = (uint32_t)(a >> JW_GRANULE_SHIFT) & (JW_ROOT_GRANULES - 1);
  jw_rec *recs = r - g;
  /* Relaxed: a caller holding a valid pointer got it after the allocation
   * that wrote these records (happens-before through whatever handed the
   * pointer over). For an invalid pointer any value read is acceptable: the
   * records stay mapped, so nothing faults (jw_backend_classify). */
  uint32_t tag = jw_load(&recs[g].tag, JW_RELAXED);
  uint32_t off = 0;
  if (jw_tag_state(tag) == JW_RS_INTERIOR) {
    off = jw_tag_offset(tag);
    if (off > g) return 0;
    g -= off;
    tag = jw_load(&recs[g].tag, JW_RELAXED); /* as above */
  }
  unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
  if (!jw_state_is_live(st) || c >= JW_LOOKUP_RANGE_CLASSES) return 0;
  uint32_t n = jw_class_granules[c];
  if (n <= off) return 0;
  *start = (a & ~(uintptr_t)(JW_ROOT - 1)) + ((uintptr_t)g << JW_GRANULE_SHIFT);
  *granules = n;
  return st;
}

/* The same from p alone (the root-map walk first). */
static inline unsigned jw_pages_resolve(const void *p, uintptr_t *start, uint32_t *granules) {
  jw_rec *r = jw_pages_record(p);
  return r ? jw_pages_resolve_rec(r, (uintptr_t)p, start, granules) : 0;
}

/* A resolution's answer as jw_pages_lookup gives it. */
static inline bool jw_pages_info(unsigned st, uintptr_t start, uint32_t granules, jw_range_info *info) {
  if (st == 0) return false;
  info->start = (void *)start;
  info->granules = granules;
  info->kind = jw_state_kind(st);
  return true;
}

/* The free path's two common cases, each the resolution above cut to what
 * it needs (same orders, same answers for the cases they accept):
 *
 * jw_pages_large_at: p page-aligned; the granules of the live LARGE range
 * (not marked: it has no interior records) that starts at p, or 0. */
static inline uint32_t jw_pages_large_at(const void *p) {
  jw_rec *r = jw_pages_record(p);
  if (r == NULL) return 0;
  uint32_t tag = jw_load(&r->tag, JW_RELAXED); /* relaxed: see jw_pages_resolve_rec */
  if (jw_tag_state(tag) != JW_RS_LIVE_LARGE) return 0;
  return jw_class_granules[jw_tag_class(tag)]; /* a live head's class is always < 36 */
}

/* jw_pages_mid_slab_rec: the start of the live MID_SLAB range that holds p,
 * r being p's record (jw_pages_record), from its head's record or an
 * interior one; or 0. */
static inline uintptr_t jw_pages_mid_slab_rec(jw_rec *r, const void *p) {
  uintptr_t a = (uintptr_t)p;
  uint32_t g = (uint32_t)(a >> JW_GRANULE_SHIFT) & (JW_ROOT_GRANULES - 1);
  uint32_t tag = jw_load(&r->tag, JW_RELAXED); /* relaxed: see jw_pages_resolve_rec */
  if (jw_tag_state(tag) == JW_RS_INTERIOR) {
    uint32_t off = jw_tag_offset(tag);
    if (off > g) return 0;
    g -= off;
    tag = jw_load(&r[-(ptrdiff_t)off].tag, JW_RELAXED);
    /* An interior record lies inside its live range (it is cleared when the
     * range is freed): the head's size needs no check here. */
  }
  if (jw_tag_state(tag) != JW_RS_LIVE_MID) return 0;
  return (a & ~(uintptr_t)(JW_ROOT - 1)) + ((uintptr_t)g << JW_GRANULE_SHIFT);
}

static inline bool jw_pages_lookup_inline(const void *p, jw_range_info *info) {
  uintptr_t start = 0;
  uint32_t n = 0;
  unsigned st = jw_pages_resolve(p, &start, &n); /* before start and n are read */
  return jw_pages_info(st, start, n, info);
}

#endif
