/* Real code: closed sibling trees under concurrent frees
 * (jwmalloc/backend/tree.c: split and coalesce; backend.c: the lock-free
 * bitmap put and the locked merge). Brief: "Backend: size-class-exact
 * ranges" (closed sibling trees) and "Bounded verification" (the paper's
 * checker found its root-sibling bug).
 *
 * Setup carves two sibling 32 KiB ranges out of a fresh root (the root is
 * split: the code that must know that the root has no siblings). T1 and T2
 * free one each at once: each either parks its range in the class bitmap
 * (its sibling still live) or takes the locked path and merges with the
 * sibling (claiming it from the bitmap). --param 1 (beyond the 10-minute
 * budget on this machine, not run by make verify): T3 allocates a 32 KiB
 * range meanwhile.
 *
 * Checked: after every thread finished no range is live, so every mapped
 * root must serve a whole-root (4 MiB) request without a new mapping: every
 * free range merged back up to its root (a lost merge, or a tree that
 * treats the root as having siblings, leaves pieces that never merge, and a
 * new root is mapped instead); no race, memory safety, termination. */
#include "pages/page_source.h"
#include "jw_client.h"

#define GRANULES 8 /* 32 KiB */

static void *r[2], *got;

static void t1(void *a) { jwv_range_free(r[(intptr_t)a]); }
static void t3(void *a) {
  (void)a;
  if (vrf_param()) got = jwv_range(GRANULES);
}

static void setup(void) {
  jwv_option("RECLAIM", 0);
  r[0] = jwv_range(GRANULES);
  r[1] = jwv_range(GRANULES);
  VRF_ASSERT(((uintptr_t)r[0] ^ (uintptr_t)r[1]) == (uintptr_t)GRANULES << JW_GRANULE_SHIFT); /* siblings */
}

static void finish(void) {
  if (got) jwv_range_free(got);
  jwv_check_roots_whole(); /* nothing is live */
}

VRF_CLIENT(.name = "tree", .about = "jwmalloc closed sibling trees: concurrent frees of sibling ranges merge back to the "
                                    "root",
           .bound = "T1, T2 free sibling 32 KiB ranges (param 1, beyond the budget: T3 allocates one meanwhile)", .setup = setup,
           .threads = {t1, t1, t3}, .args = {(void *)0, (void *)1}, .finish = finish);
