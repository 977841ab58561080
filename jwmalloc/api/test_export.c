/* The test hooks, exported: compiled only into libjwmalloc_hooks.so, the
 * preloadable test-hooks variant (never a release library), so a program
 * that runs on the preloaded allocator can install them (the preemption
 * benchmark, bench/harness/pause.c; docs/design/bench.md, "Preemption
 * injection"). The hooks themselves are common/lock.h's and
 * backend/backend.h's; the library is built with -fvisibility=hidden, so
 * these two wrappers are the only test entry points a preloading program
 * sees (found with dlsym). Thread-safety: as the wrapped setters (install
 * before the threads that take locks start). */
#include "../backend/backend.h"
#include "../common/config.h"
#include "../common/lock.h"

/* Empty without JW_TEST_HOOKS (builds that take every source, verify/). */
#ifdef JW_TEST_HOOKS

/* fn runs in the holder right after every successful acquisition of one of
 * the allocator's locks, with the lock's kind (jw_lock_kind, 0..JW_LK_COUNT-1);
 * NULL removes it. */
static void (*_Atomic lock_fn)(int kind);

static void lock_adapter(jw_lock_kind kind) {
  void (*fn)(int) = lock_fn; /* seq-cst load: pairs with the store below */
  if (fn) fn((int)kind);
}

JW_EXPORT void jw_test_preload_set_lock_hook(void (*fn)(int kind)) {
  lock_fn = fn;
  jw_test_set_lock_hook(fn ? lock_adapter : NULL);
}

/* fn runs at the backend's named points of the deferred hand-over
 * (JW_BE_TP_*); NULL removes it. */
JW_EXPORT void jw_test_preload_set_point_hook(void (*fn)(int point)) { jw_backend_test_set_point_hook(fn); }
#endif
