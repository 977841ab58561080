/* The pause shim: a preload that reaches a peer allocator's lock-holding
 * sections for the preemption benchmark (docs/design/bench.md, "Preemption
 * injection"). Loaded before the allocator (LD_PRELOAD="libjwb_pause.so
 * PEER.so"), its pthread_mutex_lock and pthread_mutex_trylock are the ones an
 * allocator binds to when it calls them through the PLT (jemalloc and Scudo
 * do; glibc's malloc, mimalloc and tcmalloc take their own inline locks, which
 * no preload reaches). After every successful acquisition it calls the hook
 * installed with jwb_pause_shim_set_hook, in the acquiring thread, holding the
 * mutex: the harness counts the entry there and, when a pause is armed,
 * sleeps (bench/harness/pause.c). The hook's argument: 0 pthread_mutex_lock,
 * 1 pthread_mutex_trylock.
 *
 * The real functions are glibc's __pthread_mutex_lock and
 * __pthread_mutex_trylock (exported aliases of the same code), so the shim
 * needs no dlsym, which could allocate inside the allocator's own start-up.
 * Thread-safe; no allocation, no state but the hook.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>

#define SHIM_EXPORT __attribute__((visibility("default")))

extern int __pthread_mutex_lock(pthread_mutex_t *m);
extern int __pthread_mutex_trylock(pthread_mutex_t *m);

static void (*_Atomic hook)(int what);

/* fn: called after every successful acquisition, with the function's number
 * (see above); NULL removes it. Install before the threads start. */
SHIM_EXPORT void jwb_pause_shim_set_hook(void (*fn)(int what)) { atomic_store(&hook, fn); }

static inline void taken(int what) {
  void (*fn)(int) = atomic_load_explicit(&hook, memory_order_acquire); /* pairs with the store above */
  if (fn) fn(what);
}

SHIM_EXPORT int pthread_mutex_lock(pthread_mutex_t *m) {
  int e = __pthread_mutex_lock(m);
  if (e == 0) taken(0);
  return e;
}

SHIM_EXPORT int pthread_mutex_trylock(pthread_mutex_t *m) {
  int e = __pthread_mutex_trylock(m);
  if (e == 0) taken(1);
  return e;
}
