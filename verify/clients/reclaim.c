/* Real code: the reclaim cycle's buffer swap racing with frees and
 * allocations (jwmalloc/reclaim/cycle.c, backend/release.c, backend.c).
 * Brief: "Lifetime-based reclamation" (active, standby and unmapped buffers;
 * a cycle releases standby with madvise and swaps active into standby) and
 * "Non-blocking interface" (no lock held across the system call).
 *
 * Setup: reclamation on, the reclaim thread off (its body, one cycle, is
 * driven by T1 instead; the interval is long so no inline cycle runs; the
 * tiers' aging pass, the pool client's subject, unhooked), three
 * 32 KiB ranges allocated, the first freed and moved to standby by a first
 * cycle. T1 runs a cycle: takes the standby range as a batch under the lock,
 * releases it with madvise without the lock, files it at the next lock
 * holder (its own next step or T2's), then swaps the buffers. Meanwhile T2
 * frees the second range (into active, maybe deferred while T1 holds the
 * lock) and allocates a 32 KiB range (which may be the one being released:
 * it must not be handed out while in flight), writes and checks it.
 * Configurations (--param): 0, T2 frees only; 1, T2 frees then allocates
 * (too large to finish within 10 minutes on 2 cores: run by hand); 2, T2
 * allocates only. make verify runs 0 and 2, so the cycle is explored
 * against a free and, separately, against an allocation.
 *
 * Checked: the madvise never overlaps memory another thread accessed
 * without happening before it (the checker's release check), the third
 * range's contents survive, the backend's live bytes at the end are the
 * ranges held, no race, memory safety, termination. */
#include "pages/page_source.h"
#include "jw_client.h"
#include "reclaim/reclaim.h"

#define LARGE (32 << 10) /* above the midend (16 KiB): a backend range */

static void *r[3];
static void *got;

static void cycle(void) {
  vrf_enter_allocator();
  jw_reclaim_cycle();
  vrf_leave_allocator();
}

static void t1(void *a) {
  (void)a;
  cycle();
}

static void t2(void *a) {
  (void)a;
  if (vrf_param() != 2) jwv_free(r[1]);
  if (vrf_param() != 0) {
    got = jwv_malloc(LARGE);
    jwv_fill(got, 64, 0x5a);
    jwv_check(got, 64, 0x5a);
  }
}

static uint64_t live_at_setup;

static void setup(void) {
  jwv_reclaim_by_client();
  /* The cycle's aging pass over the tiers' caches is the pool client's
   * subject; here the cycle goes straight to the backend's buffers. */
  vrf_enter_allocator();
  jw_reclaim_set_tier_hook(NULL);
  vrf_leave_allocator();
  for (int i = 0; i < 3; i++) r[i] = jwv_malloc(LARGE);
  jwv_fill(r[2], LARGE, 0x33);
  jwv_free(r[0]);
  cycle(); /* standby was empty: swap, r[0]'s range now in standby */
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  live_at_setup = st.live_bytes; /* r[1] and r[2]; at the end r[2] and got */
}

static void finish(void) {
  jwv_check(r[2], LARGE, 0x33);
  /* The backend's live bytes are what the clients hold: no range lost,
   * none counted twice (its records are checked by jw_pages_get_stats's
   * counters, kept under the backend lock). */
  jwv_free(jwv_malloc(32 << 10)); /* a range: takes the backend lock: deferred frees drained */
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  uint64_t want = live_at_setup - (vrf_param() != 2 ? LARGE : 0) + (got ? LARGE : 0);
  if (st.live_bytes != want)
    vrf_fail("backend live bytes %lu, expected %lu", (unsigned long)st.live_bytes, (unsigned long)want);
  if (got) jwv_free(got);
  if (vrf_param() == 2) jwv_free(r[1]);
  jwv_free(r[2]);
}

VRF_CLIENT(.name = "reclaim", .about = "jwmalloc reclaim cycle (batch release, buffer swap) racing with a free and "
                                       "an allocation",
           .bound = "T1 runs one reclaim cycle; T2 frees a 32 KiB range (param 1: then allocates and writes one; "
                    "param 2: only allocates and writes one); bitmaps of 1 slot per class",
           .setup = setup, .threads = {t1, t2}, .finish = finish);
