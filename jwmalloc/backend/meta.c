/* See meta.h. */
#include "meta.h"

#include <errno.h>

#include "../os/os_mem.h"

#define CHUNK_BYTES (JW_META_CHUNK_SLOTS * JW_META_SLOT_BYTES)

/* Slot and region-id allocation are lock-free (an allocation that finds the
 * backend lock held maps a root without it: docs/design/backend.md, section
 * 7a): compare-and-swap on the slot bitmaps, the chunk table and the id
 * tables. The id tables are also read lock-free: see meta.h. */
static jw_atomic_ptr chunks[JW_META_MAX_CHUNKS];
static jw_atomic_u64 used[JW_META_MAX_CHUNKS]; /* bit i: slot i of the chunk in use */
static jw_atomic_u32 nchunks, slots_in_use, nleaves;

jw_atomic_u32 jw_meta_l1_leaf[JW_ROOT_MAP_L1_SIZE];
jw_atomic_u32 jw_meta_leaf_l1[JW_META_MAX_LEAVES + 1];

/* Adds chunk n (the arena has n). Returns 0, or -1 when the arena is full or
 * the OS refuses. Two threads may race: one chunk wins, the other is unmapped. */
static int add_chunk(uint32_t n) {
  if (n >= JW_META_MAX_CHUNKS) {
    errno = ENOMEM;
    return -1;
  }
  /* Acquire: a chunk another thread installed (its zero pages) is seen. */
  if (jw_load(&chunks[n], JW_ACQUIRE) == NULL) {
    void *mem = jw_os_map(CHUNK_BYTES, JW_GRANULE);
    if (mem == NULL) return -1;
    void *exp = NULL;
    /* Release publishes the mapping; the loser unmaps its own. */
    if (!jw_cas(&chunks[n], &exp, mem, JW_RELEASE, JW_RELAXED)) jw_os_unmap(mem, CHUNK_BYTES);
  }
  uint32_t e = n;
  /* Release: a thread that sees the new count (acquire) sees chunks[n]. Any
   * thread may complete the count; a failure means one already did. */
  jw_cas(&nchunks, &e, n + 1, JW_RELEASE, JW_RELAXED);
  return 0;
}

jw_rec *jw_meta_slot_alloc(void) {
  for (;;) {
    /* Acquire pairs with add_chunk's release of the count. */
    uint32_t n = jw_load(&nchunks, JW_ACQUIRE);
    /* Lowest free slot first keeps the arena's touched pages compact. */
    for (uint32_t c = 0; c < n; c++) {
      uint64_t bits = jw_load(&used[c], JW_RELAXED);
      while (bits != ~(uint64_t)0) {
        unsigned s = (unsigned)__builtin_ctzll(~bits);
        /* Acquire: the slot's pages were given back (zeroed) by the thread
         * that freed it before its release in jw_meta_slot_put. */
        if (jw_cas_weak(&used[c], &bits, bits | ((uint64_t)1 << s), JW_ACQUIRE, JW_RELAXED)) {
          jw_fetch_add(&slots_in_use, 1, JW_RELAXED); /* a figure */
          return (jw_rec *)((char *)jw_load(&chunks[c], JW_ACQUIRE) + (size_t)s * JW_META_SLOT_BYTES);
        }
      }
    }
    if (add_chunk(n) != 0) return NULL;
  }
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
    /* Release: the slot's released (zero) pages before its reuse. */
    jw_fetch_and(&used[c], ~((uint64_t)1 << s), JW_RELEASE);
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
  /* Relaxed loads and stores of the id tables: they are read only through
   * range ids of roots published later with a release (meta.h). */
  if (jw_load(&jw_meta_l1_leaf[l1], JW_RELAXED) != 0) return 0;
  uint32_t id = jw_fetch_add(&nleaves, 1, JW_RELAXED) + 1;
  if (id > JW_META_MAX_LEAVES) {
    jw_fetch_sub(&nleaves, 1, JW_RELAXED);
    errno = ENOMEM;
    return -1;
  }
  jw_store(&jw_meta_leaf_l1[id], (uint32_t)l1, JW_RELAXED);
  uint32_t exp = 0;
  /* Two threads preparing roots of one new region race here: one id wins,
   * the other stays unused (its table entry is cleared; walks skip it). */
  if (!jw_cas(&jw_meta_l1_leaf[l1], &exp, id, JW_RELAXED, JW_RELAXED)) jw_store(&jw_meta_leaf_l1[id], 0, JW_RELAXED);
  return 0;
}

uint64_t jw_meta_slot_bytes(void) {
  return (uint64_t)jw_load(&slots_in_use, JW_RELAXED) * JW_META_SLOT_BYTES;
}

uint64_t jw_meta_arena_bytes(void) { return (uint64_t)jw_load(&nchunks, JW_RELAXED) * CHUNK_BYTES; }

/* Leaf ids in use, for whole-backend walks (check.c). */
uint32_t jw_meta_leaves(void) { return jw_load(&nleaves, JW_RELAXED); }
