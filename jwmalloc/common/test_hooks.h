/* Test hooks: a callback that a test (or a preemption-injection benchmark)
 * installs runs in the thread that reaches a named place of the allocator,
 * so that the test can freeze, delay or count that thread exactly there.
 *
 * Built only with JW_TEST_HOOKS (the test-only static library variant
 * jwmalloc_api_hooks and the backend test programs that compile
 * common/test_hooks.c); the release libraries contain neither the calls nor
 * the symbols, and without it JW_TEST_POINT is empty.
 *
 * Two hooks, one callback each, the same rules:
 *   - the lock hook (common/lock.h, jw_test_set_lock_hook): after every
 *     successful acquisition of a jw_lock, with the lock's jw_lock_kind;
 *   - the point hook (below, jw_test_set_point_hook): at each jw_test_point.
 * The callback may sleep or block for as long as the test wants (that is what
 * it is for: it then stands for a thread preempted there, holding whatever
 * the point says it holds); it must not call into the allocator, whose locks
 * or flags the thread may hold. It runs in every thread that reaches the
 * point: a test that wants one thread only marks that thread itself (a
 * thread-local flag) and returns at once in the others.
 * Thread-safe: installing or removing (NULL) is one release store, the call
 * an acquire load, so the test's setup before jw_test_set_*_hook is seen by
 * the callback; a callback already running when it is removed runs on.
 * Where each point is and what waits on it: docs/design/concurrency.md,
 * "Test hooks".
 */
#ifndef JW_COMMON_TEST_HOOKS_H
#define JW_COMMON_TEST_HOOKS_H

typedef enum jw_test_point {
  /* A backend lock holder after its last drain, before its release
   * (backend/backend.c, jw_backend_unlock; backend.md 7c). */
  JW_TP_BE_UNLOCK,
  /* A free that found the backend lock held, before its push on the
   * deferred list (backend.md 7c). */
  JW_TP_BE_DEFER,
  /* A whole-tree checker (JWMALLOC_CHECK's per-operation check,
   * jw_backend_check_all, fork prepare) with the backend lock held, the
   * checking flag raised and no lock-free backend operation in flight:
   * allocations that need the backend wait for it (lf_enter_wait). */
  JW_TP_BE_CHECKING,
  /* A reclaimer (the reclaim thread, jw_reclaim_cycle, a synchronous
   * release) with a release batch in flight: token held, no lock held;
   * jw_release_quiesce callers (jw_backend_check_all, quiet statistics,
   * fork prepare) wait for it. */
  JW_TP_RC_BATCH,
  /* A backend lock holder merging a free range (backend/tree.c,
   * jw_tree_coalesce) has read a sibling leaf's head, free in a list or a
   * bitmap, and not yet claimed it (backend.md section 7a, "claim"). */
  JW_TP_BE_SIBLING,
  JW_TP_COUNT
} jw_test_point;

#ifdef JW_TEST_HOOKS
typedef void (*jw_test_point_fn)(jw_test_point point);
/* Installs fn (NULL removes it). */
void jw_test_set_point_hook(jw_test_point_fn fn);
/* Runs the installed callback, if any (the allocator's side). */
void jw_test_point_reached(jw_test_point point);
#define JW_TEST_POINT(point) jw_test_point_reached(point)
#else
#define JW_TEST_POINT(point) ((void)0)
#endif

#endif
