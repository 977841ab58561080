/* The per-class bounded concurrent bitmaps in front of the free lists.
 *
 * Brief: "Non-blocking interface". Design, the ownership protocol and why:
 * docs/design/backend.md, section 7a.
 *
 * Each class has up to JW_FAST_SLOTS slots (one cache line); a slot holds 0 (empty),
 * JW_FAST_RESERVED (a put in progress) or the range id of a free range of
 * that class. A slot holding r owns range r: r is free, in state
 * JW_RS_FREE_FAST, and nobody else changes its head state or the records
 * inside it until the slot is emptied by a successful compare-and-swap.
 *
 * Thread-safety: every function is lock-free (no lock, no wait); the lock
 * holder uses jw_fast_claim and jw_fast_flush_slot like any other thread.
 * Allocation-free.
 */
#ifndef JW_BACKEND_FAST_H
#define JW_BACKEND_FAST_H

#include "meta.h"
#include "size_class.h"

#define JW_FAST_SLOTS 8
#define JW_FAST_MAX_GRANULES 256u
/* The same bound in bytes (1 MiB), the one fast frees compare at every page
 * size, so that a whole root (4 MiB; 256 granules of 16 KiB) never enters the
 * root reserve's bitmap by an uncontended free (architecture.md, "Page size at
 * run time"). */
#define JW_FAST_MAX_BYTES ((size_t)JW_FAST_MAX_GRANULES << 12)
#define JW_FAST_RESERVED 0xffffffffu
/* The root class's bitmap is the root reserve (docs/design/backend.md,
 * section 7c): entirely free, backed roots that a free just emptied, where
 * an allocation that finds the backend lock held can reach them. */
#define JW_FAST_ROOT_SLOTS 4u

typedef struct jw_fast_class {
  jw_atomic_u32 slot[JW_FAST_SLOTS];
  /* Lock-free backend operations of this class in flight (backend_internal.h,
   * lf_enter): beside the slots, so counting costs no extra cache line. */
  jw_atomic_u32 inflight;
} __attribute__((aligned(64))) jw_fast_class;

extern jw_fast_class jw_fast[JW_NCLASSES];
/* Slots in use per class of 4 KiB granules (jw_fast_slots maps a larger
 * page's class to it): min(8, max(2, 128 / granules)) up to 64 granules,
 * 2 from 80 to 256 granules (section 7c: the 256 KiB-1 MiB ranges), all of
 * them for frees and allocations (up to JW_FAST_MAX_GRANULES); one for the
 * classes above (the remainders of lock-free splits and contended frees:
 * other frees of those classes use the lists), and the root reserve's
 * JW_FAST_ROOT_SLOTS for the root class. */
extern const uint8_t jw_fast_nslots[JW_NCLASSES];

/* Slots in use for class c at the page in force: the table's entry for the
 * class of the same bytes in 4 KiB granules, so that every page size keeps
 * the same bytes in the bitmaps and the root class (4 MiB) gets the root
 * reserve's slots (architecture.md, "Page size at run time"); 0 for the
 * classes above a root, which never occur. At 4 KiB the table's own entry. */
static inline unsigned jw_fast_slots(unsigned c) {
  unsigned k = JW_GRANULE_SHIFT - JW_GRANULE_MIN_SHIFT;
  if (__builtin_expect(k == 0, 1)) return jw_fast_nslots[c];
  unsigned c4 = jw_class_index_up((uint32_t)jw_class_granules[c] << k);
  return c4 < JW_NCLASSES ? jw_fast_nslots[c4] : 0;
}

/* Takes the free range of class c of the oldest root (placement's root
 * order, jw_bins_rank; then the lowest address) out of its bitmap and returns
 * its id; the caller owns the range. 0 when the bitmap is empty. Lock-free. */
jw_rid jw_fast_take(unsigned c);

/* Whether class c's bitmap seems to hold a range (relaxed peek: lets a miss
 * skip the in-flight accounting). */
int jw_fast_nonempty(unsigned c);

/* Stage 1 of a put: reserves an empty slot of class c; returns its index,
 * or -1 when the bitmap is full (or c has none). */
int jw_fast_reserve(unsigned c);

/* Stage 3 of a put: publishes range r (head already FREE_FAST, interior
 * records cleared) in the reserved slot i. Release. */
void jw_fast_publish(unsigned c, int i, jw_rid r);

/* Rollback of stage 1: the reserved slot i becomes empty again. */
void jw_fast_unreserve(unsigned c, int i);

/* Takes the given range r (class c, head seen FREE_FAST) out of its bitmap
 * for a merge; returns 1 when the caller now owns it, 0 when it is in no
 * slot (an allocation took it first, or its put has not published yet). */
int jw_fast_claim(unsigned c, jw_rid r);

/* Empties slot i of class c if it holds a range and returns the range (the
 * caller owns it), else 0. For flushing the bitmaps into the lists. */
jw_rid jw_fast_flush_slot(unsigned c, unsigned i);

/* Ranges in class c's bitmap now (a relaxed scan of its slots: a figure). */
unsigned jw_fast_count(unsigned c);

/* Granules held in the bitmaps: the running count (a figure, and part of
 * the cached bytes the reclamation watermark bounds), and a scan of the
 * slots (for checks at a quiet point: the two agree there). */
uint64_t jw_fast_granules(void);
uint64_t jw_fast_granules_scan(void);

#endif
