/* Frontend size classes: one table for all of them, every slab one page.
 *
 * Brief: "Frontend: uniform, pooled slabs" (the class table and the tail-
 * waste cap are ours: docs/design/frontend.md). Sizes in bytes. A slab is one
 * page (jw_page.size: 4, 16 or 64 KiB, docs/design/architecture.md "Page
 * size at run time"): a 64-byte header, then blocks of one class from offset
 * 64. The classes are the same at every page size.
 */
#ifndef JW_FRONTEND_SIZE_CLASS_H
#define JW_FRONTEND_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#include "../common/page.h"

#define JW_NCLASSES 29
/* Run-time values (page.h), read by the slow paths only. */
#define JW_SLAB_SIZE ((unsigned)jw_page.size)
#define JW_SLAB_HEADER 64u
#define JW_SLAB_USABLE (JW_SLAB_SIZE - JW_SLAB_HEADER) /* 4032 at 4 KiB */
/* The usable bytes of the smallest page: what the bin's bound is made from. */
#define JW_SLAB_USABLE_MIN ((unsigned)JW_PAGE_MIN - JW_SLAB_HEADER) /* 4032 */
/* The cap: tail waste of every slab at most 5% of the page. */
#define JW_TAIL_WASTE_CAP (JW_SLAB_SIZE / 20)

extern const uint16_t jw_class_size[JW_NCLASSES];
/* ceil(2^32 / size) per class: (off * jw_class_recip[c]) >> 32 is off / size
 * exactly for every off < 2^21, so in a slab of any page size (the error
 * term stays below 1 / size: off * (recip * size - 2^32) < 2^21 * 2^11 =
 * 2^32), so a free checks a block
 * boundary with a multiply instead of a division. test_size_class checks it
 * for every class and offset. */
extern const uint32_t jw_class_recip[JW_NCLASSES];
/* Most free blocks a thread's bin of the class holds before a free gives
 * some back to their slabs (frontend.md, "The bin"): min(64, max(16, the
 * blocks of a 4 KiB page)), at every page size. */
extern const uint8_t jw_class_bin_limit[JW_NCLASSES];
/* Index (n + 15) >> 4 for n <= JW_SMALL_MAX: the smallest class >= n. */
extern const uint8_t jw_class_of_table[128];

static inline unsigned jw_class_of(size_t n) { return jw_class_of_table[(n + 15) >> 4]; }

static inline unsigned jw_class_blocks(unsigned c) { return JW_SLAB_USABLE / jw_class_size[c]; }

#endif
