/* Over 4 MiB (and alignments no root can give): one mmap per block, found
 * again through a lock-free registry so free() recognizes them and rejects
 * foreign pointers.
 *
 * Brief: "Tiers" (> 4 MiB: direct system calls). Registry: open addressing
 * over 2^20 slots mapped on first use (docs/design/api.md). Thread-safe,
 * lock-free; never calls malloc.
 */
#ifndef JW_API_HUGE_H
#define JW_API_HUGE_H

#include <stdbool.h>
#include <stddef.h>

/* A mapping of at least n bytes aligned to align (power of two, any size):
 * a kept one (huge_cache.h) when one fits, else a fresh one. *zeroed (may be
 * NULL): whether its contents are zero. NULL, errno=ENOMEM. */
void *jw_huge_alloc(size_t n, size_t align, bool *zeroed);

/* If p is a live direct mapping: keeps it for reuse (huge_cache.h) or unmaps
 * it, and returns true; false (nothing done) otherwise. */
bool jw_huge_free(void *p);

/* Usable bytes of the mapping at p, or 0 when p is not one. */
size_t jw_huge_usable(const void *p);

/* Resizes the mapping at p (registered) to at least n bytes with mremap;
 * NULL, errno=ENOMEM, p untouched on failure (EINVAL: p is not registered).
 * p leaves the registry for the duration of the call: mremap may move it and
 * another thread may map the range it left before the call returns. */
void *jw_huge_resize(void *p, size_t n);

#endif
