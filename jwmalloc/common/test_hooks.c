/* Test hooks (common/test_hooks.h, common/lock.h): built only into the test
 * library variant jwmalloc_api_hooks and test programs, with JW_TEST_HOOKS.
 * Never in a release library. */
#include "test_hooks.h"

#include "lock.h"

#ifdef JW_TEST_HOOKS
static jw_atomic_ptr lock_hook, point_hook;

/* Release: the test's own setup before installing is seen by the thread that
 * loads the hook with acquire. */
void jw_test_set_lock_hook(jw_test_lock_hook_fn fn) { jw_store(&lock_hook, (void *)fn, JW_RELEASE); }

void jw_test_set_point_hook(jw_test_point_fn fn) { jw_store(&point_hook, (void *)fn, JW_RELEASE); }

void jw_test_lock_taken(jw_lock_kind kind) {
  jw_test_lock_hook_fn fn = (jw_test_lock_hook_fn)jw_load(&lock_hook, JW_ACQUIRE); /* see above */
  if (fn) fn(kind);
}

void jw_test_point_reached(jw_test_point point) {
  jw_test_point_fn fn = (jw_test_point_fn)jw_load(&point_hook, JW_ACQUIRE); /* see above */
  if (fn) fn(point);
}
#endif
