/* Real code: cross-thread free (jwmalloc/frontend/slab.c, thread_cache.c,
 * api/alloc.c through jw_malloc/jw_free). Brief: "Frontend: uniform, pooled
 * slabs" (frees from other threads) and "Bounded verification".
 *
 * T1 owns a slab: it allocates blocks of one size class and hands them to T2,
 * which frees them while T1 goes on. The edge cases met, depending on the
 * interleaving: a remote free onto an ACTIVE slab (remote list, collected by
 * the owner's refill); onto a parked FULL slab (FULL -> NOTIFIED, the slab
 * pushed on the owner's ready stack, drained by the owner's next refill or by
 * its exit); onto an ABANDONED slab after T1 exited (abandoned-slab count;
 * the last freer adopts the page into its pool or gives it back); and the
 * owner's exit racing with a notifier between its two steps (exit waits).
 * The size class is shrunk to two blocks per slab (1536 bytes, 2 x 1536 +
 * header fit a page) so a slab fills, parks and notifies within a few frees.
 *
 * With --param 2 T2 has a thread cache: its frees after T1's exit adopt the
 * abandoned slab instead of counting it down (one CAS takes the slab's free
 * list from its remote word), racing T1's exit.
 *
 * With batched remote frees (frontend.md, "Batched remote frees") T2's
 * frees of one slab wait on its pending chain and go out with one push: at
 * its exit (the pthread-key destructor) or, with --param 1, when its next
 * free is of another slab; every state outcome above is then a chain's.
 *
 * Checked: every block's contents survive until freed (no block handed out
 * twice), no race on the blocks' links and keys or the slab header's plain
 * fields, every access inside a live block or the allocator's memory, and in
 * finish the slabs are accounted: every block of T1's slabs can be allocated
 * again by T0, no more (a lost or doubled block shows up as a count). */
#include "jw_client.h"

#define SZ 1536 /* two blocks per 4 KiB slab */

static jwv_box box[3];

static void t1(void *a) {
  (void)a;
  if (vrf_param() == 1) {
    /* Chains of two slabs: T1 hands out three blocks (slab A full and
     * parked, the third from slab B); T2's chain of A is pushed when its
     * free moves on to B (FULL -> NOTIFIED by a chain: one ready-stack
     * push), its chain of B at its exit, racing T1's exit (B current, or
     * abandoned with the chain's block outstanding). */
    char *p[3];
    for (int i = 0; i < 3; i++) {
      p[i] = jwv_malloc(SZ);
      jwv_fill(p[i], SZ, 0x10 + i);
    }
    for (int i = 0; i < 3; i++) jwv_send(&box[i], p[i]);
    return;
  }
  if (vrf_level()) {
    /* Full bound: a third block first, so the first slab parks FULL (and
     * the second comes from the backend) before T2 starts: T2's frees meet
     * the FULL state, notify, and race T1's exit draining its ready stack.
     * The third block stays out: its slab is abandoned at exit. */
    char *p[3];
    for (int i = 0; i < 3; i++) {
      p[i] = jwv_malloc(SZ);
      jwv_fill(p[i], SZ, 0x10 + i);
    }
    for (int i = 0; i < 2; i++) jwv_send(&box[i], p[i]);
    jwv_check(p[2], SZ, 0x12);
    return;
  }
  for (int i = 0; i < 2; i++) {
    char *p = jwv_malloc(SZ);
    jwv_fill(p, SZ, 0x10 + i);
    jwv_send(&box[i], p);
  }
  /* Thread exit follows: the cache is released (slabs abandoned or given
   * back) by the pthread-key destructor, racing with T2's frees. */
}

static void t2(void *a) {
  (void)a;
  /* Param 2: T2 has a thread cache (a block of another class), so a free of
   * T1's block after T1's exit adopts its abandoned slab (frontend.md,
   * "Thread exit, abandoned slabs and adoption"), racing the abandonment. */
  if (vrf_param() == 2) jwv_free(jwv_malloc(24));
  for (int i = 0; i < (vrf_param() == 1 ? 3 : 2); i++) {
    char *p = jwv_receive(&box[i]);
    jwv_check(p, SZ, 0x10 + i);
    jwv_free(p);
  }
}

static void setup(void) {
  /* Reclamation off: this client is about the frontend alone. */
  jwv_option("RECLAIM", 0);
  jwv_free(jwv_malloc(SZ)); /* global initialization; T0's own cache */
}

static void finish(void) {
  /* Both threads exited and released their caches: the block T1's slabs
   * held are all back. T0 allocates twice the blocks T1 used and checks
   * they are distinct and usable. */
  char *p[8];
  int n = vrf_param() == 1 ? 3 : 2;
  for (int i = 0; i < 2 * n; i++) {
    p[i] = jwv_malloc(SZ);
    jwv_fill(p[i], SZ, 0x70 + i);
  }
  for (int i = 0; i < 2 * n; i++) jwv_check(p[i], SZ, 0x70 + i);
  for (int i = 0; i < 2 * n; i++) jwv_free(p[i]);
}

VRF_CLIENT(.name = "xfree", .about = "jwmalloc cross-thread free: remote list, FULL/NOTIFIED/ABANDONED slab states, "
                                     "ready stack, abandoned count, exit racing with frees",
           .bound = "T1 allocates 2 blocks of a 2-block class and exits, T2 frees them (full: T1 allocates a third "
                    "first, so T2 frees into a parked FULL slab); param 1: T2 frees all three (chains of two slabs); "
                    "param 2: T2 has a cache (adopts the abandoned slab)",
           .setup = setup, .threads = {t1, t2}, .finish = finish);
