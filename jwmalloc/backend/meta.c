/* See meta.h. */
#include "meta.h"

#include <errno.h>

#include "../os/os_mem.h"

#define CHUNK_BYTES (JW_META_CHUNK_SLOTS * JW_META_SLOT_BYTES)

/* Every variable here is written under the backend lock; relaxed accesses
 * (the lock orders them). The id tables are also read lock-free: see meta.h. */
static jw_atomic_ptr chunks[JW_META_MAX_CHUNKS];
static jw_atomic_u64 used[JW_META_MAX_CHUNKS]; /* bit i: slot i of the chunk in use */
static jw_atomic_u32 nchunks, slots_in_use, nleaves;

jw_atomic_u32 jw_meta_l1_leaf[JW_ROOT_MAP_L1_SIZE];
jw_atomic_u32 jw_meta_leaf_l1[JW_META_MAX_LEAVES + 1];

jw_rec *jw_meta_slot_alloc(void) {
  uint32_t n = jw_load(&nchunks, JW_RELAXED);
  uint32_t c = 0;
  /* Lowest free slot first keeps the arena's touched pages compact. */
  while (c < n && jw_load(&used[c], JW_RELAXED) == ~(uint64_t)0) c++;
  if (c == n) {
    if (n == JW_META_MAX_CHUNKS) {
      errno = ENOMEM;
      return NULL;
    }
    void *mem = jw_os_map(CHUNK_BYTES, JW_GRANULE);
    if (mem == NULL) return NULL;
    jw_store(&chunks[c], mem, JW_RELAXED);
    jw_store(&nchunks, n + 1, JW_RELAXED);
  }
  uint64_t bits = jw_load(&used[c], JW_RELAXED);
  unsigned s = (unsigned)__builtin_ctzll(~bits);
  jw_store(&used[c], bits | ((uint64_t)1 << s), JW_RELAXED);
  jw_fetch_add(&slots_in_use, 1, JW_RELAXED);
  return (jw_rec *)((char *)jw_load(&chunks[c], JW_RELAXED) + (size_t)s * JW_META_SLOT_BYTES);
}

void jw_meta_slot_release(jw_rec *recs) {
  /* Pages back to the OS; they read as zero when the slot is reused. If the
   * kernel refuses, zero them by hand so the reuse invariant holds. */
  if (jw_os_release(recs, JW_META_SLOT_BYTES) != 0) {
    for (uint32_t i = 0; i < JW_ROOT_GRANULES; i++) {
      jw_store(&recs[i].tag, 0, JW_RELAXED);
      jw_store(&recs[i].next, 0, JW_RELAXED);
      jw_store(&recs[i].prev, 0, JW_RELAXED);
    }
  }
}

void jw_meta_slot_retire(jw_rec *recs) {
  (void)recs;
  jw_fetch_sub(&slots_in_use, 1, JW_RELAXED);
}

void jw_meta_slot_put(jw_rec *recs) {
  uint32_t n = jw_load(&nchunks, JW_RELAXED);
  for (uint32_t c = 0; c < n; c++) {
    char *base = jw_load(&chunks[c], JW_RELAXED);
    if ((char *)recs < base || (char *)recs >= base + CHUNK_BYTES) continue;
    unsigned s = (unsigned)(((char *)recs - base) / JW_META_SLOT_BYTES);
    jw_store(&used[c], jw_load(&used[c], JW_RELAXED) & ~((uint64_t)1 << s), JW_RELAXED);
    return;
  }
}

void jw_meta_slot_free(jw_rec *recs) {
  jw_meta_slot_retire(recs);
  jw_meta_slot_release(recs);
  jw_meta_slot_put(recs);
}

int jw_meta_prepare_root(uintptr_t base) {
  uintptr_t l1 = base >> JW_ROOT_MAP_L1_SHIFT;
  if (l1 >= JW_ROOT_MAP_L1_SIZE) {
    errno = ENOMEM;
    return -1;
  }
  if (jw_load(&jw_meta_l1_leaf[l1], JW_RELAXED) != 0) return 0;
  uint32_t id = jw_load(&nleaves, JW_RELAXED) + 1;
  if (id > JW_META_MAX_LEAVES) {
    errno = ENOMEM;
    return -1;
  }
  jw_store(&jw_meta_leaf_l1[id], (uint32_t)l1, JW_RELAXED);
  jw_store(&jw_meta_l1_leaf[l1], id, JW_RELAXED);
  jw_store(&nleaves, id, JW_RELAXED);
  return 0;
}

uint64_t jw_meta_slot_bytes(void) {
  return (uint64_t)jw_load(&slots_in_use, JW_RELAXED) * JW_META_SLOT_BYTES;
}

uint64_t jw_meta_arena_bytes(void) { return (uint64_t)jw_load(&nchunks, JW_RELAXED) * CHUNK_BYTES; }

/* Leaf ids in use, for whole-backend walks (check.c). */
uint32_t jw_meta_leaves(void) { return jw_load(&nleaves, JW_RELAXED); }
