/* jwmalloc's roots in IOSR regions (docs/design/stack.md). Active only when
 * JWMALLOC_SWAP=NAME is set; libiosr is opened with dlopen, never linked.
 * os_mem.c calls these through weak references: a build without os_swap.c
 * (the backend's tests, the verifier) maps roots with mmap. */
#ifndef JW_OS_SWAP_H
#define JW_OS_SWAP_H

#include <stddef.h>
#include <stdint.h>

/* A mapping of `size` aligned to `align` in a new IOSR region: a heap root,
 * or (committed != 0) a huge block, for which the kernel's overcommit check
 * runs first, as for a direct mapping. NULL when swap is off, not connected
 * yet, in a fork child, or the region call failed (the caller then maps it
 * with mmap). Never allocates. Thread-safe. */
void *jw_os_swap_map(size_t size, size_t align, int committed);

/* [p, p+size) given back: the region whose base is p is destroyed; a range
 * inside a region is discarded (MADV_DONTNEED; the region stays whole until
 * its base goes). 1 when p was in a region, else 0 (the caller unmaps it).
 * In a fork child a region's copy is unmapped whole. Thread-safe. */
int jw_os_swap_unmap(void *p, size_t size);

/* The size of the region whose base is p, else 0 (a region is never
 * mremap'd: os_mem.c resizes it in place or copies). Thread-safe. */
size_t jw_os_swap_size(const void *p);

/* The purge the trimmer runs before a swap-out and when the program is sent
 * to the background (docs/design/stack.md, "Free memory is not written"):
 * registered once by the API layer. Thread-safe. */
void jw_os_swap_set_trim(void (*fn)(void));

/* Trims run so far (a relaxed counter, for statistics and tests). */
uint64_t jw_os_swap_trims(void);

#endif
