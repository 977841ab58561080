/* The closed-sibling-tree backend beyond the page-source contract: checks,
 * figures, options, and the primitives the later parts build on.
 *
 * Brief: "Backend", "Metadata", and (shaped for) "Lifetime-based
 * reclamation", "Non-blocking interface". The backend implements
 * page_source.h; this header adds what tests, tools, the API's error messages
 * and the reclaim thread need. Design: docs/design/backend.md.
 *
 * Options (environment, read once at the first backend call):
 *   JWMALLOC_CHECK=1        invariant check of the touched root after every
 *                           backend operation; a violation prints one line
 *                           and aborts (default 0, or 1 when built with
 *                           -DJWMALLOC_CHECK_DEFAULT=ON).
 *   JWMALLOC_RETAIN_ROOTS=N entirely free 4 MiB roots kept mapped for reuse;
 *                           beyond N a root that becomes entirely free goes
 *                           back to the OS at once with its metadata (default 1).
 *                           Only with reclamation off (JWMALLOC_RECLAIM=0): with
 *                           it on, whole free roots age like any range.
 *   JWMALLOC_AHEAD_ROOTS=N  roots the reclaim thread keeps mapped ahead for
 *                           allocations that find the lock held (0-4, default
 *                           2; 0: none; backend.md 7a, "Roots mapped ahead").
 * and the JWMALLOC_RECLAIM* options of reclaim/reclaim.h.
 * Thread-safety: every function may be called from any thread.
 */
#ifndef JW_BACKEND_BACKEND_H
#define JW_BACKEND_BACKEND_H

#include <stddef.h>
#include <stdint.h>

#include "../pages/lookup.h"
#include "../pages/page_source.h"
#include "../pages/record.h"
#include "../pages/root_map.h"

/* jw_pages_free() that reports instead of aborting: 0, or -1 with errno =
 * EINVAL when start is not the first byte of a live range (a pointer into a
 * range's middle, into a free range, a double free, or not ours). When the
 * backend lock is busy the free is deferred (never waits) and still checked. */
int jw_backend_free(void *start);

/* What an address is, for error messages ("free(): pointer into the middle of
 * a 64 KiB range"). Lock-free, like jw_pages_lookup; *info (if not NULL) is
 * filled for every class but NOT_OURS. */
typedef enum jw_ptr_class {
  JW_PTR_NOT_OURS = 0,   /* in no root of this backend */
  JW_PTR_RANGE_START,    /* the first byte of a live range */
  JW_PTR_RESOLVED,       /* inside a live range, resolvable (slab or marked) */
  JW_PTR_INTERIOR,       /* inside a live range, not its start, not resolvable */
  JW_PTR_FREE,           /* inside a free range (or one being freed) */
} jw_ptr_class;
jw_ptr_class jw_backend_classify(const void *p, jw_range_info *info);
const char *jw_backend_ptr_class_name(jw_ptr_class c);

typedef struct jw_backend_stats {
  jw_pages_stats pages;         /* as jw_pages_get_stats */
  uint64_t record_bytes;        /* per-root record arrays in use: 12 B per granule of mapped roots, those mapped ahead too */
  uint64_t root_map_bytes;      /* root map leaves (32 KiB per 16 GiB region in use, kept) */
  uint64_t metadata_arena_bytes;/* address space of the record arena (pages released with roots) */
  uint64_t released_bytes;      /* free ranges with no physical pages (given back with madvise, or
                                   never touched since mapped), still mapped, and the roots mapped ahead */
  uint64_t free_ranges;         /* in all buffers, and the root reserve's roots (section 7c) */
  uint64_t free_roots;          /* entirely free roots kept mapped (lists and root reserve) */
  uint64_t peak_roots, roots_mapped_total, roots_unmapped_total;
  uint64_t allocs, frees, deferred_frees;
  uint64_t merges_after_release; /* merges that joined memory already given back (madvise) */
  uint64_t allocs_refault;       /* allocations of ranges whose pages were given back: they fault in again */
  uint64_t refault_bytes;        /* the bytes of those allocations */
  /* Part 4 (docs/design/backend.md, section 7a). */
  uint64_t fast_bytes;           /* free ranges in the per-class bitmaps (counted in pages.cached_bytes) */
  uint64_t fast_allocs, fast_frees; /* served by a bitmap, no lock */
  uint64_t lf_splits;            /* lock held: a larger bitmap range subdivided without it */
  uint64_t lf_recycled;          /* lock held, bitmaps empty: a deferred range reused without the lock */
  uint64_t lf_roots;             /* lock held, nothing to reuse: a root mapped without the lock */
  /* The root reserve (section 7c). */
  uint64_t roots_reserved;       /* entirely free roots a free put into the reserve */
  uint64_t roots_reused;         /* allocations that took a reserved root instead of mapping one */
  /* Roots mapped ahead (section 7a, "Roots mapped ahead"; ahead.h). */
  uint64_t ahead_bytes;          /* roots held ready now, 4 MiB each (untouched: in released_bytes) */
  uint64_t ahead_filled, ahead_taken, ahead_returned; /* mapped ahead; taken by step 5; given back unused */
} jw_backend_stats;
void jw_backend_get_stats(jw_backend_stats *out);

/* Bytes in live ranges now (a relaxed load: a figure). Any thread; for the
 * watermark's adaptation (docs/design/reclamation.md 4a). */
uint64_t jw_backend_live_bytes(void);

/* The same figures at a quiet point, consistent with each other: under the
 * backend lock, deferred frees done, no release batch in flight (waits for
 * one to finish its system calls), and no lock-free operation in flight (the
 * checker's flag raised meanwhile: a root being mapped ahead is either ready
 * or not begun). For checks and reports. */
void jw_backend_get_stats_quiet(jw_backend_stats *out);

/* The trough detector's peak (docs/design/reclamation.md 6a): the highest
 * live bytes seen when a root was mapped since the last reset; `reset`
 * starts it again from the live bytes now. Any thread (the detector, under
 * the reclaimer token); relaxed figures. */
uint64_t jw_backend_peak_live(int reset);

/* Invariant checks on (1) or off (0) from now on (overrides JWMALLOC_CHECK). */
void jw_backend_set_check(int on);

/* Whole-backend check under the lock: every root's tree (jw_tree_check),
 * every free list against the records (membership, links, counts, buffer
 * states), and the figures against both. Returns 0, or -1 with one line in err. */
int jw_backend_check_all(char *err, size_t cap);

/* Sets the retained entirely-free roots (JWMALLOC_RETAIN_ROOTS) from now on. */
void jw_backend_set_retain_roots(unsigned n);

/* One reclamation cycle now, synchronously (jw_reclaim_cycle, the cycle the
 * reclaim thread runs at every interval): every range still in the standby
 * buffer of every class has its pages given back (madvise; an entirely free
 * root is unmapped with its metadata instead) and moves to the released
 * buffer; then active and standby swap. A range filed in active before cycle
 * k and neither reused nor merged is released by cycle k+1. Waits for the
 * backend lock and for another reclaimer to finish. Returns bytes released. */
uint64_t jw_backend_reclaim_step(void);

/* Reclamation mode, set by reclaim/ from its options: age_roots != 0 lets
 * entirely free roots age through the buffers (unmapped when released)
 * instead of going back at once beyond JWMALLOC_RETAIN_ROOTS; policy is a
 * jw_filing_policy (filing.h). Thread-safe. */
void jw_backend_set_reclaim_mode(int age_roots, unsigned policy);

/* Test hooks (tests/backend): hold the backend lock as a frozen holder would
 * (the unlock is every holder's: it drains, releases and looks again). */
void jw_backend_test_lock(void);
void jw_backend_test_unlock(void);

/* The backend's test points (JW_TP_BE_*: the deferred hand-over, the
 * checker's flag) are common/test_hooks.h's. */

#endif
