/* Placement on demand: the reclaimer's trough detector
 * (JWMALLOC_PLACEMENT=auto). docs/design/reclamation.md, section 6a;
 * the run-time switch of every tier: docs/design/backend.md, section 7b. */
#include "../backend/backend.h"
#include "reclaim_internal.h"

#define MIB ((uint64_t)1 << 20)
/* On: live at most two thirds of its peak and pinned >= 1.5 x live + 16 MiB,
 * at two runs in a row. Off: pinned <= 1.25 x live + 8 MiB, and either
 * pinned fell by a quarter since the switch on (roots went back) or that
 * held for OFF_CYCLES full cycles (live grew to a new level and stayed). */
#define ON_SLACK (16 * MIB)
#define OFF_SLACK (8 * MIB)
#define ON_RUNS 2u
#define OFF_CYCLES 8u
/* The contention guard: more than LF_GUARD roots mapped without the lock in
 * one full cycle, and more than two thirds of the roots mapped in it, means
 * lock holders are being preempted (many threads on few cores); placement
 * then stays off for COOLDOWN_CYCLES full cycles. Busy threads that grow
 * together also map roots without the lock, but the holder maps most of them
 * (2 threads ramping up: 9 of 37; 20 threads on 2 cores: 10-34 of as many). */
#define LF_GUARD 8u
#define COOLDOWN_CYCLES 8u
/* The stall bound: placement on for STALL_CYCLES full cycles of a trough in a
 * row without pinned bytes falling by a root below their lowest in it goes
 * off (its cost is paid on every refill; what it buys is roots coming back). */
#define STALL_CYCLES 16u

/* Switches placement off; the next peak is measured from `live`. */
static void place_off(uint64_t live) {
  jw_pages_place_switch(false);
  jw_pages_place_sync(); /* PLACEMENT set to 1 since the mode was read */
  jw_store(&jw_rc.place_peak, live, JW_RELAXED);
  jw_backend_peak_live(1);
  jw_store(&jw_rc.place_runs, 0, JW_RELAXED);
  jw_rc_bump(&jw_rc.place_off);
}

/* At each full cycle: whether lock holders are being preempted, from the
 * roots mapped without the lock since the last one (backend.md 7a, step 5)
 * and the roots mapped in all. */
static bool contended(int due, uint64_t lf_roots, uint64_t mapped_roots) {
  uint32_t cool = jw_load(&jw_rc.place_cooldown, JW_RELAXED);
  if (due) {
    uint64_t n = lf_roots - jw_load(&jw_rc.place_lf_roots, JW_RELAXED);
    uint64_t m = mapped_roots - jw_load(&jw_rc.place_mapped_roots, JW_RELAXED);
    jw_store(&jw_rc.place_lf_roots, lf_roots, JW_RELAXED);
    jw_store(&jw_rc.place_mapped_roots, mapped_roots, JW_RELAXED);
    bool trip = n > LF_GUARD && 3 * n > 2 * m;
    cool = trip ? COOLDOWN_CYCLES : cool ? cool - 1 : 0;
    if (trip) jw_rc_bump(&jw_rc.place_contended);
    jw_store(&jw_rc.place_cooldown, cool, JW_RELAXED);
  }
  return cool != 0;
}

/* At each full cycle of a trough while placement is on: true when pinned
 * bytes have not fallen a root below their lowest since the trough began for
 * STALL_CYCLES full cycles (the survivors no longer drain out of the high
 * roots). A peak in between does not count: growing back is not a stall. */
static bool stalled(uint64_t pinned) {
  uint64_t low = jw_load(&jw_rc.place_low, JW_RELAXED);
  if (pinned + JW_ROOT <= low) {
    jw_store(&jw_rc.place_low, pinned, JW_RELAXED);
    jw_store(&jw_rc.place_stall, 0, JW_RELAXED);
    return false;
  }
  uint32_t n = jw_load(&jw_rc.place_stall, JW_RELAXED) + 1;
  jw_store(&jw_rc.place_stall, n, JW_RELAXED);
  return n >= STALL_CYCLES;
}

void jw_reclaim_place_check(int due) {
  if (jw_pages_place_mode() != JW_PLACE_AUTO) return;
  jw_backend_stats bs;
  jw_backend_get_stats(&bs);
  uint64_t live = bs.pages.live_bytes;
  /* Entirely free roots waiting to age go back anyway: not pinned. */
  uint64_t kept = bs.free_roots * (uint64_t)JW_ROOT;
  uint64_t pinned = bs.pages.mapped_bytes > kept ? bs.pages.mapped_bytes - kept : 0;
  /* The detector's state: the reclaimer token (held by the caller) orders
   * every access; relaxed. */
  uint64_t peak = jw_load(&jw_rc.place_peak, JW_RELAXED), mapped_peak = jw_backend_peak_live(0);
  if (mapped_peak > peak) peak = mapped_peak;
  if (live > peak) peak = live;
  jw_store(&jw_rc.place_peak, peak, JW_RELAXED);
  uint32_t runs = jw_load(&jw_rc.place_runs, JW_RELAXED);
  if (contended(due, bs.lf_roots, bs.roots_mapped_total)) {
    /* Placement's extra locked work would map roots without the lock
     * faster than its survivors could free them (backend.md 7b). */
    if (jw_place_on()) place_off(live);
    else jw_store(&jw_rc.place_runs, 0, JW_RELAXED);
    return;
  }
  if (jw_place_on()) {
    if (pinned > live + live / 4 + OFF_SLACK) {
      /* The trough lasts: is it still draining? */
      if (due && stalled(pinned)) {
        jw_rc_bump(&jw_rc.place_stalled);
        place_off(live);
        return;
      }
      jw_store(&jw_rc.place_runs, 0, JW_RELAXED);
      if (due) jw_pages_place_trim(); /* threads trim again at their next refill */
      return;
    }
    /* Out of the trough (the load grew back, or its roots came back): the
     * stall bound starts afresh at the next trough. */
    jw_store(&jw_rc.place_low, pinned, JW_RELAXED);
    jw_store(&jw_rc.place_stall, 0, JW_RELAXED);
    if (due) jw_store(&jw_rc.place_runs, ++runs, JW_RELAXED);
    if (pinned / 3 * 4 > jw_load(&jw_rc.place_on_pinned, JW_RELAXED) && runs < OFF_CYCLES) return;
    place_off(live);
    return;
  }
  if (live / 2 * 3 <= peak && pinned >= live + live / 2 + ON_SLACK) {
    jw_store(&jw_rc.place_runs, ++runs, JW_RELAXED);
    if (runs >= ON_RUNS) {
      jw_store(&jw_rc.place_runs, 0, JW_RELAXED);
      jw_store(&jw_rc.place_on_pinned, pinned, JW_RELAXED);
      jw_store(&jw_rc.place_low, pinned, JW_RELAXED);
      jw_store(&jw_rc.place_stall, 0, JW_RELAXED);
      jw_pages_place_switch(true); /* raises the epoch: the trim request */
      jw_pages_place_sync();       /* PLACEMENT set to 0 since the mode was read above */
      jw_rc_bump(&jw_rc.place_on);
    }
  } else {
    jw_store(&jw_rc.place_runs, 0, JW_RELAXED);
  }
}
