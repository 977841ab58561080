/* The thread's page pool: empty slabs kept as plain pages that any size
 * class can reformat, bounded by a watermark proportional to the thread's
 * slab count (its recent peak for pages its consumers emptied), least
 * recently used pages given back beyond it; and their
 * aging by the reclaimer.
 *
 * Brief: "Frontend: uniform, pooled slabs" (pool, watermark, LRU) and
 * "Lifetime-based reclamation" (an idle pool ages like any free memory).
 * Design: docs/design/frontend.md ("The page pool") and
 * docs/design/reclamation.md, section 6.
 *
 * The pool's list, length, stale count and peak are guarded by the pool lock
 * (jw_tcache.pool_lock), which the owner and the reclaimer only try on the
 * malloc/free paths: an owner that finds it held does without the pool
 * (put: the page goes to the page source; take: a miss). Only the owner
 * calls put/take/shrink/drain; the reclaimer calls jw_pool_age. Never
 * allocates.
 */
#ifndef JW_FRONTEND_PAGE_POOL_H
#define JW_FRONTEND_PAGE_POOL_H

#include <stdbool.h>
#include <stddef.h>

#include "thread_cache.h"

/* Pool watermark in pages: max(JWMALLOC_POOL_MIN, slabs * POOL_PERCENT /
 * 100) for the thread's slab count now; for a page that other threads'
 * frees emptied (`returned`), at least the most slabs the thread held since
 * the pool's last aging visit or trim (frontend.md, "The page pool"). Owner,
 * pool lock held. */
size_t jw_pool_watermark(const jw_tcache *tc, bool returned);

/* Owner: adds the empty page s (no longer counted as a slab) as most
 * recently used, then gives back least recently used pages beyond the
 * watermark; `returned`: other threads' frees emptied s (it came back through
 * the ready stack). If the reclaimer holds the pool lock, s goes back to the page
 * source instead (counted as an eviction). Never waits. */
void jw_pool_put(jw_tcache *tc, jw_slab *s, bool returned);

/* Owner: takes the most recently used page, or NULL when the pool is empty
 * or the reclaimer holds the pool lock. Never waits. */
jw_slab *jw_pool_take(jw_tcache *tc);

/* Owner (malloc_trim, thread exit): gives back every pool page; waits for a
 * reclaimer holding the pool lock (a bounded list unlink; these are not
 * malloc or free). Returns how many pages went back. */
size_t jw_pool_drain(jw_tcache *tc);

/* Pool lock held (placement's trim, backend.md 7b; owner or reclaimer):
 * unlinks up to `cap` pooled pages whose root lies above the one the backend
 * fills (jw_pages_above_place) into out[], for the caller to give back with
 * jw_tier_release_pages. Returns how many. */
size_t jw_pool_take_above_locked(jw_tcache *tc, jw_slab **out, size_t cap);

/* Reclaimer (any thread, one at a time: the reclaimer token): unlinks up to
 * `cap` pages that stayed in tc's pool, unused, since the previous pass (the
 * `stale` count: one to two reclaim intervals) into out[], for the caller to
 * give back. When every stale page is out, the pages still pooled become the
 * candidates of the next pass and the peak behind the watermark is cleared
 * (the owner's next put sets it from the slabs it holds then); otherwise *more is set and the caller calls
 * again for the rest. Tries the pool lock only: returns 0 at once when the
 * owner is in a pool operation. *left receives the pages still pooled (1 when
 * the lock was busy: look again). */
size_t jw_pool_age(jw_tcache *tc, jw_slab **out, size_t cap, size_t *left, int *more);

#endif
