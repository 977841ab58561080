/* See release.h. The batch is shared by its reclaimer (take, run) and the
 * lock holder that files it; the hand-over is the batch state: RELEASING
 * (set under the lock by the take), DONE (release store by the reclaimer
 * after its system calls), IDLE (set under the lock by the filing). Entries
 * are written by the take and the run and read by the filing: relaxed, the
 * state's release/acquire (or the lock) orders them. */
#include "release.h"

#include "../common/backoff.h"
#include "../os/os_mem.h"
#include "filing.h"
#include "backend_internal.h"
#include "fast.h"
#include "meta.h"
#include "../pages/root_map.h"
#include "roots.h"

enum { B_IDLE = 0, B_RELEASING = 1, B_DONE = 2 };

/* Entry flags: class index in the low 6 bits. */
#define E_ROOT 0x100u /* an entirely free root, to unmap */
#define E_OK 0x200u   /* its pages were given back */

typedef struct entry {
  jw_atomic_u32 rid;
  jw_atomic_u32 flags;
  jw_atomic_ptr recs; /* a root's record array */
} entry;

static struct {
  entry e[JW_RELEASE_BATCH];
  jw_atomic_u32 n, state;
} batch;

static jw_atomic_u64 n_batches, n_ranges, n_bytes, n_madvise, n_roots, n_failures;

int jw_release_lock(int wait) {
  jw_backend_init_once();
  if (wait)
    jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  else if (!jw_lock_try(&jw_be.lock, JW_LK_BACKEND))
    return 0;
  jw_backend_drain_deferred();
  /* The bitmaps' ranges age too: filed in the lists, they merge and count
   * down like any free range (docs/design/backend.md, section 7a). */
  jw_backend_flush_fast();
  return 1;
}

void jw_release_unlock(void) { jw_backend_unlock(); }

static inline uintptr_t rid_addr(jw_rid r) {
  return jw_meta_rid_base(r) + ((uintptr_t)jw_meta_rid_granule(r) << JW_GRANULE_SHIFT);
}

/* Detaches free range r (class c) from its list into the batch. */
static uint64_t detach(jw_rid r, unsigned c, unsigned i) {
  jw_bins_remove(&jw_be.bins, r, c);
  entry *e = &batch.e[i];
  jw_store(&e->rid, r, JW_RELAXED);
  if (c == JW_ROOT_CLASS) {
    /* The root leaves the root map now (lookups of stale pointers stop
     * resolving); its memory and records go back in the run. */
    uintptr_t base = jw_meta_rid_base(r);
    jw_rec *recs = jw_root_map_get((const void *)base);
    jw_store(&e->recs, recs, JW_RELAXED);
    jw_roots_forget(base, recs);
    jw_store(&e->flags, c | E_ROOT, JW_RELAXED);
  } else {
    /* BUSY: not allocatable, not mergeable, not a valid free. */
    jw_rec_update(jw_bins_rec(r), JW_REC_STATE_MASK, JW_RS_BUSY);
    jw_store(&e->flags, c, JW_RELAXED);
  }
  return (uint64_t)jw_class_granules[c] * JW_GRANULE;
}

unsigned jw_release_take(jw_release_mode mode, uint64_t bytes) {
  jw_bins *b = &jw_be.bins;
  unsigned active = jw_bins_active(b), standby = active ^ 1u, n = 0;
  uint64_t taken = 0, limit = mode == JW_RELEASE_DUE ? JW_RELEASE_BATCH_BYTES
                                                      : (bytes < JW_RELEASE_BATCH_BYTES ? bytes : JW_RELEASE_BATCH_BYTES);
  jw_rid r;
  if (mode == JW_RELEASE_DUE) {
    /* Whole roots whose pages are already back: their address space and
     * records are what is left to return. */
    while (n < JW_RELEASE_BATCH && taken < limit && (r = jw_bins_first(b, JW_ROOT_CLASS, JW_BUF_RELEASED)) != 0)
      taken += detach(r, JW_ROOT_CLASS, n++);
  }
  /* Largest classes first: the fewest system calls per byte. */
  const unsigned bufs[2] = {standby, active};
  unsigned nbufs = mode == JW_RELEASE_DUE ? 1 : 2;
  for (unsigned k = 0; k < nbufs; k++)
    for (int c = JW_NCLASSES - 1; c >= 0; c--)
      while (n < JW_RELEASE_BATCH && taken < limit && (r = jw_bins_first(b, (unsigned)c, bufs[k])) != 0)
        taken += detach(r, (unsigned)c, n++);
  if (n == 0) {
    if (mode == JW_RELEASE_DUE) jw_bins_flip(b); /* standby is empty: it becomes active */
    return 0;
  }
  jw_store(&batch.n, n, JW_RELAXED);
  /* Relaxed: read under the lock (fork prepare, filing) or by this thread. */
  jw_store(&batch.state, B_RELEASING, JW_RELAXED);
  return n;
}

/* Address order of the batch's ranges, so adjacent ones share a call. */
typedef struct span {
  uintptr_t a;
  uint64_t len;
  unsigned i;
} span;

uint64_t jw_release_run(void) {
  unsigned n = jw_load(&batch.n, JW_RELAXED);
  span v[JW_RELEASE_BATCH];
  unsigned m = 0;
  uint64_t released = 0;
  for (unsigned i = 0; i < n; i++) {
    entry *e = &batch.e[i];
    uint32_t f = jw_load(&e->flags, JW_RELAXED);
    jw_rid r = jw_load(&e->rid, JW_RELAXED);
    if (f & E_ROOT) {
      jw_os_unmap((void *)jw_meta_rid_base(r), JW_ROOT);
      jw_meta_slot_release(jw_load(&e->recs, JW_RELAXED));
      jw_store(&e->flags, f | E_OK, JW_RELAXED);
      bump(&n_roots, 1);
      released += JW_ROOT;
      continue;
    }
    span s = {rid_addr(r), (uint64_t)jw_class_granules[f & 0x3fu] * JW_GRANULE, i};
    unsigned k = m++;
    while (k > 0 && v[k - 1].a > s.a) { /* insertion sort: at most 64 */
      v[k] = v[k - 1];
      k--;
    }
    v[k] = s;
  }
  for (unsigned i = 0; i < m;) {
    unsigned j = i + 1;
    uint64_t len = v[i].len;
    while (j < m && v[j].a == v[i].a + len) len += v[j++].len;
    bump(&n_madvise, 1);
    int ok = jw_os_release((void *)v[i].a, (size_t)len) == 0;
    if (ok)
      released += len;
    else
      bump(&n_failures, 1);
    for (unsigned k = i; k < j; k++)
      if (ok) jw_fetch_or(&batch.e[v[k].i].flags, E_OK, JW_RELAXED); /* published by the DONE store */
    i = j;
  }
  bump(&n_batches, 1);
  bump(&n_ranges, n);
  bump(&n_bytes, released);
  /* Release: the filing lock holder's acquire sees the entries and flags. */
  jw_store(&batch.state, B_DONE, JW_RELEASE);
  return released;
}

void jw_release_file(void) {
  /* Relaxed peek (the common case: nothing to file costs one load); the
   * acquire below pairs with the run's release. */
  if (jw_load(&batch.state, JW_RELAXED) != B_DONE || jw_load(&batch.state, JW_ACQUIRE) != B_DONE) return;
  unsigned n = jw_load(&batch.n, JW_RELAXED);
  for (unsigned i = 0; i < n; i++) {
    entry *e = &batch.e[i];
    uint32_t f = jw_load(&e->flags, JW_RELAXED);
    jw_rid r = jw_load(&e->rid, JW_RELAXED);
    if (f & E_ROOT) {
      jw_meta_slot_put(jw_load(&e->recs, JW_RELAXED));
      continue;
    }
    uintptr_t base = jw_meta_rid_base(r);
    jw_rec *recs = jw_root_map_get((const void *)base);
    uint32_t g = jw_meta_rid_granule(r);
    /* Released pages read as zero. A range the kernel refused to release
     * is still backed: it waits in active for a later cycle. */
    if (f & E_OK) jw_rec_update(&recs[g], JW_REC_FREE_FLAGS, JW_REC_FREE_FLAGS);
    jw_backend_put_free(base, recs, g, jw_class_granules[f & 0x3fu], (f & E_OK) ? JW_PIECE_RELEASED : JW_PIECE_ACTIVE);
  }
  jw_store(&batch.n, 0, JW_RELAXED);
  jw_store(&batch.state, B_IDLE, JW_RELAXED); /* under the lock */
}

void jw_release_quiesce(void) {
  /* Acquire pairs with the run's release store of DONE. The reclaimer is in
   * its system calls, or descheduled: spin, yield, then short sleeps. */
  jw_backoff b = JW_BACKOFF_INIT;
  while (jw_load(&batch.state, JW_ACQUIRE) == B_RELEASING) jw_backoff_pause(&b);
  jw_release_file();
}

uint64_t jw_release_cached_bytes(void) {
  jw_bins *b = &jw_be.bins;
  /* Relaxed: a figure, read racily. */
  return (jw_load(&b->granules[0], JW_RELAXED) + jw_load(&b->granules[1], JW_RELAXED) + jw_fast_granules()) *
         JW_GRANULE;
}

int jw_release_pending(void) {
  /* Relaxed: a hint for the reclaim thread's idle test (thread.c fences). */
  return jw_load(&jw_be.deferred, JW_RELAXED) != 0 || jw_load(&batch.state, JW_RELAXED) != B_IDLE;
}

void jw_release_get_stats(jw_release_stats *o) {
  o->batches = jw_load(&n_batches, JW_RELAXED);
  o->ranges = jw_load(&n_ranges, JW_RELAXED);
  o->bytes = jw_load(&n_bytes, JW_RELAXED);
  o->madvise_calls = jw_load(&n_madvise, JW_RELAXED);
  o->roots_unmapped = jw_load(&n_roots, JW_RELAXED);
  o->failures = jw_load(&n_failures, JW_RELAXED);
}
