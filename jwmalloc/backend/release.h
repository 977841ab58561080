/* The mechanism of reclamation inside the backend: free ranges given back to
 * the OS in batches whose system calls run without the backend lock.
 *
 * Brief: "Lifetime-based reclamation" (release the standby buffer with
 * madvise, move it to the unmapped buffer) and "Non-blocking interface" (no
 * lock held across a system call). Design: docs/design/reclamation.md,
 * section 3. The policy (which ranges, when, by whom) is jwmalloc/reclaim/.
 *
 * A batch (at most JW_RELEASE_BATCH ranges and about JW_RELEASE_BATCH_BYTES)
 * is taken under the lock (ranges leave their lists and become BUSY; whole
 * free roots leave the root map), released without it (madvise per run of
 * adjacent ranges, munmap per root), then filed by whoever next holds the
 * lock (jw_release_file, called from every drain of deferred work). One batch
 * exists at most: callers serialise with the reclaimer token (reclaim/).
 *
 * Sizes are bytes unless named otherwise. Thread-safety: as stated per
 * function; never allocates.
 */
#ifndef JW_BACKEND_RELEASE_H
#define JW_BACKEND_RELEASE_H

#include <stdint.h>

#define JW_RELEASE_BATCH 64u
#define JW_RELEASE_BATCH_BYTES ((uint64_t)32 << 20)

typedef enum jw_release_mode {
  /* A cycle's batch: ranges of every class still in standby, and entirely
   * free roots in the released buffer (their address space and records go
   * back). When none is left, the active and standby buffers swap. */
  JW_RELEASE_DUE,
  /* Past the watermark: standby, then active, largest class first, until the
   * requested bytes are taken. */
  JW_RELEASE_PRESSURE,
} jw_release_mode;

/* Takes the backend lock (wait != 0) or tries to (wait == 0) and drains the
 * deferred work (deferred frees, a released batch to file). Returns 1 when
 * the lock is held. */
int jw_release_lock(int wait);
/* Drains the deferred work and gives the lock back. */
void jw_release_unlock(void);

/* Backend lock held, no batch in flight (the previous one filed). Detaches
 * the next batch for `mode` (PRESSURE: about `bytes` bytes). Returns the
 * number of ranges taken, 0 when there is nothing to take (DUE: the buffers
 * have then been swapped). The batch is then in flight. */
unsigned jw_release_take(jw_release_mode mode, uint64_t bytes);

/* No lock held: gives the in-flight batch's pages back to the OS (one
 * madvise(MADV_DONTNEED) per run of adjacent ranges; whole roots munmapped
 * with their records released) and marks it done, for the next lock holder
 * to file. Only the caller of the jw_release_take that took it. Returns the
 * bytes given back. */
uint64_t jw_release_run(void);

/* Backend lock held: files a done batch (released ranges, zeroed, merged
 * with their free siblings, into the buffer filing.h names; failed
 * ones back into active; roots' record slots made reusable). Cheap when
 * there is none (one relaxed load). */
void jw_release_file(void);

/* Backend lock held: waits until no batch is in flight (its system calls
 * need no lock, so this ends), then files it. For fork and whole-backend
 * checks, which must see no range in transit. */
void jw_release_quiesce(void);

/* Backed free bytes (the active and standby buffers): the cached bytes the
 * watermark bounds. Lock-free, racy. */
uint64_t jw_release_cached_bytes(void);

/* Deferred work is waiting for a lock holder (deferred frees or a batch in
 * flight or not yet filed). Lock-free, racy. */
int jw_release_pending(void);

typedef struct jw_release_stats {
  uint64_t batches;          /* batches released */
  uint64_t ranges, bytes;    /* ranges and bytes given back (roots included) */
  uint64_t madvise_calls;    /* madvise calls made for ranges (runs) */
  uint64_t roots_unmapped;   /* entirely free roots unmapped by reclamation */
  uint64_t failures;         /* madvise calls the kernel refused */
} jw_release_stats;
void jw_release_get_stats(jw_release_stats *out);

#endif
