/* Lookups (page_source.h, pages/lookup.h; backend.h): what an address is,
 * the out-of-line jw_pages_lookup, and the interior records of over-aligned
 * large blocks. Lock-free; never fault on a foreign address. */
#include "../common/log.h"
#include "../pages/lookup.h"
#include "../pages/root_map.h"
#include "backend_internal.h"

_Static_assert(JW_LOOKUP_RANGE_CLASSES == JW_NCLASSES, "lookup.h knows the class count");

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
    info->kind = jw_state_is_live(st) ? jw_state_kind(st) : JW_KIND_NONE;
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

bool jw_pages_lookup(const void *p, jw_range_info *info) { return jw_pages_lookup_inline(p, info); }

bool jw_pages_lookup_rec(jw_rec *r, const void *p, jw_range_info *info) {
  uintptr_t start = 0;
  uint32_t n = 0;
  unsigned st = jw_pages_resolve_rec(r, (uintptr_t)p, &start, &n); /* before start and n are read */
  return jw_pages_info(st, start, n, info);
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
  /* The head remembers it has interior records, for free to clear them. It
   * is marked first: a root check running in another thread (it takes no
   * part in this owner-only operation) must never see an interior record
   * under a head that does not announce one. */
  while (jw_tag_state(old) == JW_RS_LIVE_LARGE &&
         !jw_cas_weak(&head->tag, &old, (old & ~JW_REC_STATE_MASK) | JW_RS_LIVE_LARGE_MARKED, JW_RELAXED,
                      JW_RELAXED)) {
  }
  /* Relaxed: published to lookups of p by whatever hands p over, as for the
   * head (jw_backend_classify). */
  jw_store(&recs[i].tag, jw_tag_interior(i - g), JW_RELAXED);
  return;
bad:
  jw_fatal("backend: mark_interior(%p, %p): not inside a live large range", start, p);
}
