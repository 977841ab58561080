/* Test hooks (built only into the test library variant jwmalloc_api_hooks,
 * with JW_TEST_HOOKS; see common/lock.h). Never in a release library. */
#include "lock.h"

#ifdef JW_TEST_HOOKS
static jw_atomic_ptr lock_hook;

void jw_test_set_lock_hook(jw_test_lock_hook_fn fn) {
  /* Release: the test's own setup before installing is seen by the holder
   * that loads the hook with acquire. */
  jw_store(&lock_hook, (void *)fn, JW_RELEASE);
}

void jw_test_lock_taken(jw_lock_kind kind) {
  jw_test_lock_hook_fn fn = (jw_test_lock_hook_fn)jw_load(&lock_hook, JW_ACQUIRE); /* see above */
  if (fn) fn(kind);
}
#endif
