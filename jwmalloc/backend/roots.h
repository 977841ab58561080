/* Root ranges: 4 MiB spans reserved from the OS, each with its records.
 *
 * Brief: "Backend" (root ranges) and "Metadata" (a root's metadata goes back
 * with it). Policy for when an entirely free root goes back: free.c (jw_backend_put_free) and
 * docs/design/backend.md, "Roots".
 *
 * Thread-safety: jw_roots_map is lock-free (an allocation that finds the
 * backend lock held maps a root without it, docs/design/backend.md section
 * 7a; the new root is private until published); the rest need the backend
 * lock. Lock-free readers find a root through the root map (root_map.h),
 * published last on map and cleared first on unmap.
 */
#ifndef JW_BACKEND_ROOTS_H
#define JW_BACKEND_ROOTS_H

#include <stdint.h>

#include "../pages/record.h"

/* Maps a fresh root (JW_ROOT bytes, JW_ROOT aligned, zero) and its records,
 * initializes its tree as one free leaf in head state `state` (zeroed), then
 * publishes it in the root map. Returns the base, or 0 with errno = ENOMEM. */
uintptr_t jw_roots_map(unsigned state, jw_rec **recs);

/* jw_roots_map in two steps, for roots mapped ahead of need (ahead.h):
 * prepare does everything but publishing (the memory, the region's id, the
 * root-map leaf, the records: every system call), publish makes the root
 * visible (one release store, the counters; no system call, cannot fail).
 * A prepared root that is never published goes back with jw_roots_discard.
 * Lock-free, like jw_roots_map. */
uintptr_t jw_roots_prepare(unsigned state, jw_rec **recs);
void jw_roots_publish(uintptr_t base, jw_rec *recs);
void jw_roots_discard(uintptr_t base, jw_rec *recs);

/* Forgets the root at base (root map entry first), unmaps its memory and
 * gives its record array back (meta.h). */
void jw_roots_unmap(uintptr_t base, jw_rec *recs);

/* The first step of jw_roots_unmap alone, for a release that unmaps without
 * the backend lock (release.h): the root leaves the root map (no lookup
 * resolves into it any more) and the figures (roots, record bytes); its
 * memory and records are still there for the caller to give back
 * (jw_os_unmap, jw_meta_slot_release, then jw_meta_slot_put under the lock). */
void jw_roots_forget(uintptr_t base, jw_rec *recs);

typedef struct jw_roots_stats {
  uint64_t roots, peak_roots; /* currently mapped, most ever at once */
  uint64_t mapped_total, unmapped_total;
} jw_roots_stats;
void jw_roots_get_stats(jw_roots_stats *out);

#endif
