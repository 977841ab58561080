/* After every free: the reclaim thread's lazy start and the watermark on
 * cached free bytes, its grace, and its adaptation to refaults.
 * docs/design/reclamation.md, sections 4, 4a and 5. */
#include "../backend/backend.h"
#include "../backend/roots.h"
#include "reclaim_internal.h"

/* The root size in bytes (backend: 1024 granules of 4 KiB). */
#define ROOT_BYTES ((uint64_t)4 << 20)

/* Relaxed loads throughout: the watermark and its records are settings and
 * heuristics, read racily; a stale value at worst delays or repeats one
 * doubling, which the ceiling bounds. */
static uint64_t ceiling(uint64_t floor) {
  uint64_t m = jw_load(&jw_rc.watermark_max, JW_RELAXED);
  if (m == 0) m = floor; /* the default: fixed (section 4a, why opt-in) */
  return m < floor ? floor : m;
}

uint64_t jw_reclaim_watermark_now(void) {
  uint64_t floor = jw_load(&jw_rc.watermark, JW_RELAXED);
  if (floor == 0) return 0;
  uint64_t w = jw_load(&jw_rc.wm_now, JW_RELAXED), top = ceiling(floor);
  return w < floor ? floor : w > top ? top : w;
}

/* Bytes of roots the backend has mapped for its locked path so far (mapped
 * with the lock given back since 2026-11-30, backend.md 7a), and live bytes,
 * now. Only those roots count as taken back: the locked path asks for one
 * only when no free range of the class or larger exists, while a refaulted
 * released range may be a class mismatch with backed memory of other classes
 * cached (a trough's churn does that), and a root mapped without the lock
 * says that a lock holder was preempted (20 threads on 2 cores do that). */
static void backend_figures(uint64_t *reobtained, uint64_t *live) {
  jw_backend_stats bs;
  jw_backend_get_stats(&bs);
  *reobtained = (bs.roots_mapped_total - bs.lf_roots) * ROOT_BYTES;
  *live = bs.pages.live_bytes;
}

void jw_reclaim_note_sync_release(uint64_t released) {
  uint64_t reobtained, live;
  backend_figures(&reobtained, &live);
  jw_store(&jw_rc.sync_reobtained, reobtained, JW_RELAXED);
  jw_store(&jw_rc.sync_live, live, JW_RELAXED);
  jw_store(&jw_rc.sync_bytes, released, JW_RELAXED);
  jw_store(&jw_rc.sync_ns, jw_reclaim_now_ns(), JW_RELAXED);
}

/* The cached bytes crossed the watermark w. If the previous synchronous
 * release was taken back within an interval (section 4a: roots of at least
 * half its bytes mapped since, while live bytes grew by less than half of
 * that), the working set is above w: double it (up to the ceiling) and
 * return 1 (nothing to release now). */
static int raise_if_refaulted(uint64_t w) {
  uint64_t floor = jw_load(&jw_rc.watermark, JW_RELAXED), top = ceiling(floor);
  uint64_t released = jw_load(&jw_rc.sync_bytes, JW_RELAXED);
  if (w >= top || released == 0) return 0;
  uint64_t interval_ns = (uint64_t)jw_load(&jw_rc.interval_ms, JW_RELAXED) * 1000000u;
  if (jw_reclaim_now_ns() - jw_load(&jw_rc.sync_ns, JW_RELAXED) >= interval_ns) return 0;
  uint64_t reobtained, live;
  backend_figures(&reobtained, &live);
  uint64_t again = reobtained - jw_load(&jw_rc.sync_reobtained, JW_RELAXED);
  uint64_t grew = live > jw_load(&jw_rc.sync_live, JW_RELAXED) ? live - jw_load(&jw_rc.sync_live, JW_RELAXED) : 0;
  if (again < released / 2 || grew >= again / 2) return 0;
  uint64_t next = w * 2 > top ? top : w * 2;
  /* One doubling per refaulted release: whoever clears its record doubles
   * (relaxed: the record is a heuristic; nothing else is published). */
  if (jw_cas(&jw_rc.sync_bytes, &released, 0, JW_RELAXED, JW_RELAXED)) {
    jw_store(&jw_rc.raise_live, live, JW_RELAXED);
    jw_store(&jw_rc.wm_now, next, JW_RELAXED);
    jw_rc_bump(&jw_rc.wm_raises);
  }
  return 1;
}

void jw_reclaim_watermark_decay(void) {
  uint64_t floor = jw_load(&jw_rc.watermark, JW_RELAXED), w = jw_reclaim_watermark_now();
  if (floor == 0 || w <= floor) return;
  uint64_t interval_ns = (uint64_t)jw_load(&jw_rc.interval_ms, JW_RELAXED) * 1000000u;
  if (jw_reclaim_now_ns() - jw_load(&jw_rc.sync_ns, JW_RELAXED) < 4 * interval_ns) return;
  jw_store(&jw_rc.wm_now, w / 2 < floor ? floor : w / 2, JW_RELAXED);
  jw_rc_bump(&jw_rc.wm_lowers);
}

/* How far above the watermark a grace may let the cached bytes go, in
 * watermarks (section 4, "The grace": a bound in bytes as well as time). */
#define GRACE_CAP 4u

/* Past the watermark: is the grace over (section 4, "The grace")? The first
 * crossing notes the time and wakes the thread for the grace's end. Relaxed:
 * the time is a heuristic; a lost race only makes two callers agree late. */
static int grace_over(void) {
  uint64_t g = (uint64_t)jw_load(&jw_rc.grace_ms, JW_RELAXED) * 1000000u;
  if (g == 0 || jw_load(&jw_rc.thread_state, JW_RELAXED) != JW_THREAD_RUNNING)
    return 1; /* none, or no thread to wait for its end: at once */
  uint64_t now = jw_reclaim_now_ns(), since = jw_load(&jw_rc.over_since_ns, JW_RELAXED);
  if (since == 0) {
    if (jw_cas(&jw_rc.over_since_ns, &since, now, JW_RELAXED, JW_RELAXED)) {
      jw_rc_bump(&jw_rc.grace_waits);
      jw_reclaim_thread_wake(JW_WAKE_GRACE);
      return 0;
    }
    /* another free started it just now: since holds its time, which may
     * be a little after our clock read */
  }
  return now > since && now - since >= g;
}

void jw_reclaim_grace_end(void) {
  /* Relaxed, as in grace_over; the CAS below ends this grace only, not one
   * that a free started while this released. */
  uint64_t since = jw_load(&jw_rc.over_since_ns, JW_RELAXED), wm = jw_reclaim_watermark_now();
  if (wm != 0 && jw_release_cached_bytes() > wm) {
    if (jw_reclaim_run(JW_RELEASE_PRESSURE, wm - wm / 4, 1) != 0) jw_rc_bump(&jw_rc.grace_releases);
  } else {
    jw_rc_bump(&jw_rc.grace_reused); /* allocations took the excess back: nothing to release */
  }
  jw_cas(&jw_rc.over_since_ns, &since, 0, JW_RELAXED, JW_RELAXED);
}

void jw_reclaim_after_free(void) {
  if (!jw_load(&jw_rc.enabled, JW_RELAXED)) return; /* a setting: relaxed */
  /* A read-modify-write, acquire-release: the thread going idle clears the
   * flag with one too (thread.c), and read-modify-writes of one location are
   * totally ordered. If ours comes first, the thread's acquire sees this
   * free's update of the cached bytes (or its deferred push) and keeps
   * going; if the thread's comes first, we read "not running" and start a
   * new one. No free is left unaged. */
  if (jw_fetch_or(&jw_rc.thread_state, 0, JW_ACQ_REL) != JW_THREAD_RUNNING) jw_reclaim_thread_ensure();
  uint64_t wm = jw_reclaim_watermark_now();
  if (wm == 0) return;
  uint64_t cached = jw_release_cached_bytes();
  uint64_t floor = jw_load(&jw_rc.watermark, JW_RELAXED);
  /* Raised, and the live bytes it was raised for have halved (a ramp-down
   * after a peak): the working set shrank, back to the floor at once. */
  if (wm > floor && cached > floor && jw_backend_live_bytes() < jw_load(&jw_rc.raise_live, JW_RELAXED) / 2) {
    jw_store(&jw_rc.wm_now, floor, JW_RELAXED);
    jw_rc_bump(&jw_rc.wm_lowers);
    wm = floor;
  }
  if (cached > wm) {
    /* The working set is above the watermark: it rose instead (4a). */
    if (raise_if_refaulted(wm)) return;
    /* Within the grace, up to four times the watermark stays cached (the
     * thread looks again when the grace ends); past that, at once. */
    if (cached <= GRACE_CAP * wm && !grace_over()) return;
    uint64_t since = jw_load(&jw_rc.over_since_ns, JW_RELAXED); /* the grace this release ends */
    /* Down to three quarters (at least a quarter of the watermark per
     * synchronous release), trying the token and the lock only: a free never
     * waits. Then the thread starts its cycle now. */
    if (jw_reclaim_run(JW_RELEASE_PRESSURE, wm - wm / 4, 0) != 0) {
      jw_rc_bump(&jw_rc.sync_releases);
      /* below again: a new crossing starts a new grace */
      jw_cas(&jw_rc.over_since_ns, &since, 0, JW_RELAXED, JW_RELAXED);
    }
    jw_reclaim_thread_wake(JW_WAKE_CYCLE);
  }
}
