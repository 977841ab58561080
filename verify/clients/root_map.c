/* Real code: jwmalloc's root map (jwmalloc/pages/root_map.c), the lock-free
 * radix table from an address to its 4 MiB root. Two threads register roots
 * that share one level-2 leaf, so both race to map and publish the leaf; a
 * third looks a root up concurrently and reads the descriptor's fields.
 * Checked: the loser unmaps its leaf (one leaf accounted), lookups return the
 * registered descriptor or NULL, the descriptor's contents are visible to a
 * lookup that finds it (no race), and no access leaves legal memory.
 * Full bound: a fourth thread registers a root in another leaf and the reader
 * also looks up the second root. */
#include "pages/root_map.h"
#include "vrf.h"

typedef struct desc {
  int id, granules; /* plain fields written before registration */
} desc_t;

desc_t d1, d2, d3;
#define BASE1 ((uintptr_t)0x7f0000000000ull)
#define BASE2 (BASE1 + JW_ROOT)                      /* same leaf as BASE1 */
#define BASE3 (BASE1 + ((uintptr_t)1 << JW_ROOT_MAP_L1_SHIFT)) /* next leaf */

static void reg(desc_t *d, int id, uintptr_t base) {
  d->id = id;
  d->granules = 1024;
  vrf_enter_allocator();
  int r = jw_root_map_set(base, d);
  vrf_leave_allocator();
  VRF_ASSERT(r == 0);
}

static desc_t *lookup(uintptr_t a) {
  vrf_enter_allocator();
  desc_t *d = jw_root_map_get((void *)a);
  vrf_leave_allocator();
  return d;
}

static void t1(void *a) {
  (void)a;
  reg(&d1, 1, BASE1);
}
static void t2(void *a) {
  (void)a;
  reg(&d2, 2, BASE2);
}
static void t3(void *a) {
  (void)a;
  desc_t *d = lookup(BASE1 + 12345);
  if (d) VRF_ASSERT(d == &d1 && d->id == 1 && d->granules == 1024);
  if (vrf_level()) {
    d = lookup(BASE2);
    if (d) VRF_ASSERT(d == &d2 && d->id == 2 && d->granules == 1024);
  }
}
static void t4(void *a) {
  (void)a;
  if (vrf_level()) reg(&d3, 3, BASE3);
}

static void finish(void) {
  VRF_ASSERT(lookup(BASE1) == &d1 && lookup(BASE2 + JW_ROOT - 1) == &d2);
  VRF_ASSERT(lookup(BASE2 + JW_ROOT) == (vrf_level() ? NULL : NULL));
  size_t leaves = vrf_level() ? 2 : 1;
  VRF_ASSERT(jw_root_map_bytes() == leaves * JW_ROOT_MAP_L2_SIZE * sizeof(jw_atomic_ptr));
  if (vrf_level()) VRF_ASSERT(lookup(BASE3) == &d3);
}

VRF_CLIENT(.name = "root_map", .about = "jwmalloc root map: racing leaf creation, publication of descriptors",
           .bound = "T1, T2 register roots sharing a leaf, T3 looks up (full: also T4 registers in another leaf, T3 "
                    "looks up both)",
           .threads = {t1, t2, t3, t4}, .finish = finish);
