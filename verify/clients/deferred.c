/* Real code: draining of deferred lists. Brief: "Non-blocking interface" (a
 * free never waits for a lock holder: it pushes the block on a list the next
 * holder drains) and "Bounded verification".
 *
 * --param 0 (midend, jwmalloc/midend/midend.c): T1 and T2 (and T3 at the
 * full bound) free one 2 KiB block each of one midend class. The class's
 * pointer cache is shrunk to no slot (-DJW_VERIFY_MID_CACHE_BYTES=0), so
 * every free goes to the class lock: the holder returns its block to the
 * slab, a free that finds the lock held pushes on the deferred list, and the
 * next holder (a later free, or T0's allocations in finish) drains it. Two
 * pushes racing need the third thread: the lost-node mutation runs at the
 * full bound.
 * --param 1 (backend, jwmalloc/backend/backend.c, through its own entries
 * jw_pages_alloc and jw_backend_free, so that no cache above it keeps the
 * ranges): T1 frees a 32 KiB range (T2 another at the full bound) while T3
 * allocates one, so the backend lock may be busy and frees are deferred
 * (defer_free) or go to the lock-free bitmaps, drained by the next holder
 * (T3's allocation, or T0's in finish).
 *
 * Checked: no block or range is lost or handed out twice: midend, when the
 * threads are done no block waits on the deferred list (the hand-over: a
 * push after the holder's last drain is drained by the holder's or the
 * pusher's look, not left for the next taker of the lock), and in finish
 * T0 allocates as many blocks as were freed and gets exactly the freed ones
 * back (a lost deferred node shows up as a block never seen before);
 * backend, every free succeeds (a range handed out twice would be freed
 * twice: reported) and once all is freed every root merges back whole (a
 * lost range never joins); plus the usual: no race on links and keys,
 * memory safety, termination. */
#include "jw_client.h"

#define MID 2048
#define LARGE_GRANULES 8 /* a 32 KiB backend range */

static void *blk[4]; /* allocated in setup; each thread frees its own */
static int nblk;

/* Frees the block or range of thread slot i. */
static void give(int i) {
  if (vrf_param() == 0) jwv_free(blk[i]);
  else jwv_range_free(blk[i]);
}

static void t1(void *a) {
  (void)a;
  give(0);
}
static void t2(void *a) {
  (void)a;
  if (vrf_param() == 0 || vrf_level()) give(1);
}
static void t3(void *a) {
  (void)a;
  if (vrf_param() == 0) {
    if (vrf_level()) jwv_free(blk[2]);
  } else {
    blk[3] = jwv_range(LARGE_GRANULES); /* holds the backend lock a while */
  }
}

static void setup(void) {
  jwv_option("RECLAIM", 0);
  nblk = 3;
  for (int i = 0; i < nblk; i++) blk[i] = vrf_param() == 0 ? jwv_malloc(MID) : jwv_range(LARGE_GRANULES);
  if (vrf_param() == 1) give(2); /* a free range T3 takes */
}

static bool one_of(void *p, void *const *set, int n) {
  for (int i = 0; i < n; i++)
    if (set[i] == p) return true;
  return false;
}

static void finish(void) {
  if (vrf_param() == 0) {
    /* Every free made its way to the slabs: none waits on the deferred
     * list for the next taker of the class lock (the hand-over). */
    VRF_ASSERT(jw_mid_deferred_empty());
    /* Freed: blk[0..2], minus T1's reallocation. Every one comes back. */
    void *freed[3];
    int n = 0;
    for (int i = 0; i < (vrf_level() ? 3 : 2); i++) freed[n++] = blk[i];
    void *got[3];
    for (int i = 0; i < n; i++) {
      got[i] = jwv_malloc(MID);
      VRF_ASSERT(one_of(got[i], freed, n));
      VRF_ASSERT(!one_of(got[i], got, i));
    }
    for (int i = 0; i < n; i++) jwv_free(got[i]);
    if (!vrf_level()) jwv_free(blk[2]);
  } else {
    /* Everything freed: every root merges back whole. */
    jwv_range_free(blk[3]);
    if (!vrf_level()) give(1);
    jwv_check_roots_whole();
  }
}

VRF_CLIENT(.name = "deferred", .about = "jwmalloc deferred frees: midend class list (param 0), backend list (param 1)",
           .bound = "param 0: T1, T2 free a midend block each, cache of 0 slots (full: T3 too); param 1: T1 frees a "
                    "32 KiB range while T3 allocates one (full: T2 frees one too), through the backend's own "
                    "entries",
           .setup = setup, .threads = {t1, t2, t3}, .finish = finish);
