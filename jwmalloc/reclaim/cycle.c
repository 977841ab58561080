/* The reclaim cycle and the synchronous release: batches of the backend's
 * release mechanism (backend/release.h) under the reclaimer token.
 * docs/design/reclamation.md, sections 1, 3 and 4. */
#include <time.h>

#include "../backend/ahead.h"
#include "../backend/backend.h"
#include "../common/backoff.h"
#include "../common/test_hooks.h"
#include "reclaim_internal.h"

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* One reclaimer at a time. Acquire (inside jw_lock_try): the new holder sees
 * what the previous one did to the batch outside the lock (its filing is
 * ordered by the lock). */
static int token_take(int wait) {
  for (;;) {
    if (jw_lock_try(&jw_rc.token, JW_LK_TOKEN)) return 1;
    if (!wait) return 0;
    sleep_us(1000); /* another reclaimer is releasing a batch: milliseconds */
  }
}

static void token_give(void) { jw_lock_release(&jw_rc.token); }

/* Test hook: stop at `where` (HOLD_BATCH: a batch in flight and no lock
 * held; HOLD_AGING: in an aging pass, pages unlinked from a pool and not yet
 * given back, the aging lock held) until the hold is turned off. */
enum { HOLD_NONE = 0, HOLD_BATCH = 1, HOLD_AGING = 2 };
static void maybe_hold(uint32_t where) {
  /* Acquire pairs with jw_reclaim_test_hold's release (nothing else rides on
   * it; the order is for the test's own data). */
  if (jw_load(&jw_rc.hold, JW_ACQUIRE) != where) return;
  jw_rc_bump(&jw_rc.held);
  while (jw_load(&jw_rc.hold, JW_ACQUIRE) == where) jw_futex_wait(&jw_rc.hold, where, NULL);
}

void jw_reclaim_test_point_aging(void) { maybe_hold(HOLD_AGING); }

void jw_reclaim_set_tier_hook(jw_reclaim_tier_fn fn) {
  /* Release: whatever the registering tier set up before is visible to the
   * reclaimer that loads the hook with acquire. */
  jw_store(&jw_rc.tier_hook, (void *)fn, JW_RELEASE);
}

/* The tiers' caches age first (section 6): what stayed idle in them since the
 * previous pass enters the backend as standby pieces, which this cycle's
 * batches then release. Under the aging lock, which only fork prepare waits
 * for (the pass holds no other lock and never waits); if fork holds it, the
 * pass is skipped. */
static void age_tiers(void) {
  jw_reclaim_tier_fn fn = (jw_reclaim_tier_fn)jw_load(&jw_rc.tier_hook, JW_ACQUIRE); /* see set_tier_hook */
  if (fn == NULL) return;
  /* Acquire/release (jw_lock): the aging lock orders passes with fork prepare. */
  if (!jw_lock_try(&jw_rc.aging, JW_LK_AGING)) return;
  /* Acquire pairs with jw_reclaim_kick's release store: the pages a kicker
   * put in a cache before its kick are seen by this pass. */
  jw_xchg(&jw_rc.tier_dirty, 0, JW_ACQUIRE);
  uint64_t held = fn();
  jw_lock_release(&jw_rc.aging);
  jw_store(&jw_rc.tier_held, held, JW_RELAXED); /* a figure for the idle test */
  jw_rc_bump(&jw_rc.tier_passes);
}

/* Batches of `mode` until there is nothing to take (DUE) or the cached bytes
 * are at most `low` (PRESSURE); the reclaimer token held. */
static uint64_t run_batches(jw_release_mode mode, uint64_t low, int wait) {
  uint64_t released = 0;
  for (;;) {
    if (!jw_release_lock(wait)) break; /* the previous batch is filed here */
    uint64_t want = 0;
    if (mode == JW_RELEASE_PRESSURE) {
      uint64_t cached = jw_release_cached_bytes();
      if (cached <= low) {
        jw_release_unlock();
        break;
      }
      want = cached - low;
    }
    unsigned n = jw_release_take(mode, want);
    jw_release_unlock();
    if (n == 0) { /* DUE: standby was empty and the buffers swapped */
      if (mode == JW_RELEASE_DUE) jw_rc_bump(&jw_rc.cycles);
      break;
    }
    maybe_hold(HOLD_BATCH);
    JW_TEST_POINT(JW_TP_RC_BATCH);
    released += jw_release_run(); /* filed by the next lock holder */
  }
  return released;
}

uint64_t jw_reclaim_run(jw_release_mode mode, uint64_t low, int wait) {
  if (!token_take(wait)) return 0;
  if (mode == JW_RELEASE_DUE) age_tiers();
  uint64_t released = run_batches(mode, low, wait);
  /* Under the token: the watermark's record and decay (section 4a). */
  if (mode == JW_RELEASE_PRESSURE && released != 0) jw_reclaim_note_sync_release(released);
  if (mode == JW_RELEASE_DUE) jw_reclaim_watermark_decay();
  /* Roots mapped ahead: kept while step 5 asks for them, given back one a
   * cycle once it does not; only the reclaim thread maps (backend.md 7a). */
  if (mode == JW_RELEASE_DUE) jw_ahead_cycle(jw_reclaim_on_thread());
#ifndef JW_VERIFY
  jw_reclaim_place_check(mode == JW_RELEASE_DUE);
#endif
  token_give();
  return released;
}

void jw_reclaim_hold(void) { token_take(1); }
void jw_reclaim_unhold(void) { token_give(); }

uint64_t jw_reclaim_purge(int tiers) {
  token_take(1);
  if (tiers) {
    jw_reclaim_tier_fn fn = (jw_reclaim_tier_fn)jw_load(&jw_rc.tier_hook, JW_ACQUIRE); /* see set_tier_hook */
    /* Waiting for the aging lock, as fork prepare does: a pass holding it
     * never waits. Two passes back to back: the first gives back what was
     * idle since the last cycle and makes everything left a candidate, the
     * second gives back those (section 6's countdown, served at once). */
    if (fn != NULL) {
      jw_lock_acquire(&jw_rc.aging, JW_LK_AGING);
      jw_xchg(&jw_rc.tier_dirty, 0, JW_ACQUIRE); /* as in age_tiers */
      fn();
      uint64_t held = fn();
      jw_lock_release(&jw_rc.aging);
      jw_store(&jw_rc.tier_held, held, JW_RELAXED); /* a figure for the idle test */
    }
  }
  /* Every backed free range, standby and active alike. */
  uint64_t released = run_batches(JW_RELEASE_PRESSURE, 0, 1);
  token_give();
  return released;
}

uint64_t jw_reclaim_cycle(void) {
  return jw_reclaim_run(JW_RELEASE_DUE, 0, 1);
}

void jw_reclaim_get_stats(jw_reclaim_stats *o) {
  jw_release_stats rs;
  jw_release_get_stats(&rs);
  jw_backend_stats bs;
  jw_backend_get_stats(&bs);
  o->cycles = jw_load(&jw_rc.cycles, JW_RELAXED);
  o->early_wakes = jw_load(&jw_rc.early_wakes, JW_RELAXED);
  o->sync_releases = jw_load(&jw_rc.sync_releases, JW_RELAXED);
  o->grace_waits = jw_load(&jw_rc.grace_waits, JW_RELAXED);
  o->grace_releases = jw_load(&jw_rc.grace_releases, JW_RELAXED);
  o->grace_reused = jw_load(&jw_rc.grace_reused, JW_RELAXED);
  o->inline_cycles = jw_load(&jw_rc.inline_cycles, JW_RELAXED);
  o->thread_starts = jw_load(&jw_rc.thread_starts, JW_RELAXED);
  o->thread_exits = jw_load(&jw_rc.thread_exits, JW_RELAXED);
  o->thread_start_failures = jw_load(&jw_rc.thread_start_failures, JW_RELAXED);
  o->batches = rs.batches;
  o->ranges_released = rs.ranges;
  o->bytes_released = rs.bytes;
  o->madvise_calls = rs.madvise_calls;
  o->roots_unmapped = rs.roots_unmapped;
  o->release_failures = rs.failures;
  o->merges = bs.pages.merges;
  o->merges_after_release = bs.merges_after_release;
  o->allocs_refault = bs.allocs_refault;
  o->cached_bytes = bs.pages.cached_bytes;
  o->thread_running = jw_load(&jw_rc.thread_state, JW_RELAXED) == JW_THREAD_RUNNING;
  o->tier_passes = jw_load(&jw_rc.tier_passes, JW_RELAXED);
  o->tier_held_bytes = jw_load(&jw_rc.tier_held, JW_RELAXED);
  o->last_thread_checks = jw_load(&jw_rc.last_thread_checks, JW_RELAXED);
  o->placement_on = jw_load(&jw_rc.place_on, JW_RELAXED);
  o->placement_off = jw_load(&jw_rc.place_off, JW_RELAXED);
  o->placement_contended = jw_load(&jw_rc.place_contended, JW_RELAXED);
  o->placement_stalled = jw_load(&jw_rc.place_stalled, JW_RELAXED);
  o->placement_active = jw_place_on();
  o->watermark_now = jw_reclaim_watermark_now();
  o->watermark_raises = jw_load(&jw_rc.wm_raises, JW_RELAXED);
  o->watermark_lowers = jw_load(&jw_rc.wm_lowers, JW_RELAXED);
}

static void set_hold(uint32_t v) {
  jw_store(&jw_rc.hold, v, JW_RELEASE); /* see maybe_hold */
  if (v == HOLD_NONE) jw_futex_wake(&jw_rc.hold, 1 << 30);
}

void jw_reclaim_test_hold(int on) { set_hold(on ? HOLD_BATCH : HOLD_NONE); }

void jw_reclaim_test_hold_aging(int on) { set_hold(on ? HOLD_AGING : HOLD_NONE); }

uint64_t jw_reclaim_test_held(void) { return jw_load(&jw_rc.held, JW_RELAXED); }

void jw_reclaim_atfork_prepare(void) {
  /* A grace running (section 4) ends here, in the parent: the child has no
   * reclaim thread to end it, and one that never frees would keep the
   * excess, up to four watermarks, for its whole life. It takes the token
   * and the backend lock like any reclaimer; fork prepare holds neither yet. */
  if (jw_load(&jw_rc.over_since_ns, JW_RELAXED) != 0) jw_reclaim_grace_end();
  /* Waits for an aging pass to end: it holds no lock fork prepare holds and
   * never waits, so this ends. Acquire: the pass's list updates. */
  jw_lock_acquire(&jw_rc.aging, JW_LK_AGING);
}

void jw_reclaim_atfork_parent(void) { jw_lock_release(&jw_rc.aging); }
