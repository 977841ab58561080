/* The thread cache's bins of larger blocks: freed midend blocks (2-16 KiB)
 * and freed ranges of 20 KiB-1 MiB, kept per thread for the thread's next
 * malloc of the same class, in front of the process-wide midend and the
 * backend.
 *
 * Brief: "Tiers" (the midend stays process-wide: these bins only hold blocks
 * between a free and the next malloc of their class, the slabs stay shared)
 * and "Lifetime-based reclamation" (an idle bin ages like the page pool).
 * Design and why: docs/design/frontend.md, "The block cache", and
 * docs/design/midend.md, "Thread caches in front of the midend".
 *
 * Bounds: at most JW_BC_SLOTS blocks per class (fewer for large classes:
 * jw_bc_cap) and two byte budgets per thread: group 0 (midend blocks and
 * ranges up to 64 KiB) JW_BC_MAX_BYTES; group 1 (ranges of 80 KiB-1 MiB) a
 * budget within JW_BC_BIG_MIN_BYTES .. JW_BC_BIG_MAX_BYTES that grows by
 * each block freed into it while it is full and that every aging pass sets
 * to the bytes the thread used from it during the interval (frontend.md,
 * "Ranges of 80 KiB-1 MiB"). A bin is a
 * stack (most recently freed on top); `stale` counts the bottom entries that
 * stayed unused since the reclaimer's previous aging pass, which it gives
 * back.
 *
 * Locking: every field is guarded by the owning thread cache's pool lock
 * (jw_tcache.pool_lock), which the owner and the reclaimer only *try* on
 * malloc/free paths (docs/design/concurrency.md): an owner that finds it
 * held does without the cache (a take misses, a put is refused), so no
 * malloc or free waits. A cached block is still live for the tier below (a
 * midend block stays in its slab, a range stays a live LARGE range) and
 * carries FREE_KEY in its second word, so a double free is still reported.
 * Never allocates.
 */
#ifndef JW_FRONTEND_BLOCK_CACHE_H
#define JW_FRONTEND_BLOCK_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/asan.h"
#include "../common/config.h"
#include "../common/lock.h"

/* Off in the model checker's builds unless a client asks for it: the
 * existing clients exercise the midend's and the backend's own paths
 * (docs/design/verification.md). */
#if defined(JW_VERIFY) && !defined(JW_VERIFY_BLOCK_CACHE)
#define JW_BC_ENABLED 0
#else
#define JW_BC_ENABLED 1
#endif

#define JW_BC_MID_BINS 13   /* one per midend class (JW_MID_NCLASSES) */
/* Range bins are keyed by bytes in 4 KiB units at every page size: a range
 * size class of 16 or 64 KiB granules is one of 4 KiB granules in bytes, so
 * a freed range finds the bin of exactly its bytes; the bins of sizes that
 * are no whole page stay empty (docs/design/architecture.md, "Page size at
 * run time"). "Granules" below are 4 KiB units. */
#define JW_BC_RANGE_BINS 24 /* range classes of 5..256 granules (20 KiB-1 MiB) */
#define JW_BC_BINS (JW_BC_MID_BINS + JW_BC_RANGE_BINS)
#define JW_BC_BIG_FIRST (JW_BC_MID_BINS + 8) /* first bin of group 1: 20 granules (80 KiB) */
#define JW_BC_SMALL_RANGE_MAX_GRANULES 16u   /* group 0's largest range class (64 KiB) */
#define JW_BC_RANGE_MAX_GRANULES 256u        /* the largest cached range class (1 MiB) */
#define JW_BC_SLOTS 8 /* most blocks a bin holds */
#define JW_BC_MAX_BYTES ((uint32_t)256 << 10)      /* group 0, per thread */
#define JW_BC_BIG_MIN_BYTES ((uint32_t)1 << 20)    /* group 1's least budget: one 1 MiB range */
#ifndef JW_BC_BIG_MAX_BYTES
#define JW_BC_BIG_MAX_BYTES ((uint32_t)4 << 20)    /* group 1's greatest budget (measured: frontend.md) */
#endif
#define JW_BC_LOW_MEMORY_BYTES ((uint32_t)64 << 10) /* group 0 with JWMALLOC_LOW_MEMORY=1 */
#define JW_BC_NONE 0xffu

typedef struct jw_bc_bin {
  jw_block *top;  /* most recently freed; the blocks' first words link the rest */
  uint32_t bytes; /* constant: jw_bc_bytes of this bin (next to what it scales) */
  uint8_t n;      /* blocks held */
  uint8_t stale;  /* the `stale` oldest (last in the list) unused since the last aging pass */
  uint8_t cap;    /* constant: jw_bc_cap of this bin */
  uint8_t grp;    /* constant: its budget, 0 or 1 (JW_BC_BIG_FIRST) */
} jw_bc_bin;

typedef struct jw_bcache {
  uint32_t used[2];  /* bytes held in each group's bins */
  uint32_t limit[2]; /* each group's budget: JW_BC_MAX_BYTES; grown by puts, set by the aging pass */
  uint32_t kicked;   /* the owner kicked the reclaimer since its last aging pass */
  jw_bc_bin bin[JW_BC_BINS];
} jw_bcache;

/* Bytes of a block of bin i, and how many blocks bin i may hold. */
extern const uint32_t jw_bc_bytes[JW_BC_BINS];
extern const uint8_t jw_bc_cap[JW_BC_BINS];
/* Bin of the smallest range class >= g 4 KiB units (g <= 256), or
 * JW_BC_NONE (g < 5: such ranges are not cached). */
extern const uint8_t jw_bc_range_bin[JW_BC_RANGE_MAX_GRANULES + 1];

/* Sets up the bins of a new (zeroed) cache: their constant sizes, caps and
 * groups, and the budgets (group 1 starts at JW_BC_BIG_MIN_BYTES). */
void jw_bc_init(jw_bcache *bc);

/* The owner's side of its pool lock (common/lock.h) on the block cache's
 * hit paths: one exchange to take it, a plain release store to give it
 * back. Valid because only the owner ever waits on its own pool lock
 * (thread exit, malloc_trim: concurrency.md), so while the owner is here
 * the lock is free (0) or held by a reclaimer that only tried it (1), never
 * in the "held with a sleeper" state (2) that jw_lock_release must see:
 * exchanging 1 over a reclaimer's 1 changes nothing, and the owner's own
 * holding is never contended by a sleeper. */
static inline bool jw_bc_lock(jw_lock *lk) {
  /* Acquire: the reclaimer's last changes to the bins (its release). */
  if (jw_xchg(&lk->state, 1, JW_ACQUIRE) != 0) return false;
  JW_LOCK_TAKEN(JW_LK_POOL);
  return true;
}
static inline void jw_bc_unlock(jw_lock *lk) {
  jw_store(&lk->state, 0, JW_RELEASE); /* publishes the owner's bin changes to the next holder */
}

/* The owner takes the most recently freed block of bin i, or NULL (empty,
 * or the reclaimer holds the lock). The block is still poisoned (ASan) and
 * carries FREE_KEY. Never waits. */
static inline jw_block *jw_bc_take(jw_bcache *bc, jw_lock *lk, unsigned i) {
  if (!JW_BC_ENABLED || !jw_bc_lock(lk)) return NULL;
  jw_bc_bin *b = &bc->bin[i];
  jw_block *p = b->top;
  if (JW_LIKELY(p != NULL)) {
    b->top = jw_block_next(p);
    unsigned n = b->n - 1u;
    b->n = (uint8_t)n;
    /* Dipping into the stale entries: the rest of them stay stale. */
    if (b->stale > n) b->stale = (uint8_t)n;
    bc->used[b->grp] -= b->bytes;
  }
  jw_bc_unlock(lk);
  return p;
}

/* Out of line: makes sure the reclaim thread runs (reclaim.h, jw_reclaim_kick). */
void jw_bc_kick(void);

/* Out of line, pool lock held: bin i has room but its group's budget is
 * full (and bin i's block alone fits it). The group's other bins' blocks
 * (held for classes the thread is not freeing now) are moved to
 * out[]/out_bin[] to make room, and p is kept. Returns how many were moved
 * (the caller gives them back after releasing the lock). */
size_t jw_bc_evict_locked(jw_bcache *bc, unsigned i, void *p, void **out, uint8_t *out_bin);
/* Pool lock held: pushes p on bin i, which has room in its cap and budget.
 * Returns 0 (nothing moved out). */
size_t jw_bc_keep_locked(jw_bcache *bc, unsigned i, void *p);
/* Out of line: the put of a block that does not fit its group's budget
 * (jw_bc_put). Group 1's budget first grows by p's size (up to
 * JW_BC_BIG_MAX_BYTES): a thread that frees into a full cache asks for
 * more; then, when p still does not fit, other bins of the group make room.
 * p always fits a budget on its own (every bin's block is at most
 * JW_BC_BIG_MIN_BYTES or JW_BC_MAX_BYTES: test_size_class). Releases the
 * lock with jw_bc_unlock. */
void jw_bc_put_evicting(jw_bcache *bc, jw_lock *lk, unsigned i, void *p);

/* The owner keeps block p (marked free, FREE_KEY set, poisoned; its link
 * word is rewritten) in bin i,
 * and counts it in *count. False when the bin is full (it holds
 * jw_bc_cap[i] blocks) or the reclaimer holds the lock: the caller gives p to the tier below. When the
 * group's budget is full, its other bins make room (jw_bc_evict_locked).
 * Never waits. Every call it makes is its last
 * action, so that callers' hit paths need no stack frame. */
static inline bool jw_bc_put(jw_bcache *bc, jw_lock *lk, unsigned i, void *p, uint64_t *count) {
  if (!JW_BC_ENABLED || !jw_bc_lock(lk)) return false;
  jw_bc_bin *b = &bc->bin[i];
  unsigned n = b->n, g = b->grp;
  uint32_t bytes = bc->used[g] + b->bytes;
  if (JW_UNLIKELY(n >= b->cap)) {
    jw_bc_unlock(lk);
    return false;
  }
  if (JW_UNLIKELY(bytes > bc->limit[g])) {
    ++*count;
    jw_bc_put_evicting(bc, lk, i, p); /* unlocks */
    return true;
  }
  ++*count;
  jw_block_set_next(p, b->top);
  b->top = p;
  b->n = (uint8_t)(n + 1);
  bc->used[g] = bytes;
  if (JW_UNLIKELY(!bc->kicked)) {
    /* Cached memory must age: the first put after an aging pass makes sure
     * the reclaimer runs (a pass that finds blocks cached keeps it running;
     * outside the lock: the kick may start the reclaim thread). */
    bc->kicked = 1;
    jw_bc_unlock(lk);
    jw_bc_kick();
    return true;
  }
  jw_bc_unlock(lk);
  return true;
}

/* Reclaimer (the aging pass, docs/design/reclamation.md section 6), holding
 * the pool lock: moves the stale entries of every bin to out[] (their bins
 * to out_bin[]; room for JW_BC_BINS * JW_BC_SLOTS) and makes every entry
 * left a candidate for the next pass; sets group 1's budget to the bytes
 * still cached in it, the ones put or taken during the interval that ended
 * (at least JW_BC_BIG_MIN_BYTES). Returns how many; *left receives the
 * bytes still cached. */
size_t jw_bc_age_locked(jw_bcache *bc, void **out, uint8_t *out_bin, uint64_t *left);

/* Pool lock held (placement's trim, backend.md 7b): moves the entries whose
 * root lies above the one the backend fills (jw_pages_above_place) to
 * out[]/out_bin[] (room for JW_BC_BINS * JW_BC_SLOTS). Returns how many. */
size_t jw_bc_take_above_locked(jw_bcache *bc, void **out, uint8_t *out_bin);

/* Pool lock held (thread exit, malloc_trim): moves every entry out. */
size_t jw_bc_take_all_locked(jw_bcache *bc, void **out, uint8_t *out_bin);

/* Gives cached blocks back to their tier (aged: as ranges that served their
 * countdown, jw_tier_release_aged; else as plain frees). Their FREE_KEY is
 * cleared from ranges first (a range handed out again by the backend must
 * not look freed). No lock held. */
void jw_bc_give_back(void **blocks, const uint8_t *bins, size_t n, bool aged);

#endif
