/* The thread's page pool: empty slabs kept as plain pages that any size
 * class can reformat, bounded by a watermark proportional to the thread's
 * slab count, least recently used pages given back beyond it.
 *
 * Brief: "Frontend: uniform, pooled slabs" (pool, watermark, LRU). Owner-only:
 * every function runs on the thread that owns tc. Never allocates.
 */
#ifndef JW_FRONTEND_PAGE_POOL_H
#define JW_FRONTEND_PAGE_POOL_H

#include <stddef.h>

#include "thread_cache.h"

/* Pool watermark in pages: max(JWMALLOC_POOL_MIN, slabs * POOL_PERCENT / 100). */
size_t jw_pool_watermark(const jw_tcache *tc);

/* Adds the empty page s (no longer counted as a slab) as most recently used,
 * then gives back least recently used pages beyond the watermark. */
void jw_pool_put(jw_tcache *tc, jw_slab *s);

/* Takes the most recently used page, or NULL when the pool is empty. */
jw_slab *jw_pool_take(jw_tcache *tc);

/* Gives back pool pages until at most `keep` remain; returns how many. */
size_t jw_pool_shrink(jw_tcache *tc, size_t keep);

#endif
