/* The 12-byte per-granule metadata record of a root.
 *
 * Brief: "Metadata: reclaimable, per granule". Encoding and worked examples in
 * docs/design/backend.md, "Metadata encoding".
 *
 * A root of R granules has exactly R records, one per granule, in a 1-D array
 * indexed by (address - root base) >> JW_GRANULE_SHIFT (12 at 4 KiB pages;
 * R = 1024, 256 or 64): no search. A record is three 32-bit
 * words:
 *
 *   tag   state, class, and the tree boundary that starts at this granule
 *   next  free-list / deferred-list link (a range id, backend/meta.h)
 *   prev  free-list back link
 *
 * The tree is not stored as nodes. Every node of a closed sibling tree starts
 * at the first granule of some leaf, and every position b > 0 where a leaf
 * starts is a boundary between two sibling nodes at depth level(b) >= 1. The
 * boundary record keeps level(b) and the class of the sibling node on each
 * side (span_l: the node ending at b; span_r: the node starting at b). From
 * these, parent, siblings and depth are computed (tree.h); a leaf's depth is
 * max(level(start), level(end)) with level(0) = level(R) = 0.
 *
 * tag bit layout (LSB first):
 *   0..3   state (jw_rec_state)
 *   4      zeroed: a free range whose bytes are known to be zero
 *   5..10  class index of the leaf starting here (head records)
 *   11..16 level of the boundary at this position (0: none / position 0)
 *   17..22 span_l: class index of the sibling node ending here
 *   23..28 span_r: class index of the node at depth `level` starting here
 *   29     given back: a free range whose pages were released with madvise
 *          since it was last live (a statistic: merges and allocations that
 *          touch memory already given back; zeroed alone cannot tell a
 *          never-touched range from a released one)
 *   30..31 unused
 * An INTERIOR record (a granule inside a live slab, or an interior address
 * registered with jw_pages_mark_interior) instead holds the distance back to
 * its range's head in bits 5..14.
 *
 * All words are jw_atomic_u32: jw_pages_lookup() reads tags without a lock.
 */
#ifndef JW_PAGES_RECORD_H
#define JW_PAGES_RECORD_H

#include <stdint.h>

#include "../common/atomic.h"

typedef struct jw_rec {
  jw_atomic_u32 tag;
  jw_atomic_u32 next;
  jw_atomic_u32 prev;
} jw_rec;

_Static_assert(sizeof(jw_rec) == 12, "metadata must be 12 bytes per granule");

typedef enum jw_rec_state {
  JW_RS_NONE = 0,        /* not a head: inside a range (all-zero record) */
  JW_RS_INTERIOR = 1,    /* inside a live range, resolvable to its head */
  JW_RS_LIVE_SMALL = 2,  /* live frontend slab */
  JW_RS_LIVE_MID = 3,    /* live midend slab */
  JW_RS_LIVE_LARGE = 4,  /* live 16 KiB-4 MiB block */
  JW_RS_LIVE_LARGE_MARKED = 5, /* live block with jw_pages_mark_interior records */
  JW_RS_DEFERRED = 6,    /* freed while the backend lock was held: on the deferred list */
  JW_RS_BUSY = 7,        /* free, owned by a thread mid-operation: a range being released
                          * (part 3, backend/release.h); part 4's staged ownership */
  JW_RS_FREE_FAST = 8,   /* free, in a class's bounded bitmap (backend/fast.h) */
  JW_RS_FREE_BUF0 = 9,   /* free, physically backed, in buffer 0 of its class */
  JW_RS_FREE_BUF1 = 10,  /* free, physically backed, in buffer 1 of its class */
  JW_RS_FREE_RELEASED = 11, /* free, pages released with madvise, still mapped */
  JW_RS_DEFERRED_AGED = 12, /* as DEFERRED, given back by a tier after aging in its cache
                             * (jw_pages_free_aged): filed as a standby piece */
  JW_RS_DEFERRED_FREE = 13, /* a free remainder of a lock-free split (backend/fast.h) on the
                             * deferred list, for the next lock holder to file */
} jw_rec_state;

#define JW_REC_STATE_BITS 4
#define JW_REC_ZEROED_SHIFT 4
#define JW_REC_CLASS_SHIFT 5
#define JW_REC_LEVEL_SHIFT 11
#define JW_REC_SPANL_SHIFT 17
#define JW_REC_SPANR_SHIFT 23
#define JW_REC_GIVEN_BACK_SHIFT 29
#define JW_REC_OFFSET_SHIFT 5
#define JW_REC_F6 0x3fu
#define JW_REC_F10 0x3ffu

#define JW_REC_STATE_MASK 0xfu
#define JW_REC_ZEROED_MASK (1u << JW_REC_ZEROED_SHIFT)
#define JW_REC_CLASS_MASK (JW_REC_F6 << JW_REC_CLASS_SHIFT)
#define JW_REC_LEVEL_MASK (JW_REC_F6 << JW_REC_LEVEL_SHIFT)
#define JW_REC_SPANL_MASK (JW_REC_F6 << JW_REC_SPANL_SHIFT)
#define JW_REC_SPANR_MASK (JW_REC_F6 << JW_REC_SPANR_SHIFT)
#define JW_REC_GIVEN_BACK_MASK (1u << JW_REC_GIVEN_BACK_SHIFT)
/* Flags of a free range, cleared when it becomes live. */
#define JW_REC_FREE_FLAGS (JW_REC_ZEROED_MASK | JW_REC_GIVEN_BACK_MASK)
/* The boundary part of a tag: survives the head's own state changes. */
#define JW_REC_BOUNDARY_MASK (JW_REC_LEVEL_MASK | JW_REC_SPANL_MASK | JW_REC_SPANR_MASK)
/* The head part of a tag: what the range starting here is. */
#define JW_REC_HEAD_MASK (JW_REC_STATE_MASK | JW_REC_FREE_FLAGS | JW_REC_CLASS_MASK)

/* Deepest boundary level the encoding can hold. A tree never needs more than
 * 35 (each nesting strictly shrinks the node, and there are 36 classes). */
#define JW_REC_MAX_LEVEL 63u

static inline unsigned jw_tag_state(uint32_t t) { return t & JW_REC_STATE_MASK; }
static inline unsigned jw_tag_zeroed(uint32_t t) { return (t >> JW_REC_ZEROED_SHIFT) & 1u; }
static inline unsigned jw_tag_class(uint32_t t) { return (t >> JW_REC_CLASS_SHIFT) & JW_REC_F6; }
static inline unsigned jw_tag_level(uint32_t t) { return (t >> JW_REC_LEVEL_SHIFT) & JW_REC_F6; }
static inline unsigned jw_tag_spanl(uint32_t t) { return (t >> JW_REC_SPANL_SHIFT) & JW_REC_F6; }
static inline unsigned jw_tag_spanr(uint32_t t) { return (t >> JW_REC_SPANR_SHIFT) & JW_REC_F6; }
static inline unsigned jw_tag_given_back(uint32_t t) { return (t >> JW_REC_GIVEN_BACK_SHIFT) & 1u; }
static inline unsigned jw_tag_offset(uint32_t t) { return (t >> JW_REC_OFFSET_SHIFT) & JW_REC_F10; }

static inline uint32_t jw_tag_head(unsigned state, unsigned zeroed, unsigned cls) {
  return (uint32_t)state | ((uint32_t)zeroed << JW_REC_ZEROED_SHIFT) |
         ((uint32_t)cls << JW_REC_CLASS_SHIFT);
}
static inline uint32_t jw_tag_boundary(unsigned level, unsigned spanl, unsigned spanr) {
  return ((uint32_t)level << JW_REC_LEVEL_SHIFT) | ((uint32_t)spanl << JW_REC_SPANL_SHIFT) |
         ((uint32_t)spanr << JW_REC_SPANR_SHIFT);
}
static inline uint32_t jw_tag_interior(unsigned offset) {
  return (uint32_t)JW_RS_INTERIOR | ((uint32_t)offset << JW_REC_OFFSET_SHIFT);
}

/* Changes the bits `clear` of a record's tag to `set`, keeping the rest. An
 * atomic read-modify-write: a thread freeing a live range without the lock
 * (deferred free) or marking an interior pointer may change that range's
 * state bits while the lock holder updates its boundary bits. */
static inline uint32_t jw_rec_update(jw_rec *r, uint32_t clear, uint32_t set) {
  uint32_t old = jw_load(&r->tag, JW_RELAXED);
  /* Relaxed: one word, nothing else published with it; ordering between
   * lock holders comes from the lock, and a deferred free publishes through
   * the deferred list's release. */
  while (!jw_cas_weak(&r->tag, &old, (old & ~clear) | set, JW_RELAXED, JW_RELAXED)) {
  }
  return (old & ~clear) | set;
}

static inline int jw_state_is_live(unsigned s) {
  return s >= JW_RS_LIVE_SMALL && s <= JW_RS_LIVE_LARGE_MARKED;
}
/* Freed while the lock was busy, on the deferred list. */
static inline int jw_state_is_deferred(unsigned s) { return s == JW_RS_DEFERRED || s == JW_RS_DEFERRED_AGED; }
/* Free and in one of its class's lists (mergeable, allocatable). */
static inline int jw_state_in_list(unsigned s) {
  return s >= JW_RS_FREE_BUF0 && s <= JW_RS_FREE_RELEASED;
}
/* Free in a list or in a bitmap: a sibling that coalescing may merge. */
static inline int jw_state_mergeable(unsigned s) { return jw_state_in_list(s) || s == JW_RS_FREE_FAST; }
/* Free, in any place (list, bitmap, in transit, released): may carry the
 * zeroed and given-back flags. */
static inline int jw_state_is_free(unsigned s) {
  return (s >= JW_RS_BUSY && s <= JW_RS_FREE_RELEASED) || s == JW_RS_DEFERRED_FREE;
}
/* A head record: the first granule of a range (live, free or in transit). */
static inline int jw_state_is_head(unsigned s) { return s >= JW_RS_LIVE_SMALL; }

#endif
