/* The test hooks, exported: compiled only into libjwmalloc_hooks.so, the
 * preloadable test-hooks variant (never a release library), so a program
 * that runs on the preloaded allocator can install them (the preemption
 * benchmark, bench/harness/pause.c; docs/design/bench.md, "Preemption
 * injection"). The hooks themselves are common/lock.h's (every lock) and
 * common/test_hooks.h's (the named points: the backend's hand-over, the
 * checker's flag, the reclaimer's batch in flight), with their rules; the
 * library is built with -fvisibility=hidden, so these two wrappers are the
 * only test entry points a preloading program sees (found with dlsym).
 * Thread-safety: as the wrapped setters (install before the threads that
 * reach the hooks start). */
#include "../common/config.h"
#include "../common/lock.h"
#include "../common/test_hooks.h"

/* Empty without JW_TEST_HOOKS (builds that take every source, verify/). */
#ifdef JW_TEST_HOOKS

/* The preloading program's callbacks take a plain int (it has none of our
 * headers); the adapters pass the enum's value on. */
enum { PRELOAD_LOCK, PRELOAD_POINT };
static void (*_Atomic preload_fn[2])(int);

static inline void preload_call(int which, int arg) {
  void (*fn)(int) = preload_fn[which]; /* seq-cst load: pairs with the store below */
  if (fn) fn(arg);
}

static void lock_adapter(jw_lock_kind kind) { preload_call(PRELOAD_LOCK, (int)kind); }
static void point_adapter(jw_test_point point) { preload_call(PRELOAD_POINT, (int)point); }

/* fn runs in the holder right after every successful acquisition of one of
 * the allocator's locks, with the lock's kind (jw_lock_kind, 0..JW_LK_COUNT-1);
 * NULL removes it. */
JW_EXPORT void jw_test_preload_set_lock_hook(void (*fn)(int kind)) {
  preload_fn[PRELOAD_LOCK] = fn;
  jw_test_set_lock_hook(fn ? lock_adapter : NULL);
}

/* fn runs in the thread that reaches one of the named points, with the
 * point (jw_test_point, 0..JW_TP_COUNT-1); NULL removes it. */
JW_EXPORT void jw_test_preload_set_point_hook(void (*fn)(int point)) {
  preload_fn[PRELOAD_POINT] = fn;
  jw_test_set_point_hook(fn ? point_adapter : NULL);
}
#endif
