/* See tier_pages.h. */
#include "tier_pages.h"

#include "../common/asan.h"

jw_atomic_u64 jw_free_key = JW_ATOMIC_INIT(0x6a776d616c6c6f60ULL);

void *jw_tier_take_pages(size_t granules, jw_range_kind kind, uint32_t *out_granules, bool *out_zeroed) {
  uint32_t got = 0;
  void *p = jw_pages_alloc(granules, kind, &got, out_zeroed);
  if (p) jw_unpoison(p, (size_t)got << JW_GRANULE_SHIFT);
  if (out_granules) *out_granules = got;
  return p;
}

void jw_tier_release_pages(void *start, size_t granules) {
  /* Poisoned while we still own it: after jw_pages_free another thread may
   * already have it. */
  jw_poison(start, granules << JW_GRANULE_SHIFT);
  jw_pages_free(start);
}

void jw_tier_release_aged(void *start, size_t granules) {
  jw_poison(start, granules << JW_GRANULE_SHIFT); /* as above */
  jw_pages_free_aged(start);
}
