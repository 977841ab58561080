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

/* The key every free block of the tiers carries in its second word
 * (common/asan.h, jw_block_set_free): process-wide, random after
 * initialization (api/runtime.c), never 0. Here, below the tiers, because
 * the frontend, the midend and the API all mark and test free blocks with
 * it. Relaxed reads: it changes once, before any thread cache exists. */
extern jw_atomic_u64 jw_free_key;

#endif
