/* The midend: process-wide slabs for 2017-16384 bytes (and small requests of
 * threads without a thread cache).
 *
 * Brief: "Tiers" (2-16 KiB: process-wide, slab-style), "Non-blocking
 * interface". Design, class table and slab sizes: docs/design/midend.md.
 * A midend slab is a page-source range of kind MID_SLAB; this header sits at
 * its start, blocks of one class follow from offset 64 (64-byte aligned).
 *
 * Thread-safe; no call waits for a lock holder (try-lock, deferred list,
 * fallback). Never allocates through malloc.
 */
#ifndef JW_MIDEND_MIDEND_H
#define JW_MIDEND_MIDEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../pages/page_source.h"
#include "../common/asan.h"
#include "../common/atomic.h"
#include "../pages/root_queue.h"

#define JW_MID_NCLASSES 13
/* Shards per class, a power of two (docs/design/midend.md, "Shards"). */
#define JW_MID_SHARDS 4
#define JW_MID_HEADER 64u
/* Slab waste (header + tail) cap: 1/16 of the slab. */
#define JW_MID_WASTE_DIV 16

extern const uint16_t jw_mid_class_size[JW_MID_NCLASSES];
/* A class's slab in 4 KiB units (its bytes: the same at every page size). */
extern const uint8_t jw_mid_class_granules[JW_MID_NCLASSES];

/* The class's slab in pages (granules) of the page in force: its bytes
 * rounded up to a whole page (docs/design/architecture.md, "Page size at run
 * time": at 64 KiB the 16 and 32 KiB slabs become one page). */
static inline uint32_t jw_mid_class_pages(unsigned mc) {
  size_t bytes = (size_t)jw_mid_class_granules[mc] << JW_GRANULE_MIN_SHIFT;
  return (uint32_t)((bytes + JW_GRANULE - 1) >> JW_GRANULE_SHIFT);
}

/* Class for n <= 16384 (every n <= 2048 maps to class 0). */
static inline unsigned jw_mid_class_of(size_t n) {
  extern const uint8_t jw_mid_class_of_table[32];
  return n <= 512 ? 0 : jw_mid_class_of_table[(n - 1) >> 9];
}

static inline unsigned jw_mid_class_blocks(unsigned mc) {
  return (unsigned)((((size_t)jw_mid_class_pages(mc) << JW_GRANULE_SHIFT) - JW_MID_HEADER) / jw_mid_class_size[mc]);
}

typedef struct jw_mid_slab {
  jw_atomic_u64 zero;            /* always 0: no thread's slab tag */
  jw_block *free;                /* class lock: freed blocks */
  jw_rq_node node;                /* class lock: partial list (root_queue.h; midend.md "Placement") */
  jw_atomic_u32 bump;            /* blocks [bump, capacity) never handed out; written under the class lock */
  uint32_t nfree;                /* class lock: free blocks (list + never used) */
  uint32_t capacity;
  uint32_t granules; /* the range as the page source gave it (it may round up) */
  uint8_t cls;
  uint8_t on_partial; /* class lock */
  uint8_t shard;      /* the class shard whose lock guards it (midend.md "Shards") */
} jw_mid_slab;

_Static_assert(sizeof(jw_mid_slab) <= JW_MID_HEADER, "midend slab header fits its 64 bytes");

/* One block of class mc, or NULL: *fallback is set when every shard's lock
 * of the class was busy and no cached block was found (the caller serves the request
 * as a page range); otherwise NULL means ENOMEM (errno set). The block is
 * still poisoned (ASan) and carries a stale key. */
jw_block *jw_mid_alloc(unsigned mc, bool *fallback);

/* jw_mid_alloc(0, fallback) for a small request of a thread without a thread
 * cache (being set up, exiting, or refused one): from the first shard, not
 * the thread's home (midend.md "Shards"), so that the few such blocks of
 * every thread share slabs rather than take one per shard. */
jw_block *jw_mid_alloc_uncached(bool *fallback);

/* ceil(65536 / (size / 512)) per class: block sizes are multiples of 512,
 * so a block index is found by a multiplication (jw_mid_is_block). */
extern const uint16_t jw_mid_recip[JW_MID_NCLASSES];

/* True when p is a handed-out-able block start of midend slab s (a live
 * MID_SLAB range that holds p): inside its blocks, on a block boundary,
 * below the bump index. Inline: the free path validates every midend block
 * with it. Without a division: an offset q (in 512-byte units, q < 512 in a
 * slab of at most 256 KiB) is a multiple of m = size / 512 <= 32 exactly when
 * i = (q * ceil(2^16 / m)) >> 16 satisfies i * m == q (the rounding error
 * stays below 1 / 128, less than the gap 1 / m to the next integer;
 * test_size_class checks every q). */
static inline bool jw_mid_block_at(jw_mid_slab *s, const void *p) {
  unsigned cls = s->cls;
  uintptr_t off = (uintptr_t)p - ((uintptr_t)s + JW_MID_HEADER); /* wraps (huge) in the header */
  if (((off & 511) | (off >> 18)) != 0 || cls >= JW_MID_NCLASSES) return false;
  uint32_t q = (uint32_t)(off >> 9);
  uint32_t i = (q * jw_mid_recip[cls]) >> 16;
  /* Relaxed: a stale bump only makes the check stricter for a block being
   * handed out right now, which no valid free can name. */
  return i * (jw_mid_class_size[cls] >> 9) == q && i < jw_load(&s->bump, JW_RELAXED);
}

/* The same for any pointer the MID_SLAB range `info` resolves, checking that
 * its header describes that range. */
static inline bool jw_mid_is_block(const jw_range_info *info, const void *p) {
  jw_mid_slab *s = info->start; /* not const: the verifier's atomic loads take no const */
  return s->cls < JW_MID_NCLASSES && info->granules == s->granules && jw_mid_block_at(s, p);
}

/* Frees block p of midend slab s (validated, marked free with FREE_KEY). */
void jw_mid_free(jw_mid_slab *s, jw_block *p);

/* Takes back block b (marked free, FREE_KEY set) that a thread cache held
 * (docs/design/midend.md, "Thread caches in front of the midend"): as a free
 * that the statistics already counted; `aged` (it stayed unused for a reclaim
 * interval, the reclaimer's aging pass): straight into its slab, and a slab
 * left empty back to the page source as an aged range. Never waits. */
void jw_mid_give_back(jw_block *b, bool aged);

/* Usable bytes of a midend block of range info. */
size_t jw_mid_usable(const jw_range_info *info);

/* Gives cached blocks back to their slabs and empty slabs to the page
 * source (classes whose lock is free); true when pages were given back. */
bool jw_mid_trim(void);

/* True when no freed block waits on a class's deferred list (the hand-over
 * of docs/design/midend.md: every push is drained by a lock holder's or the
 * pusher's look, none waits for the next taker of the lock). For checks:
 * a snapshot, any thread. */
bool jw_mid_deferred_empty(void);

/* Reclaimer (the aging pass, docs/design/reclamation.md section 6): each
 * class without a malloc or free since the previous pass gives its cached
 * blocks back to their slabs and its empty slabs and spare back to the page
 * source as aged ranges; class locks are only tried. Returns about the bytes
 * the midend still caches (non-zero while a class could age). */
uint64_t jw_mid_age(void);

/* fork: take every class lock / release them / reset them in the child. */
void jw_mid_atfork_prepare(void);
void jw_mid_atfork_parent(void);
void jw_mid_atfork_child(void);

typedef struct jw_mid_totals {
  uint64_t mallocs, frees, fallbacks;
  uint64_t slabs_aged; /* slabs the reclaimer's aging passes gave back */
} jw_mid_totals;
void jw_mid_totals_get(jw_mid_totals *out);

#endif
