/* Real code: the frontend's page pool (jwmalloc/frontend/page_pool.c) and
 * the reclaimer's aging pass over it (thread_cache.c, jw_tc_age_pools).
 * Brief: "Frontend: uniform, pooled slabs" (empty slabs kept as plain pages
 * in a per-thread LRU pool) and "Lifetime-based reclamation" (an idle pool
 * ages like any free memory).
 *
 * T1, the owner, uses a size class of two blocks per slab: it allocates
 * three blocks (slab A fills and parks, slab B becomes current), frees A's
 * two blocks (A empties and goes to the pool: jw_pool_put under a try-lock),
 * then allocates two more (B's last block, then a refill that takes A back
 * from the pool: jw_pool_take, unless the reclaimer holds the pool lock or
 * aged A out; --param 1 only). T2, the reclaimer, runs an aging pass (full
 * bound: two; the first marks the pooled pages stale, the second unlinks and
 * gives them back to the backend as aged frees), each trying the pool lock
 * only.
 *
 * Checked: a page is never both in the pool and handed out or given back
 * (block contents survive; the backend's live bytes at the end are the
 * slabs still holding blocks), no
 * race on the pool's list (guarded by the pool lock: a weakened release of
 * that lock is found as a race), memory safety, termination. */
#include "pages/page_source.h"
#include "jw_client.h"

#define SZ 1536 /* two blocks per slab */

static void t1(void *a) {
  (void)a;
  char *p[5];
  for (int i = 0; i < 3; i++) {
    p[i] = jwv_malloc(SZ);
    jwv_fill(p[i], 16, 0x20 + i);
  }
  jwv_free(p[0]);
  jwv_free(p[1]); /* slab A empties: into the pool */
  int n = vrf_param() ? 5 : 3;
  for (int i = 3; i < n; i++) {
    p[i] = jwv_malloc(SZ);
    jwv_fill(p[i], 16, 0x20 + i);
  }
  for (int i = 2; i < n; i++) jwv_check(p[i], 16, 0x20 + i);
}

static void t2(void *a) {
  (void)a;
  jwv_age_tiers();
  if (vrf_level()) jwv_age_tiers();
}

static uint64_t live_at_setup;

static void setup(void) {
  jwv_reclaim_by_client();
  jwv_free(jwv_malloc(SZ)); /* global initialization */
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  live_at_setup = st.live_bytes; /* at the end: plus T1's slabs holding live blocks (1, param 1: 2) */
}

static void finish(void) {
  /* The backend's live bytes are what the clients hold: no range lost,
   * none counted twice (its records are checked by jw_pages_get_stats's
   * counters, kept under the backend lock). */
  jwv_free(jwv_malloc(32 << 10)); /* a range: takes the backend lock: deferred frees drained */
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  if (st.live_bytes != live_at_setup + (vrf_param() ? 2 : 1) * JW_GRANULE)
    vrf_fail("backend live bytes %lu, expected %lu", (unsigned long)st.live_bytes,
             (unsigned long)(live_at_setup + (vrf_param() ? 2 : 1) * JW_GRANULE));
}

VRF_CLIENT(.name = "pool", .about = "jwmalloc page pool: owner's put/take racing with the reclaimer's aging passes",
           .bound = "T1 allocates 3, frees 2 blocks of a 2-block class (param 1: then allocates 2); T2 runs an aging "
                    "pass (full: 2)",
           .setup = setup, .threads = {t1, t2}, .finish = finish);
