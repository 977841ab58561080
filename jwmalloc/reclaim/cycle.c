/* The reclaim cycle and the synchronous release: batches of the backend's
 * release mechanism (backend/release.h) under the reclaimer token.
 * docs/design/reclamation.md, sections 1, 3 and 4. */
#include <linux/futex.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "reclaim_internal.h"

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* One reclaimer at a time. Acquire: the new holder sees what the previous
 * one did to the batch outside the lock (its filing is ordered by the lock). */
static int token_take(int wait) {
  for (;;) {
    uint32_t free_token = 0;
    if (jw_cas(&jw_rc.token, &free_token, 1, JW_ACQUIRE, JW_RELAXED)) return 1;
    if (!wait) return 0;
    sleep_us(1000); /* another reclaimer is releasing a batch: milliseconds */
  }
}

static void token_give(void) { jw_store(&jw_rc.token, 0, JW_RELEASE); /* pairs with token_take */ }

/* Test hook: stop with a batch in flight and no lock held. */
static void maybe_hold(void) {
  /* Acquire pairs with jw_reclaim_test_hold's release (nothing else rides on
   * it; the order is for the test's own data). */
  if (jw_load(&jw_rc.hold, JW_ACQUIRE) == 0) return;
  jw_rc_bump(&jw_rc.held);
  while (jw_load(&jw_rc.hold, JW_ACQUIRE) != 0) syscall(SYS_futex, &jw_rc.hold.v, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
}

uint64_t jw_reclaim_run(jw_release_mode mode, uint64_t low, int wait) {
  if (!token_take(wait)) return 0;
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
    maybe_hold();
    released += jw_release_run(); /* filed by the next lock holder */
  }
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
}

void jw_reclaim_test_hold(int on) {
  jw_store(&jw_rc.hold, on ? 1u : 0u, JW_RELEASE); /* see maybe_hold */
  if (!on) syscall(SYS_futex, &jw_rc.hold.v, FUTEX_WAKE_PRIVATE, 1 << 30, NULL, NULL, 0);
}

uint64_t jw_reclaim_test_held(void) { return jw_load(&jw_rc.held, JW_RELAXED); }
