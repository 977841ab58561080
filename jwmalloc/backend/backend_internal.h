/* State and helpers shared by the backend's own files (backend.c lists them),
 * and the functions one of them defines for the others. */
#ifndef JW_BACKEND_INTERNAL_H
#define JW_BACKEND_INTERNAL_H

#include "backend.h"
#include "bins.h"
#include "fast.h"
#include "../common/config.h"
#include "../common/lock.h"

/* The class of a whole root: JW_ROOT_GRANULES = 2^k granules is class
 * 4k - 5 (size_class.h): 35 at 4 KiB pages, 27 at 16 KiB, 19 at 64 KiB.
 * Classes above it never occur at a larger page (architecture.md, "Page size
 * at run time"). */
#define JW_ROOT_CLASS (4u * (JW_ROOT_SHIFT - JW_GRANULE_SHIFT) - 5u)

typedef struct jw_backend_state {
  jw_lock lock;        /* the backend lock: trees, bins, roots (docs/design/backend.md, "Locks") */
  jw_bins bins;
  jw_atomic_u32 deferred; /* stack of ranges freed while the lock was busy (range ids) */
  jw_atomic_u32 inited, check, retain_roots;
  /* JWMALLOC_PLACEMENT (section 7b): JW_PLACE_OFF/ON/AUTO, or JW_PLACE_UNSET
   * until the tiers' options or the backend's init set it. Whether placement
   * is on now is jw_place_word (page_source.h). */
  jw_atomic_u32 place_mode;
  /* Reclamation mode (jw_backend_set_reclaim_mode): entirely free roots age
   * through the buffers instead of going back at once; the filing policy. */
  jw_atomic_u32 age_roots, policy;
  /* Statistics: written under the lock (or atomically), read racily. */
  jw_atomic_u64 peak_live_granules; /* live at the latest root mapping, highest since the detector's reset */
  jw_atomic_u64 live_granules, splits, merges, allocs, frees, deferred_frees;
  jw_atomic_u64 merges_after_release, allocs_refault, refault_granules;
  /* Part 4 (section 7a): bitmap hits, lock-free subdivisions and roots. */
  jw_atomic_u64 fast_allocs, fast_frees, lf_splits, lf_roots, lf_recycled;
  /* Section 7c: roots put into the reserve, and taken from it instead of mapped. */
  jw_atomic_u64 roots_reserved, roots_reused;
  /* Raised while the lock holder checks whole trees (lock-free operations
   * back off; their in-flight counts are in fast.h): 0 down, 1 up, 2 up
   * with an allocation asleep on it (a futex word, jw_backend_lf_enter_wait). */
  jw_atomic_u32 lf_checking;
  /* Placement (backend.md section 7b): the root (range id >> 10) the locked
   * allocation path last took from, lowered when a range of a lower root is
   * filed. Written under the lock, read racily by fast_free as a hint. */
  jw_atomic_u32 place_root;
} jw_backend_state;

/* Hidden (common/config.h): every file of the backend addresses it
 * directly. So is the placement word (page_source.h) for the backend's files,
 * which read it on their allocation and free paths. */
extern jw_backend_state jw_be JW_HIDDEN;
extern jw_atomic_u32 jw_place_word JW_HIDDEN;

/* Statistics counters: relaxed, they order nothing. */
static inline void bump(jw_atomic_u64 *c, uint64_t d) { jw_fetch_add(c, d, JW_RELAXED); }

/* Entirely free roots kept mapped: the root class's free ranges in the lists
 * and in the root reserve (section 7c). */
static inline uint32_t free_roots(void) {
  uint32_t n = jw_load(&jw_be.bins.bin[JW_ROOT_CLASS].total, JW_RELAXED);
  return n + (uint32_t)jw_fast_count(JW_ROOT_CLASS);
}

static inline int checking(void) { return jw_load(&jw_be.check, JW_RELAXED) != 0; }
static inline int placing(void) { return jw_place_on(); /* follows the switch (section 7b) */ }

static inline unsigned kind_state(jw_range_kind k) {
  return k == JW_KIND_SMALL_SLAB ? JW_RS_LIVE_SMALL : k == JW_KIND_MID_SLAB ? JW_RS_LIVE_MID : JW_RS_LIVE_LARGE;
}

/* A range [g, g+n) whose head just became live: slabs resolve from every
 * granule (page_source.h), so they get interior records. Relaxed stores: a
 * lookup of an address in the range follows the hand-over of the pointer,
 * which orders them (jw_backend_classify). */
static inline void made_live(jw_rec *recs, uint32_t g, uint32_t n, jw_range_kind kind) {
  if (kind != JW_KIND_LARGE)
    for (uint32_t i = 1; i < n; i++) jw_store(&recs[g + i].tag, jw_tag_interior(i), JW_RELAXED);
  bump(&jw_be.live_granules, n);
  bump(&jw_be.allocs, 1);
}

/* An allocation of n granules of memory given back (madvise): its pages
 * fault in again (the refault figures; reclamation.md 4a reads the bytes). */
static inline void note_refault(uint32_t n) {
  bump(&jw_be.allocs_refault, 1);
  bump(&jw_be.refault_granules, n);
}

static inline void *range_addr(uintptr_t base, uint32_t g) { return (void *)(base + ((uintptr_t)g << JW_GRANULE_SHIFT)); }

/* Records of range id r's root. */
static inline jw_rec *rid_recs(jw_rid r) { return jw_meta_rid_rec(r) - jw_meta_rid_granule(r); }

/* Lock held: the root placement now fills (section 7b). */
static inline void set_place_root(uint32_t root) { jw_store(&jw_be.place_root, root, JW_RELAXED); /* a hint: see fast_free (free.c) */ }

/* Reads the options once (options.c). */
void jw_backend_init_once(void);
/* free.c: frees every deferred range and files a released batch (lock held).
 * Returns the number of deferred frees done. */
unsigned jw_backend_drain_deferred(void);

/* Lock held: the end of every critical section of the backend lock. Drains
 * the deferred list, releases the lock, then looks at the list again (the
 * hand-over, backend.c and docs/design/backend.md section 7c, "The
 * deferred hand-over"): a free pushed after the last drain is filed, by this thread or by
 * a later holder, never left waiting. Returns the deferred frees done. */
unsigned jw_backend_unlock(void);

/* Lock held: files every range of the bitmaps through the lists. */
void jw_backend_flush_fast(void);

/* Keeps lock-free operations off the records while the caller (lock held)
 * reads whole trees (checking mode, jw_backend_check_all, fork prepare).
 * Returns 1 when none is in flight (waiting for those in flight if `wait`:
 * spin, yield, then short sleeps, common/backoff.h), 0 otherwise (nothing
 * held); after 1 (test point JW_TP_BE_CHECKING), jw_backend_lf_resume ends
 * the pause and wakes the allocations asleep on the flag. */
int jw_backend_lf_pause(int wait);
void jw_backend_lf_resume(void);

/* ---- lock-free operations and whole-tree checks exclude each other
 * (docs/design/backend.md, section 7a, "Checks"). Dekker-style: an operation
 * counts itself in flight (in its class's bitmap line, which it writes
 * anyway), then reads the checker's flag; the checker raises its flag, then
 * reads every count. Sequentially consistent orders make at least one of
 * them see the other: the operation backs off, or the checker waits. */

/* The checker's flag: 0 down, LF_RAISED up, LF_SLEEPER up with a waiter
 * asleep on it (jw_backend_lf_enter_wait), whom jw_backend_lf_resume wakes. */
enum { LF_RAISED = 1, LF_SLEEPER = 2 };

/* Counts a lock-free operation of class c in flight; 0 (nothing counted)
 * while the checker's flag is up: the caller backs off. */
static inline int lf_enter(unsigned c) {
  jw_fetch_add(&jw_fast[c].inflight, 1, JW_SEQ_CST);
  if (jw_load(&jw_be.lf_checking, JW_SEQ_CST) == 0) return 1;
  /* Release: nothing was written; keeps the count's updates uniform. */
  jw_fetch_sub(&jw_fast[c].inflight, 1, JW_RELEASE);
  return 0;
}

static inline void lf_exit(unsigned c) {
  /* Release: the operation's record writes happen before a checker that
   * reads the count as 0 (seq-cst load, stronger than acquire). */
  jw_fetch_sub(&jw_fast[c].inflight, 1, JW_RELEASE);
}

/* Lock held: files the free range [g, g+n) of the root at base (head state
 * any free or in-transit state) after merging it with every free sibling;
 * `pieces` (filing.h, JW_PIECE_*) says what the range itself is, and
 * the filing policy picks its buffer from it and from what it merged with.
 * With reclamation off, an entirely free root beyond the retained count is
 * unmapped instead. */
void jw_backend_put_free(uintptr_t base, jw_rec *recs, uint32_t g, uint32_t n, unsigned pieces);

/* backend.c: lf_enter for the paths that have no other way to go (a fresh
 * root), waiting while the checker's flag is up; the hand-over's look again
 * (returns the ranges drained); a push on the deferred list. */
void jw_backend_lf_enter_wait(unsigned c);
unsigned jw_backend_deferred_help(void);
void jw_backend_deferred_push(jw_rid r, jw_rec *rec);

/* check.c: checking mode's check of one root after operation `op`. */
void jw_backend_check_root(jw_rec *recs, uintptr_t base, const char *op);

/* alloc.c: a fresh root mapped without the lock (0 when the OS refuses);
 * the trough detector's note that a root was mapped. */
uintptr_t jw_backend_map_root(jw_rec **recs);
void jw_backend_note_root_mapped(void);

/* lockfree.c: class c carved out of an owned free range, and steps 3 and 5
 * of an allocation that found the lock held (NULL: nothing there). */
void *jw_backend_lf_carve(uintptr_t base, jw_rec *recs, uint32_t g, unsigned c, jw_range_kind kind, bool *zeroed);
void *jw_backend_lf_split_alloc(unsigned c, jw_range_kind kind, bool *zeroed);
void *jw_backend_lf_root_alloc(unsigned c, jw_range_kind kind, bool *zeroed);

#endif
