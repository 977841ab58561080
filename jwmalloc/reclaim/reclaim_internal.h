/* State shared by the files of reclaim/ (options, cycle, watermark, thread). */
#ifndef JW_RECLAIM_INTERNAL_H
#define JW_RECLAIM_INTERNAL_H

#include "../backend/release.h"
#include "../common/atomic.h"
#include "../common/lock.h"
#include "reclaim.h"

/* Wake word values (jw_rc.wake): an early cycle (the watermark), a check
 * whether the reclaim thread is the last thread (jw_reclaim_last_thread_hint),
 * roots to map ahead (jw_reclaim_wake_ahead; no cycle), or a grace started
 * (sleep until it ends: jw_rc.over_since_ns). */
enum { JW_WAKE_NONE = 0, JW_WAKE_CYCLE = 1, JW_WAKE_LAST_THREAD = 2, JW_WAKE_AHEAD = 4, JW_WAKE_GRACE = 8 };

/* Reclaim thread states. */
enum { JW_THREAD_NONE = 0, JW_THREAD_RUNNING = 1, JW_THREAD_FAILED = 2 };

typedef struct jw_reclaim_state {
  /* Configuration: set once at initialization (or by tests), read racily:
   * every field is an independent setting (relaxed). */
  jw_atomic_u32 inited, enabled, interval_ms, policy, thread_on, grace_ms;
  jw_atomic_u64 watermark;     /* JWMALLOC_RECLAIM_WATERMARK: the floor of the effective one */
  jw_atomic_u64 watermark_max; /* JWMALLOC_RECLAIM_WATERMARK_MAX: its ceiling (0: the watermark, fixed) */
  /* The watermark in force (reclamation.md 4a), between the two above. */
  jw_atomic_u64 wm_now;
  /* The last synchronous release (written under the reclaimer token, read
   * racily as a heuristic): when, the bytes it gave back, and the backend's
   * figures then: bytes re-obtained from the OS (roots mapped, in bytes, plus
   * refaulted bytes) and live bytes. */
  jw_atomic_u64 sync_ns, sync_bytes, sync_reobtained, sync_live;
  jw_atomic_u64 raise_live; /* live bytes at the last raise: the level the raise was for */
  /* When the cached bytes were first seen above the watermark in the grace
   * now running (section 4, "The grace"); 0: none running. Set by one CAS
   * from 0, cleared by whoever releases or finds them back below. */
  jw_atomic_u64 over_since_ns;
  jw_lock token;              /* the reclaimer token: one batch sequence at a time */
  jw_atomic_u32 thread_state; /* JW_THREAD_* */
  jw_atomic_u32 wake;         /* futex word: 1 = wake the thread early */
  jw_atomic_u64 last_cycle_ns;/* no-thread mode: when the last due cycle ran */
  jw_atomic_u32 hold;         /* test hook (futex word) */
  jw_atomic_ptr tier_hook;    /* jw_reclaim_tier_fn, or NULL */
  jw_atomic_ptr start_guard;  /* jw_reclaim_start_guard_fn, or NULL */
  jw_atomic_ptr create_scope; /* jw_reclaim_create_scope_fn, or NULL */
  jw_lock aging;              /* the aging lock: held by the reclaimer during a tier pass, by fork */
  jw_atomic_u64 tier_held;    /* bytes the tiers' caches held after the last pass */
  jw_atomic_u32 tier_dirty;   /* a tier put pages in its cache since the last pass (jw_reclaim_kick) */
  /* Placement's trough detector (placement.c, reclamation.md 6a): the
   * highest live figure since placement last went off, the runs in a row
   * that saw a trough (off: that saw it over; on: full cycles), pinned bytes
   * at the switch on. Touched only under the reclaimer token. */
  jw_atomic_u64 place_peak, place_on_pinned;
  jw_atomic_u32 place_runs;
  /* The contention guard: roots mapped without the lock and roots mapped in
   * all at the last full cycle, and the full cycles left before placement
   * may switch on again. */
  jw_atomic_u64 place_lf_roots, place_mapped_roots;
  jw_atomic_u32 place_cooldown;
  /* The stall bound: the lowest pinned figure since the switch on, and the
   * full cycles since it last fell by a root. */
  jw_atomic_u64 place_low;
  jw_atomic_u32 place_stall;
  /* Statistics: relaxed counters. */
  jw_atomic_u64 cycles, early_wakes, sync_releases, grace_waits, grace_releases, grace_reused, inline_cycles, held;
  jw_atomic_u64 thread_starts, thread_exits, thread_start_failures;
  jw_atomic_u64 tier_passes, last_thread_checks, place_on, place_off, place_contended, place_stalled;
  jw_atomic_u64 wm_raises, wm_lowers;
} jw_reclaim_state;

extern jw_reclaim_state jw_rc;

static inline void jw_rc_bump(jw_atomic_u64 *c) { jw_fetch_add(c, 1, JW_RELAXED); /* statistics */ }

/* cycle.c: one reclaimer's batches. DUE: until standby is empty, then the
 * swap (a full cycle). PRESSURE: until the cached bytes are at most `low`.
 * wait != 0 waits for the token and the lock; 0 only tries them. Returns the
 * bytes released. */
uint64_t jw_reclaim_run(jw_release_mode mode, uint64_t low, int wait);

/* placement.c: the trough detector, at the end of every reclaimer run
 * (token held, backend lock not held); `due`: a full cycle. */
void jw_reclaim_place_check(int due);

/* watermark.c (reclamation.md 4a): the watermark in force, clamped to its
 * floor and ceiling (0: none); after a synchronous release that gave back
 * `released` bytes (token held), its record; in a due cycle (token held),
 * the decay toward the floor. */
uint64_t jw_reclaim_watermark_now(void);
void jw_reclaim_note_sync_release(uint64_t released);
void jw_reclaim_watermark_decay(void);
/* watermark.c: ends the grace running: releases down to three quarters of
 * the watermark if the cached bytes are still above it (waiting for the
 * token and the lock), else counts it taken back. Called by the reclaim
 * thread when the grace has passed or nothing is left cached, by fork
 * prepare, and by a setting change when no thread runs to end it. */
void jw_reclaim_grace_end(void);

/* thread.c */
void jw_reclaim_thread_ensure(void); /* start it, or run a due cycle without it */
void jw_reclaim_thread_wake(unsigned why); /* JW_WAKE_CYCLE, JW_WAKE_LAST_THREAD or JW_WAKE_AHEAD */
uint64_t jw_reclaim_now_ns(void);    /* CLOCK_MONOTONIC */

#endif
