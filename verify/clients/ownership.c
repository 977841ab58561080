/* Real code: ownership transfer of backend structures with rollback
 * (jwmalloc/backend/backend.c fast_free, backend/fast.c: the per-class
 * bounded bitmaps; design: docs/design/backend.md, section 7a). Brief:
 * "Non-blocking interface" (per-class bounded concurrent bitmaps).
 *
 * A free puts a range into its class's bitmap in three stages: reserve a
 * slot, transfer the range (its head record live -> FREE_FAST by CAS),
 * publish the slot. When the transfer finds the range no longer live (a
 * racing free of the same range took it first) the reservation is rolled
 * back. Here T1 and T2 free the same 32 KiB range at once through the
 * backend's own entry (jw_backend_free, which reports an invalid free with
 * -1/EINVAL rather than aborting like the public free), so every
 * interleaving of the two transfers is explored, including the one that
 * rolls back. Full bound: T3 allocates a 32 KiB range meanwhile (a taker of
 * the bitmap, or the locked path).
 *
 * Checked: exactly one of the two frees succeeds; at the end no bitmap slot
 * is left reserved (a missing rollback leaks the slot: the planted
 * JW_MUTATE_NO_ROLLBACK is found this way); the range can be allocated
 * again; no race, memory safety, termination. */
#include <errno.h>

#include "backend/backend.h"
#include "backend/fast.h"
#include "backend/page_source.h"
#include "jw_client.h"

#define GRANULES 8 /* 32 KiB */

static void *r0, *r1, *got;
static int rc[3], err[3];

static void free_r0(int i) {
  vrf_enter_allocator();
  errno = 0;
  rc[i] = jw_backend_free(r0);
  err[i] = errno;
  vrf_leave_allocator();
}

static void t1(void *a) {
  (void)a;
  free_r0(1);
}
static void t2(void *a) {
  (void)a;
  free_r0(2);
}
static void t3(void *a) {
  (void)a;
  if (!vrf_level()) return;
  vrf_enter_allocator();
  got = jw_pages_alloc(GRANULES, JW_KIND_LARGE, NULL, NULL);
  vrf_leave_allocator();
  VRF_ASSERT(got != NULL && got != r1);
}

static void setup(void) {
  jwv_option("RECLAIM", 0);
  vrf_enter_allocator();
  r0 = jw_pages_alloc(GRANULES, JW_KIND_LARGE, NULL, NULL);
  r1 = jw_pages_alloc(GRANULES, JW_KIND_LARGE, NULL, NULL); /* r0's sibling stays live: no merge */
  vrf_leave_allocator();
  VRF_ASSERT(r0 && r1);
}

static void finish(void) {
  VRF_ASSERT((rc[1] == 0) != (rc[2] == 0)); /* exactly one free succeeds */
  VRF_ASSERT(rc[1] == 0 ? rc[2] == -1 && err[2] == EINVAL : rc[1] == -1 && err[1] == EINVAL);
  for (unsigned c = 0; c < JW_NCLASSES; c++)
    for (unsigned i = 0; i < JW_FAST_SLOTS; i++) {
      uint32_t v = jw_load(&jw_fast[c].slot[i], JW_RELAXED);
      if (v == JW_FAST_RESERVED) vrf_fail("class %u slot %u left reserved after every thread finished", c, i);
    }
  /* r0 (or T3's range, if T3 took r0) is free and allocatable again. */
  vrf_enter_allocator();
  void *again = jw_pages_alloc(GRANULES, JW_KIND_LARGE, NULL, NULL);
  vrf_leave_allocator();
  VRF_ASSERT(again != NULL && again != r1 && again != got);
}

VRF_CLIENT(.name = "ownership", .about = "jwmalloc backend bitmaps: staged ownership transfer of a freed range, "
                                         "rollback when a racing free wins",
           .bound = "T1, T2 free the same 32 KiB range (full: T3 allocates one meanwhile)", .setup = setup,
           .threads = {t1, t2, t3}, .finish = finish);
