/* Page source: the interface between the tiers that carve memory (frontend
 * slabs, midend slabs, 16 KiB-4 MiB ranges) and the backend that owns it.
 *
 * Brief: "Tiers", "Backend: size-class-exact ranges", "Metadata".
 *
 * Units: a granule is one page (JW_GRANULE: jw_page.size, 4, 16 or 64 KiB,
 * docs/design/architecture.md "Page size at run time"). A root is a 4 MiB,
 * 4 MiB-aligned span reserved from the OS (JW_ROOT); every range lies inside
 * one root, so the largest range is one whole root (JW_ROOT_GRANULES: 1024,
 * 256 or 64 granules; storage indexed by granule is sized for the most,
 * JW_ROOT_GRANULES_MAX).
 *
 * The backend (backend/, brief "Backend") implements it; the folder pages/ is
 * the layer between the tiers and the backend (docs/design/architecture.md,
 * "Layers"): this header, and what the tiers' free path reads without calling
 * the backend, the record encoding (record.h), the root map (root_map.h) and
 * the inline lookup (lookup.h); the tiers take and give back ranges through
 * tier_pages.h.
 *
 * Thread-safety: every function here may be called from any thread at any
 * time, including before main and from a forked child. The implementation
 * must never call malloc, stdio or pthread functions that allocate.
 */
#ifndef JW_PAGES_PAGE_SOURCE_H
#define JW_PAGES_PAGE_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/atomic.h"
#include "../common/page.h"

/* Run-time values (one read-mostly global, page.h): never in a fast path. */
#define JW_GRANULE_SHIFT (jw_page.shift)
#define JW_GRANULE (jw_page.size)                     /* 4, 16 or 64 KiB */
#define JW_GRANULE_MIN_SHIFT 12                       /* the smallest page */
#define JW_ROOT_SHIFT 22
#define JW_ROOT ((size_t)1 << JW_ROOT_SHIFT)         /* 4 MiB */

/* Placement's order of roots (backend.md 7b): the oldest first. Roots are
 * mapped top-down from one random start (os/os_mem.c), so a root mapped
 * later lies lower, also where the roots cross into the 16 GiB region below:
 * the rank inverts the whole root number. (Inverting only the index within
 * the region ranked the first root of a lower region oldest of all: the tiers
 * then filled the newest root first, against the backend's order.) Used by
 * every tier that compares roots by address. */
static inline uintptr_t jw_root_rank(const void *p) { return ~((uintptr_t)p >> JW_ROOT_SHIFT); }
/* A root's index bits in its 16 GiB region, as a range id holds them: the
 * backend's rank of a range id (backend/bins.h) inverts these and keeps its
 * regions in order of first use, which is the same order as jw_root_rank's. */
#define JW_ROOT_RANK_FLIP 0xfffu
#define JW_ROOT_GRANULES ((uint32_t)(JW_ROOT >> JW_GRANULE_SHIFT)) /* 1024, 256 or 64 */
#define JW_ROOT_GRANULES_MAX ((uint32_t)(JW_ROOT >> JW_GRANULE_MIN_SHIFT)) /* 1024: at 4 KiB */

/* What a live range is used for; recorded by the backend, read back by
 * jw_pages_lookup() so free() can dispatch on any pointer. */
typedef enum jw_range_kind {
  JW_KIND_NONE = 0,       /* not a live range (free, or not ours) */
  JW_KIND_SMALL_SLAB = 1, /* frontend slab: exactly one granule */
  JW_KIND_MID_SLAB = 2,   /* midend slab */
  JW_KIND_LARGE = 3,      /* one 16 KiB-4 MiB allocation */
} jw_range_kind;

typedef struct jw_range_info {
  void *start;          /* first byte of the range, granule aligned */
  uint32_t granules;    /* size of the range (a range size class) */
  jw_range_kind kind;
} jw_range_info;

/* Allocates a range of at least `granules` granules (1..JW_ROOT_GRANULES),
 * rounded up to the backend's range size class, tagged with `kind` (not
 * JW_KIND_NONE). Returns its start (granule aligned), or NULL with errno =
 * ENOMEM when the OS refuses memory or the request is out of bounds.
 * *out_granules (if not NULL) receives the class size actually reserved;
 * *out_zeroed (if not NULL) is set true when every byte is known to be zero.
 * Thread-safe. */
void *jw_pages_alloc(size_t granules, jw_range_kind kind, uint32_t *out_granules,
                     bool *out_zeroed);

/* Returns a range to the backend. `start` must be exactly a start returned by
 * jw_pages_alloc and still live; anything else is a caller bug (callers check
 * with jw_pages_lookup first). Thread-safe. */
void jw_pages_free(void *start);

/* As jw_pages_free, for a range that a tier kept idle in its own cache for a
 * reclaim interval before giving it back (docs/design/reclamation.md, section
 * 6): it enters the backend with its countdown served (a standby piece), so
 * the reclaim cycle that aged it releases it unless it merges with a range
 * freed meanwhile. Never waits (deferred when the backend lock is busy).
 * Thread-safe. */
void jw_pages_free_aged(void *start);

/* Resolves an address to the live range that holds it, without locks and
 * without faulting on foreign addresses. Guaranteed to resolve:
 *   - any address in the first granule of a live range;
 *   - any address anywhere in a live range of kind SMALL_SLAB or MID_SLAB;
 *   - any address in a granule registered by jw_pages_mark_interior().
 * Returns false (info untouched) for addresses jwmalloc does not own, for free
 * ranges, and for other interior addresses of LARGE ranges.
 * Thread-safe; cost is a few dependent loads (free() calls it every time). */
bool jw_pages_lookup(const void *p, jw_range_info *info);

/* Makes jw_pages_lookup() resolve the granule holding `p` (inside the live
 * LARGE range at `start`) to that range: used for over-aligned allocations,
 * whose returned pointer is not the range start. Thread-safe for distinct
 * ranges. */
void jw_pages_mark_interior(void *start, const void *p);

/* Placement (docs/design/backend.md, section 7b; JWMALLOC_PLACEMENT=1):
 * true when p (in a mapped root) lies in a root above the one the backend
 * now fills, so a tier that holds free memory there (a pooled page, an empty
 * slab) should give it back rather than reuse it, letting that root empty.
 * Always false with placement off. Thread-safe, lock-free: a hint read
 * racily (a stale answer keeps or gives back one page too many). */
bool jw_pages_above_place(const void *p);

/* Placement on demand (backend.md 7b, "Placement on demand"). The word:
 * bit 0 = placement on now; the bits above, an epoch raised at every switch
 * and every trim request. Read by every tier with a relaxed load (a setting:
 * each reader acts on the value it saw; every queue keeps its own mode until
 * its guard converts it, root_queue.h). Written only through the calls
 * below. */
extern jw_atomic_u32 jw_place_word;
static inline bool jw_place_on(void) { return (jw_load(&jw_place_word, JW_RELAXED) & 1u) != 0; /* a setting */ }

/* Modes (JWMALLOC_PLACEMENT=0|1|auto; jw_option_set("PLACEMENT", 0|1|2)). */
enum { JW_PLACE_OFF = 0, JW_PLACE_ON = 1, JW_PLACE_AUTO = 2, JW_PLACE_UNSET = 0xff };

/* Sets the mode from now on (0 and 1 switch at once; auto leaves the state
 * to the reclaimer's trough detector, reclamation.md section 6a). Any
 * thread; never waits. Returns 0, or -1 with errno = EINVAL (bad mode). */
int jw_pages_set_place_mode(unsigned mode);
unsigned jw_pages_place_mode(void);

/* Switches placement on or off now, raising the epoch (any thread, never
 * waits; the reclaimer's detector and jw_pages_set_place_mode). Switching on
 * files the bitmaps' ranges into the lists and sets the root the backend
 * fills (when the backend lock is free: a try-lock). */
void jw_pages_place_switch(bool on);

/* After a switch by the reclaimer's detector (which read mode auto before
 * it): when the mode was set to 0 or 1 meanwhile, the switch in force is
 * brought back in line with it (a concurrent jw_pages_set_place_mode may
 * have looked before the detector switched). Any thread; never waits. */
void jw_pages_place_sync(void);

/* Whether the backend's invariant checks are on (JWMALLOC_CHECK=1): the
 * tiers check their queues when they convert them. A relaxed read. */
bool jw_pages_checking(void);

/* Raises the epoch without a switch: every thread trims what pins high roots
 * at its next slow refill (backend.md 7b, "trim epoch"). Any thread. */
void jw_pages_place_trim(void);

/* Backend figures, in bytes unless named otherwise. Read racily (a snapshot
 * that may be slightly inconsistent across fields). */
typedef struct jw_pages_stats {
  uint64_t mapped_bytes;    /* root spans currently reserved from the OS */
  uint64_t peak_mapped_bytes;
  uint64_t metadata_bytes;  /* backend metadata currently mapped */
  uint64_t peak_metadata_bytes;
  uint64_t live_bytes;      /* granules in live ranges x 4 KiB */
  uint64_t cached_bytes;    /* free ranges still backed by memory */
  uint64_t roots;           /* roots currently reserved */
  uint64_t splits, merges;  /* backend range subdivisions and coalescings */
} jw_pages_stats;
void jw_pages_get_stats(jw_pages_stats *out);

/* fork() support: prepare takes whatever the backend must hold so the child
 * sees consistent state; parent/child release or reinitialize it. */
void jw_pages_atfork_prepare(void);
void jw_pages_atfork_parent(void);
void jw_pages_atfork_child(void);

#endif
