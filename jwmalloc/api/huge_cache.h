/* Recently freed direct mappings (> 4 MiB) kept for reuse for one to two
 * reclaim intervals, within a bound (JWMALLOC_HUGE_CACHE_MB, default 32 MiB,
 * at most JW_HUGE_CACHE_SLOTS mappings), so that a program that allocates and
 * frees a large buffer over and over does not fault in every page each time.
 *
 * Decision and reasons: docs/design/api.md, "Kept direct mappings". Brief:
 * "Tiers" (> 4 MiB: direct system calls) and "Lifetime-based reclamation".
 * Thread-safety: one lock, taken with a try-lock by malloc and free (when it
 * is held they map and unmap as without the cache), waited for by malloc_trim
 * and fork prepare only; no system call runs under it. Never allocates.
 */
#ifndef JW_API_HUGE_CACHE_H
#define JW_API_HUGE_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JW_HUGE_CACHE_SLOTS 8

/* Keeps the mapping [p, p + size) (size: a multiple of 4 KiB, p unregistered
 * and unused by the caller from now on). Returns false, keeping nothing,
 * when the cache is off (option 0, reclamation off), the mapping is larger
 * than the bound or the lock is busy: the caller unmaps it. May unmap older
 * kept mappings to stay within the bound, and unmaps them all when the cache
 * was turned off at run time (nothing would age them). */
bool jw_huge_cache_put(void *p, size_t size);

/* A kept mapping of at least `size` bytes (a multiple of 4 KiB) whose start
 * is `align`-aligned (a power of two >= 4 KiB), best fit; a tail past one
 * eighth of `size` is unmapped first. *got: its size in bytes. Its contents
 * are whatever the previous owner left (not zeroed). NULL when none fits,
 * the lock is busy or the cache is off (then the kept ones are unmapped, as
 * in jw_huge_cache_put). */
void *jw_huge_cache_take(size_t size, size_t align, size_t *got);

/* The reclaimer's aging pass: unmaps the mappings already kept at the
 * previous pass, marks the others. Try-lock (skipped when busy). Returns the
 * bytes still kept. */
uint64_t jw_huge_cache_age(void);

/* malloc_trim: unmaps every kept mapping (waits for the lock). True when
 * any was unmapped. */
bool jw_huge_cache_drop(void);

/* Bytes kept now, and mappings reused since the start (statistics, relaxed). */
uint64_t jw_huge_cache_bytes(void);
uint64_t jw_huge_cache_reuses(void);

/* Fork: prepare takes the lock (waiting), parent and child release it. */
void jw_huge_cache_atfork_prepare(void);
void jw_huge_cache_atfork_release(void);

#endif
