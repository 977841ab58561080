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
/* The free fast path filled the bin of class c past its bound (room < 0). */
void jw_fast_free_overflow(jw_tls *t, unsigned c);
/* Pushes the calling thread's pending chain of cross-thread frees (one CAS;
 * frontend.md, "Batched remote frees") and reports a chain whose slab was a
 * pooled page as a double free. Calling thread only; lock-free. */
void jw_free_remote_flush(jw_tls *t);
#endif
