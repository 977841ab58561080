/* jwmalloc's roots in IOSR regions (docs/design/stack.md). Active only when
 * JWMALLOC_SWAP=NAME is set; libiosr is opened with dlopen, never linked.
 * os_mem.c calls these through weak references: a build without os_swap.c
 * (the backend's tests, the verifier) maps roots with mmap. */
#ifndef JW_OS_SWAP_H
#define JW_OS_SWAP_H

#include <stddef.h>
#include <stdint.h>

/* A root of `size` aligned to `align` from an IOSR region; NULL when swap is
 * off, not connected yet, in a fork child, or the region call failed (the
 * caller then maps it with mmap). Never allocates. */
void *jw_os_swap_map(size_t size, size_t align);

/* Destroys the region whose base is p; 1 if p was one, else 0 (the caller
 * unmaps it). */
int jw_os_swap_unmap(void *p, size_t size);

/* The purge the trimmer runs before a swap-out and when the program is sent
 * to the background (docs/design/stack.md, "Free memory is not written"):
 * registered once by the API layer. Thread-safe. */
void jw_os_swap_set_trim(void (*fn)(void));

/* Trims run so far (a relaxed counter, for statistics and tests). */
uint64_t jw_os_swap_trims(void);

#endif
