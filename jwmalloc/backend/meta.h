/* Backend metadata memory: the per-root record arrays and range ids.
 *
 * Brief: "Metadata: reclaimable, per granule". Decisions in
 * docs/design/backend.md, "Metadata memory".
 *
 * Record arrays: each root's records (1024 at 4 KiB pages: 12 KiB, exactly
 * three pages; a slot keeps room for 1024 at every page size) live
 * in a slot of a metadata arena that grows in chunks of 64 slots and never
 * shrinks its address space; a slot freed with its root has its pages given
 * back with madvise, so the metadata's physical memory falls after a peak
 * while a lock-free lookup racing with the release reads zeros, never faults.
 *
 * Range ids: a free or deferred range is named in a list link by 32 bits,
 *   [leaf id: 10 | root within the root map leaf: 12 | granule: 10]
 * where the leaf id numbers the 16 GiB regions (root map leaves) that hold
 * roots, in order of first use (1..1023; 0 is "no range"). So no root needs a
 * stored base address: an id gives the base, the base gives the records
 * through the root map.
 *
 * Thread-safety: slot and leaf-id allocation are lock-free (a root may be
 * mapped without the backend lock, docs/design/backend.md section 7a); the id
 * decoding functions are lock-free (tables are written before the roots that
 * use them are published through the root map).
 */
#ifndef JW_BACKEND_META_H
#define JW_BACKEND_META_H

#include <stdint.h>

#include "../pages/page_source.h"
#include "../pages/record.h"
#include "../pages/root_map.h"

typedef uint32_t jw_rid; /* 0: none */

/* A slot holds the records of the most granules a root has (4 KiB pages),
 * rounded up to the kernel's page so that its release (madvise) covers its
 * own pages only, at every page size (architecture.md, "Page size at run
 * time"): 12 KiB at 4 KiB kernel pages, 16 KiB at 16 KiB, 64 KiB at 64 KiB. */
#define JW_META_SLOT_BYTES ((JW_ROOT_GRANULES_MAX * sizeof(jw_rec) + jw_page.kernel - 1) & ~(jw_page.kernel - 1))
#define JW_META_CHUNK_SLOTS 64
#define JW_META_MAX_CHUNKS 4096 /* 262144 roots: 1 TiB of ranges */
#define JW_META_MAX_LEAVES 1023

/* A zeroed record array for one root (JW_META_SLOT_BYTES), or NULL with
 * errno = ENOMEM (arena full or the OS refused a chunk). Lock-free. */
jw_rec *jw_meta_slot_alloc(void);

/* Gives a root's record array back: its pages go to the OS, the slot is
 * reused by a later root. Backend lock held. */
void jw_meta_slot_free(jw_rec *recs);

/* The three steps of jw_meta_slot_free, for a release that makes its system
 * calls without the backend lock (release.h): jw_meta_slot_retire stops
 * counting the slot in the figures, with its root (backend lock held);
 * jw_meta_slot_release gives the pages back (no lock needed: the slot is
 * still reserved, nobody else touches it); jw_meta_slot_put makes the slot
 * reusable (backend lock held). */
void jw_meta_slot_retire(jw_rec *recs);
void jw_meta_slot_release(jw_rec *recs);
void jw_meta_slot_put(jw_rec *recs);

/* Makes range ids available for the root at base (4 MiB aligned): assigns its
 * root map leaf an id on first use. Returns 0, or -1 with errno = ENOMEM when
 * 1023 leaves (16 TiB of address space) are in use. Lock-free. */
int jw_meta_prepare_root(uintptr_t base);

/* Range id of granule g of the root at base (prepared). Lock-free. */
static inline jw_rid jw_meta_rid(uintptr_t base, uint32_t g);
/* Base address and granule of a range id. Lock-free. */
static inline uintptr_t jw_meta_rid_base(jw_rid r);
static inline uint32_t jw_meta_rid_granule(jw_rid r) { return r & (JW_ROOT_GRANULES - 1); }

/* The record of range id r's granule (its root mapped). Lock-free: the
 * direct path (id -> root map leaf -> records) without jw_root_map_get's
 * checks, which a valid id never needs; the free lists follow one such link
 * per step. */
static inline jw_rec *jw_meta_rid_rec(jw_rid r);

/* Figures: bytes of record arrays in use (JW_META_SLOT_BYTES per root: 12 KiB
 * on a 4 KiB kernel), and address space reserved by the arena (64 slots a
 * chunk, never unmapped). */
uint64_t jw_meta_slot_bytes(void);
uint64_t jw_meta_arena_bytes(void);

/* Leaf ids handed out so far (1..n; an id whose jw_meta_leaf_l1 entry is 0
 * lost a race and is unused), for whole-backend walks. */
uint32_t jw_meta_leaves(void);

/* Tables behind the inline decoders (meta.c). */
extern jw_atomic_u32 jw_meta_l1_leaf[JW_ROOT_MAP_L1_SIZE];
extern jw_atomic_u32 jw_meta_leaf_l1[JW_META_MAX_LEAVES + 1];

static inline jw_rid jw_meta_rid(uintptr_t base, uint32_t g) {
  /* Relaxed: the entry was written under the lock before base's root was
   * published with a release through the root map. */
  uint32_t leaf = jw_load(&jw_meta_l1_leaf[base >> JW_ROOT_MAP_L1_SHIFT], JW_RELAXED);
  uint32_t l2 = (uint32_t)(base >> JW_ROOT_SHIFT) & (JW_ROOT_MAP_L2_SIZE - 1);
  return (leaf << 22) | (l2 << 10) | g;
}

static inline jw_rec *jw_meta_rid_rec(jw_rid r) {
  /* Relaxed for the id table, as in jw_meta_rid; acquire for the root map,
   * as in jw_root_map_get (pairs with the release that published the root). */
  uintptr_t l1 = jw_load(&jw_meta_leaf_l1[r >> 22], JW_RELAXED);
  jw_atomic_ptr *leaf = jw_load(&jw_root_map_l1[l1], JW_ACQUIRE);
  jw_rec *recs = jw_load(&leaf[(r >> 10) & 0xfff], JW_ACQUIRE);
  return recs + (r & (JW_ROOT_GRANULES - 1));
}

static inline uintptr_t jw_meta_rid_base(jw_rid r) {
  uintptr_t l1 = jw_load(&jw_meta_leaf_l1[r >> 22], JW_RELAXED); /* as in jw_meta_rid */
  return (l1 << JW_ROOT_MAP_L1_SHIFT) | ((uintptr_t)((r >> 10) & 0xfff) << JW_ROOT_SHIFT);
}

#endif
