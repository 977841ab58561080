/* 16 KiB-4 MiB: one page-source range (kind LARGE) per block; also serves
 * small requests with alignments above 64 bytes (page-aligned ranges).
 *
 * Brief: "Tiers" (page-granular backend ranges). Alignment handling:
 * docs/design/api.md. Thread-safe (the page source's guarantees); counters
 * are relaxed atomics.
 */
#ifndef JW_API_LARGE_H
#define JW_API_LARGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../pages/page_source.h"

/* True when a block of n bytes aligned to `align` (power of two) fits in one
 * range (at most a 4 MiB root). */
bool jw_large_fits(size_t n, size_t align);

/* A block of n bytes aligned to align (which must fit, above). *zeroed (if
 * not NULL) tells whether it is known to be zero. NULL, errno=ENOMEM. */
void *jw_large_alloc(size_t n, size_t align, bool *zeroed);

/* p is a block this tier handed out from the range info describes. */
bool jw_large_is_block(const jw_range_info *info, const void *p);

/* Gives the block's range (at start, `granules` long) back. */
void jw_large_free(void *start, uint32_t granules);

/* Usable bytes from p to the end of its range. */
size_t jw_large_usable(const jw_range_info *info, const void *p);

#endif
