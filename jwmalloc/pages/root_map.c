/* See root_map.h. */
#include "root_map.h"

#include <errno.h>

#include "../os/os_mem.h"

jw_atomic_ptr jw_root_map_l1[JW_ROOT_MAP_L1_SIZE];
static jw_atomic_u64 leaf_bytes;

/* At least one granule: a 32-bit leaf (16 roots) is 64 bytes. */
#define LEAF_BYTES jw_align_up(JW_ROOT_MAP_L2_SIZE * sizeof(jw_atomic_ptr), JW_GRANULE)

static jw_atomic_ptr *leaf_for(uintptr_t a, int create) {
  jw_atomic_ptr *slot = &jw_root_map_l1[a >> JW_ROOT_MAP_L1_SHIFT];
  /* Acquire: see the zeroed leaf published by another thread. */
  jw_atomic_ptr *leaf = jw_load(slot, JW_ACQUIRE);
  if (leaf || !create) return leaf;
  jw_atomic_ptr *fresh = jw_os_map(LEAF_BYTES, JW_GRANULE);
  if (fresh == NULL) return NULL;
  void *expected = NULL;
  /* Release on success publishes the leaf; acquire on failure reads the
   * winner's leaf. The loser unmaps its own. */
  if (jw_cas(slot, &expected, fresh, JW_ACQ_REL, JW_ACQUIRE)) {
    jw_fetch_add(&leaf_bytes, LEAF_BYTES, JW_RELAXED);
    return fresh;
  }
  jw_os_unmap(fresh, LEAF_BYTES);
  return expected;
}

int jw_root_map_set(uintptr_t root_base, void *desc) {
  if ((root_base & (JW_ROOT - 1)) != 0 || JW_ABOVE_VA(root_base) != 0) {
    errno = EINVAL;
    return -1;
  }
  jw_atomic_ptr *leaf = leaf_for(root_base, 1);
  if (leaf == NULL) {
    errno = ENOMEM;
    return -1;
  }
  /* Release: the descriptor's contents are visible to any lookup that sees it. */
  jw_store(&leaf[(root_base >> JW_ROOT_SHIFT) & (JW_ROOT_MAP_L2_SIZE - 1)], desc, JW_RELEASE);
  return 0;
}

int jw_root_map_prepare(uintptr_t root_base) {
  if (JW_ABOVE_VA(root_base) != 0 || leaf_for(root_base, 1) == NULL) {
    errno = ENOMEM;
    return -1;
  }
  return 0;
}

void jw_root_map_clear(uintptr_t root_base) {
  jw_atomic_ptr *leaf = leaf_for(root_base, 0);
  if (leaf) jw_store(&leaf[(root_base >> JW_ROOT_SHIFT) & (JW_ROOT_MAP_L2_SIZE - 1)], NULL, JW_RELEASE);
}

uint64_t jw_root_map_bytes(void) { return jw_load(&leaf_bytes, JW_RELAXED); }
