/* Free-range index: per range size class, the free ranges in three buffers.
 *
 * Brief: "Backend" (a range of each class served directly) and, shaped for
 * the later parts, "Lifetime-based reclamation" and "Non-blocking interface".
 * Decisions in docs/design/backend.md, "Free-range index".
 *
 * Each class keeps three doubly linked lists threaded through the free
 * ranges' head records (links are range ids, meta.h):
 *   buffer 0 and buffer 1: physically backed free ranges; one of them is the
 *     active buffer (newly freed and merged ranges enter it), the other the
 *     standby buffer. jw_bins_flip() swaps their roles in O(1), so "still in
 *     standby after an interval" needs no timestamp and no scan;
 *   buffer 2 (released): pages given back with madvise, still mapped.
 * A free range's state names its buffer (JW_RS_FREE_BUF0 + buffer), so
 * removing it from the middle (when a sibling merges with it) is O(1).
 * Lists are circular and loosely ordered by root (jw_bins_rank: 16 GiB region
 * in order of first use, then its roots oldest first, i.e. by descending
 * address, as the kernel maps top-down): a range goes to the front when its root
 * is not above the front range's root, else to the back, and allocation
 * takes the front. This O(1) bias toward low roots lets
 * high roots drain and go back whole (5-10% less mapped memory than LIFO on
 * the reformatting pattern, docs/design/backend.md).
 * A 64-bit mask of non-empty classes finds the smallest class >= c at once.
 *
 * Part 4 puts a bounded concurrent bitmap per class in front of these lists
 * (ranges in state JW_RS_FREE_FAST) and takes the lists with jw_lock_try.
 *
 * Thread-safety: all functions need the backend lock.
 */
#ifndef JW_BACKEND_BINS_H
#define JW_BACKEND_BINS_H

#include <stdint.h>

#include "meta.h"
#include "size_class.h"

#define JW_BUF_RELEASED 2u
#define JW_NBUFS 3u

typedef struct jw_bin {
  jw_atomic_u32 head[JW_NBUFS]; /* range ids; 0 = empty */
  jw_atomic_u32 count[JW_NBUFS];
  jw_atomic_u32 total; /* sum of count[] */
} jw_bin;

typedef struct jw_bins {
  jw_bin bin[JW_NCLASSES];
  jw_atomic_u64 nonempty;            /* bit c: class c has a range in some buffer */
  jw_atomic_u32 active;              /* 0 or 1 */
  jw_atomic_u64 granules[JW_NBUFS];  /* free granules per buffer */
} jw_bins;

/* Placement's order of the root of range id r (jw_root_rank: the oldest
 * root first): the root's index in its region inverted, regions in order. */
static inline uint32_t jw_bins_rank(jw_rid r) { return (r >> 10) ^ JW_ROOT_RANK_FLIP; }

/* Head record of range id r (its root must be mapped). */
static inline jw_rec *jw_bins_rec(jw_rid r) { return jw_meta_rid_rec(r); }

/* The active buffer's index (0 or 1). */
static inline unsigned jw_bins_active(jw_bins *b) { return jw_load(&b->active, JW_RELAXED); }

/* Adds free range r (class index c) to buffer `buf` (front or back by root,
 * see above) and sets its head state to JW_RS_FREE_BUF0 + buf (keeping its
 * zeroed flag). */
void jw_bins_push(jw_bins *b, jw_rid r, unsigned c, unsigned buf);

/* Removes r (class c) from the buffer its state names; returns that buffer. */
unsigned jw_bins_remove(jw_bins *b, jw_rid r, unsigned c);

/* Smallest class index >= c with a free range, or -1. */
static inline int jw_bins_find(jw_bins *b, unsigned c) {
  uint64_t m = jw_load(&b->nonempty, JW_RELAXED) >> c;
  return m ? (int)(c + (unsigned)__builtin_ctzll(m)) : -1;
}

/* Takes a range of class c (which must be non-empty): the active buffer
 * first (warmest), then standby, then released. *buf receives its buffer. */
jw_rid jw_bins_pop(jw_bins *b, unsigned c, unsigned *buf);

/* Placement (docs/design/backend.md, section 7b): among the fronts of the
 * three buffers of the non-empty classes c .. c + window - 1, the range of
 * the lowest root (by jw_bins_rank: region in order of first use, then the
 * oldest root first); ties go to the smaller class, then active, standby, released.
 * *k receives its class; 0 when all those classes are empty. At most 3
 * loads per non-empty class, no record read: the fronts stand for their
 * lists (which are loosely ordered by root, see above). */
jw_rid jw_bins_lowest(jw_bins *b, unsigned c, unsigned window, unsigned *k);

/* Front range of buffer `buf` of class c, or 0. */
static inline jw_rid jw_bins_first(jw_bins *b, unsigned c, unsigned buf) {
  return jw_load(&b->bin[c].head[buf], JW_RELAXED);
}

/* Makes the standby buffer active and the active one standby. The new active
 * buffer must be empty (its ranges released first: release.c). */
static inline void jw_bins_flip(jw_bins *b) {
  jw_store(&b->active, jw_load(&b->active, JW_RELAXED) ^ 1u, JW_RELAXED);
}

#endif
