/* The allocator's internal entry points behind the public names: slow paths
 * and the functions that are not on a fast path. Brief: "Tiers"; semantics
 * and errno: docs/design/api.md and include/jwmalloc.h. Thread-safe. */
#ifndef JW_API_CORE_H
#define JW_API_CORE_H

#include <stddef.h>

#include "../frontend/thread_cache.h"

void *jw_malloc_slow(size_t n);
void jw_free_slow(void *p);
void *jw_calloc_impl(size_t n, size_t size);
void *jw_realloc_impl(void *p, size_t n);
/* align: a power of two (any size). NULL, errno=ENOMEM. */
void *jw_memalign_impl(size_t align, size_t n);
/* Usable size of a live block; 0 for NULL. Reports an invalid pointer. */
size_t jw_usable_impl(const void *p);
int jw_trim_impl(void);
/* The free fast path took slab s's last block back (live == 0). */
void jw_fast_free_emptied(jw_tls *t, jw_slab *s);
/* Pushes the calling thread's pending chain of cross-thread frees (one CAS;
 * frontend.md, "Batched remote frees") and reports a chain whose slab was a
 * pooled page as a double free. Calling thread only; lock-free. */
void jw_free_remote_flush(jw_tls *t);
/* The free fast path found p in the caller's own parked slab s: frees it
 * when it is a block start not already free, else hands it to
 * jw_free_slow (which reports it). */
void jw_free_parked(jw_tls *t, jw_slab *s, void *p);

#endif
