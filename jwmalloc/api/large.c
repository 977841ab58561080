/* See large.h. */
#include "large.h"

#include <errno.h>
#include <stdint.h>

#include "../pages/lookup.h"
#include "../common/config.h"
#include "../pages/tier_pages.h"
#include "counters.h"

/* Granules needed for n bytes at `align`, or 0 when it does not fit a root. */
static size_t granules_for(size_t n, size_t align) {
  if (n > JW_LARGE_MAX) return 0;
  if (align == JW_ROOT) return JW_ROOT_GRANULES; /* a whole root is root-aligned */
  if (align > JW_ROOT) return 0;
  if (n == 0) n = 1; /* the aligned block must lie inside the range */
  size_t extra = align > JW_GRANULE ? align - JW_GRANULE : 0;
  size_t g = (n + extra + JW_GRANULE - 1) >> JW_GRANULE_SHIFT;
  return g <= JW_ROOT_GRANULES ? g : 0;
}

bool jw_large_fits(size_t n, size_t align) { return granules_for(n, align) != 0; }

void *jw_large_alloc(size_t n, size_t align, bool *zeroed) {
  size_t g = granules_for(n, align);
  bool z = false;
  char *start = g ? jw_tier_take_pages(g, JW_KIND_LARGE, NULL, &z) : NULL;
  if (start == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  char *p = start;
  if (align > JW_GRANULE && ((uintptr_t)p & (align - 1)) != 0) {
    p = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
    jw_pages_mark_interior(start, p);
  }
  if (zeroed) *zeroed = z;
  jw_counter_add(&jw_api_counters.large_mallocs, 1);
  return p;
}

bool jw_large_is_block(const jw_range_info *info, const void *p) {
  /* The start of a range without interior records (a marked head's start
   * lies below an over-aligned block and was never handed out: freed, it
   * would be cached while its block is still live), or (over-aligned) a
   * granule-aligned pointer inside. */
  if (p == info->start) return jw_pages_large_at(p) != 0;
  return ((uintptr_t)p & (JW_GRANULE - 1)) == 0;
}

void jw_large_free(void *start, uint32_t granules) {
  jw_counter_add(&jw_api_counters.large_frees, 1);
  jw_tier_release_pages(start, granules);
}

size_t jw_large_usable(const jw_range_info *info, const void *p) {
  return ((size_t)info->granules << JW_GRANULE_SHIFT) - (size_t)((const char *)p - (const char *)info->start);
}
