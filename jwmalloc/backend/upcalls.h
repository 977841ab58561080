/* The backend's calls up into reclamation: declared here, in the layer that
 * calls them, and defined by reclaim/ (the layer above, which includes this
 * header through reclaim/reclaim.h, so that each definition is checked
 * against its declaration). The include goes down, the call goes up
 * (docs/design/architecture.md, "Layers").
 *
 * Direct calls, not function pointers set at start-up: jw_reclaim_after_free
 * runs on every backend free, and a pointer loaded and called there costs a
 * load and an indirect call on that path, adds a state (not yet set) that
 * every caller must handle before initialization and in a forked child, and
 * hides the callee from the reader and the linker. Exactly one reclamation
 * is linked wherever the backend is (the library and the backend's own
 * tests, CMake's jw_reclaim objects).
 *
 * Thread-safety: every function may be called from any thread; none
 * allocates (thread creation aside: the reclaim thread's pthread_create may
 * call malloc, which is then served normally). Design:
 * docs/design/reclamation.md.
 */
#ifndef JW_BACKEND_UPCALLS_H
#define JW_BACKEND_UPCALLS_H

#include <stdint.h>

/* Reads the options (once; called by the backend's initialization). */
void jw_reclaim_init(void);

/* Called by the backend after every free, outside its lock: starts the
 * reclaim thread when it is not running (or, without a thread, runs a due
 * cycle), and past the watermark for longer than the grace releases
 * synchronously (try-lock only: never waits) and wakes the thread early; at
 * the first crossing it notes the time and wakes the thread for the grace's
 * end instead (reclamation.md section 4). A few relaxed loads and one fence
 * when nothing is to be done. */
void jw_reclaim_after_free(void);

/* An allocation took a root mapped ahead, or found none (the backend's
 * step 5, docs/design/backend.md 7a, "Roots mapped ahead"): a running reclaim
 * thread wakes and fills the empty slots (jw_ahead_fill), then sleeps on
 * without running a cycle. Nothing happens without a thread. One atomic
 * read-modify-write, and a futex wake-up when the thread was not already told. */
void jw_reclaim_wake_ahead(void);

/* One full cycle now: every range still in standby is released, then the
 * buffers swap. Waits for the backend lock and for another reclaimer. Returns
 * the bytes released. For tests and tools; also jw_backend_reclaim_step. */
uint64_t jw_reclaim_cycle(void);

/* fork: prepare takes the aging lock (waiting for an aging pass to finish:
 * it holds no other lock and never waits), so the child inherits no tier
 * cache half-unlinked; parent gives it back. Called from
 * jw_pages_atfork_prepare/parent before the backend lock is taken.
 * The child: no reclaim thread, no reclaimer; the thread starts again at the
 * child's next free. Called from jw_pages_atfork_child. */
void jw_reclaim_atfork_prepare(void);
void jw_reclaim_atfork_parent(void);
void jw_reclaim_atfork_child(void);

#endif
