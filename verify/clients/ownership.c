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
 * rolls back. --param 1 (beyond the budget, not run by make verify): T3
 * frees another 32 KiB range meanwhile (a put
 * into the same class's bitmap, competing for its slots). (An allocation
 * racing the double free could take the range back in between, and the
 * second free would then free the new owner's range: a program error the
 * allocator cannot tell from a valid free.)
 *
 * Checked: exactly one of the two frees succeeds; at the end no bitmap slot
 * is left reserved (a missing rollback leaks the slot: the planted
 * JW_MUTATE_NO_ROLLBACK is found this way); the range can be allocated
 * again; no race, memory safety, termination. */
#include <errno.h>

#include "backend/backend.h"
#include "backend/fast.h"
#include "pages/page_source.h"
#include "jw_client.h"

#define GRANULES 8 /* 32 KiB */

static void *r0, *r1, *r2, *r3;
static int rc[3], err[3];

static void free_r0(int i) {
  vrf_enter_allocator();
  errno = 0;
  rc[i] = jw_backend_free(r0);
  err[i] = errno;
  vrf_leave_allocator();
}

static void t1(void *a) { free_r0((int)(intptr_t)a); }
static void t3(void *a) {
  (void)a;
  if (!vrf_param()) return;
  vrf_enter_allocator();
  int rc3 = jw_backend_free(r2); /* a put into the same class's bitmap */
  vrf_leave_allocator();
  VRF_ASSERT(rc3 == 0);
}

static void setup(void) {
  jwv_option("RECLAIM", 0);
  r0 = jwv_range(GRANULES);
  r1 = jwv_range(GRANULES); /* r0's sibling stays live: no merge */
  r2 = jwv_range(GRANULES);
  r3 = jwv_range(GRANULES); /* r2's sibling, live */
}

static void finish(void) {
  VRF_ASSERT((rc[1] == 0) != (rc[2] == 0)); /* exactly one free succeeds */
  VRF_ASSERT(rc[1] == 0 ? rc[2] == -1 && err[2] == EINVAL : rc[1] == -1 && err[1] == EINVAL);
  for (unsigned c = 0; c < JW_NCLASSES; c++)
    for (unsigned i = 0; i < JW_FAST_SLOTS; i++) {
      uint32_t v = jw_load(&jw_fast[c].slot[i], JW_RELAXED);
      if (v == JW_FAST_RESERVED) vrf_fail("class %u slot %u left reserved after every thread finished", c, i);
    }
  /* r0 (and r2) are free and allocatable again. */
  void *again = jwv_range(GRANULES);
  VRF_ASSERT(again == r0 || (vrf_param() && again == r2));
}

VRF_CLIENT(.name = "ownership", .about = "jwmalloc backend bitmaps: staged ownership transfer of a freed range, "
                                         "rollback when a racing free wins",
           .bound = "T1, T2 free the same 32 KiB range (param 1, beyond the budget: T3 frees another one meanwhile)", .setup = setup,
           .threads = {t1, t1, t3}, .args = {(void *)1, (void *)2}, .finish = finish);
