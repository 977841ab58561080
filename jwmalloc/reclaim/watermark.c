/* After every free: the reclaim thread's lazy start and the watermark on
 * cached free bytes. docs/design/reclamation.md, sections 4 and 5. */
#include "reclaim_internal.h"

void jw_reclaim_after_free(void) {
  if (!jw_load(&jw_rc.enabled, JW_RELAXED)) return; /* a setting: relaxed */
  /* A read-modify-write, acquire-release: the thread going idle clears the
   * flag with one too (thread.c), and read-modify-writes of one location are
   * totally ordered. If ours comes first, the thread's acquire sees this
   * free's update of the cached bytes (or its deferred push) and keeps
   * going; if the thread's comes first, we read "not running" and start a
   * new one. No free is left unaged. */
  if (jw_fetch_or(&jw_rc.thread_state, 0, JW_ACQ_REL) != JW_THREAD_RUNNING) jw_reclaim_thread_ensure();
  uint64_t wm = jw_load(&jw_rc.watermark, JW_RELAXED);
  if (wm != 0 && jw_release_cached_bytes() > wm) {
    /* Down to three quarters (at least a quarter of the watermark per
     * synchronous release), trying the token and the lock only: a free never
     * waits. Then the thread starts its cycle now. */
    if (jw_reclaim_run(JW_RELEASE_PRESSURE, wm - wm / 4, 0) != 0) jw_rc_bump(&jw_rc.sync_releases);
    jw_reclaim_thread_wake(JW_WAKE_CYCLE);
  }
}
