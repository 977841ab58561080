/* Real code: the thread cache's block cache (jwmalloc/frontend/block_cache.c,
 * thread_cache.c: jw_bc_* under the pool lock, age_block_cache,
 * flush_block_cache at thread exit) in front of the midend and the backend.
 * Brief: "Tiers" (blocks kept per thread between a free and the next malloc
 * of their class), "Lifetime-based reclamation" (an idle cache ages) and
 * "Non-blocking interface" (the owner only tries the lock on malloc/free).
 *
 * T1, the owner, allocates a 2 KiB midend block (--param 1: a 40 KiB range
 * instead, a larger exploration run by hand), frees it (into its block
 * cache, unless the reclaimer holds the pool lock: then straight to the
 * midend or the backend), allocates the size again (from the cache, unless
 * aged out meanwhile), writes it and exits with it live (thread exit flushes
 * the cache). T2, the reclaimer, runs an aging
 * pass, trying the pool lock only (it marks cached blocks stale; a second
 * pass would give them back: --param 2, by hand, does not finish within 10
 * minutes). make test explores the first 10000 executions of the bound, make
 * verify all of it. Compiled with
 * -DJW_VERIFY_BLOCK_CACHE (the other clients run without the cache).
 *
 * Checked: a cached block is never both handed out and given back (T0 then
 * allocates the size: it may not get T1's live block; contents survive), no race on the bins (pool lock), memory safety (the cache links
 * through freed blocks only), termination. */
#include "jw_client.h"

#define MID 2048
#define RANGE (40 << 10)

static void *held;

static size_t size(void) { return vrf_param() ? RANGE : MID; }

static void t1(void *a) {
  (void)a;
  jwv_free(jwv_malloc(size()));
  held = jwv_malloc(size());
  jwv_fill(held, 64, 0x41);
}

static void t2(void *a) {
  (void)a;
  jwv_age_tiers();
  if (vrf_param() == 2) jwv_age_tiers();
}

static void setup(void) {
  jwv_reclaim_by_client();
  jwv_free(jwv_malloc(size())); /* global initialization, the class's first slab or root */
}

static void finish(void) {
  jwv_check(held, 64, 0x41);
  void *p = jwv_malloc(size());
  VRF_ASSERT(p != held); /* handed out twice */
  jwv_check(held, 64, 0x41);
  jwv_free(p);
  jwv_free(held);
}

VRF_CLIENT(.name = "bcache", .about = "jwmalloc block cache: owner's put/take and thread exit racing with the "
                                      "reclaimer's aging passes",
           .bound = "T1 allocates, frees and allocates again a 2 KiB block (param 1: a 40 KiB range), then exits; "
                    "T2 runs an aging pass (param 2: two)",
           .setup = setup, .threads = {t1, t2}, .finish = finish);
