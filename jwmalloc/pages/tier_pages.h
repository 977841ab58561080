/* The tiers' only doors to the page source (page_source.h).
 *
 * Brief: "Tiers", and "Lifetime-based reclamation" (part 3): every page a
 * tier gives back goes through jw_tier_release_pages() (or, after aging in
 * the tier's cache, jw_tier_release_aged()), into the backend's buffers. In the ASan variant ranges are unpoisoned when
 * taken and poisoned when given back.
 * Thread-safe; never allocates. */
#ifndef JW_PAGES_TIER_PAGES_H
#define JW_PAGES_TIER_PAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "page_source.h"

/* A range of at least `granules` 4 KiB granules of `kind`; see
 * jw_pages_alloc. NULL with errno=ENOMEM on failure. */
void *jw_tier_take_pages(size_t granules, jw_range_kind kind, uint32_t *out_granules, bool *out_zeroed);

/* Gives the range at `start` (as returned above, `granules` long) back. */
void jw_tier_release_pages(void *start, size_t granules);

/* The same for a range that stayed idle in the tier's cache for a reclaim
 * interval (jw_pages_free_aged): called by the reclaimer's aging pass. */
void jw_tier_release_aged(void *start, size_t granules);

#endif
