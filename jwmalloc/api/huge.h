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
#include <stdint.h>

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

/* Calls fn(start, size, arg) for every registered mapping whose start lies
 * in [lo, hi) (malloc_iterate); returns how many. Lock-free: a mapping
 * registered or freed meanwhile may or may not be seen. Stops once it has
 * seen as many entries as are reserved, so a sparse table is not read
 * whole. */
size_t jw_huge_each(uintptr_t lo, uintptr_t hi, void (*fn)(uintptr_t start, size_t size, void *arg), void *arg);

#endif
