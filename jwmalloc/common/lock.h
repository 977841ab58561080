/* The allocator's one lock type: a one-word mutex with a try-lock for the
 * non-blocking paths and a waiting acquire only where waiting is allowed
 * (the reclaim thread, fork prepare, thread exit, test and figure calls).
 * Every lock and who takes it: docs/design/concurrency.md.
 *
 * Brief: "Non-blocking interface" (the locked list is taken with a try-lock).
 * States: 0 free, 1 held, 2 held with a waiter asleep in the kernel. No
 * allocation, no pthread: it works before main, in a forked child
 * (jw_lock_reset) and under the verifier (every access goes through
 * common/atomic.h; the kernel wait becomes a scheduling point).
 *
 * Test hook: built with JW_TEST_HOOKS (the test-only library variant
 * jwmalloc_api_hooks, never the release libraries), every successful
 * acquisition calls the hook installed with jw_test_set_lock_hook, naming the
 * lock's kind; a test freezes the holder there (tests/jwmalloc/test_frozen.c).
 * Its rules are the point hook's (common/test_hooks.h).
 */
#ifndef JW_COMMON_LOCK_H
#define JW_COMMON_LOCK_H

#include <stdbool.h>

#include "atomic.h"
#include "backoff.h"

typedef struct jw_lock {
  jw_atomic_u32 state;
} jw_lock;

#define JW_LOCK_INIT {JW_ATOMIC_INIT(0)}

/* The allocator's locks (docs/design/concurrency.md), for the test hook. */
typedef enum jw_lock_kind {
  JW_LK_BACKEND,  /* backend/: trees, lists, roots */
  JW_LK_MIDEND,   /* one per midend class */
  JW_LK_POOL,     /* one per thread cache: its page pool */
  JW_LK_AGING,    /* reclaim/: the tiers' aging pass */
  JW_LK_TOKEN,    /* reclaim/: the reclaimer token */
  JW_LK_HUGE,     /* api/huge_cache.c: the kept direct mappings */
  JW_LK_DISABLE,  /* api/android.c: malloc_disable until malloc_enable, and fork */
  JW_LK_COUNT
} jw_lock_kind;

#ifdef JW_TEST_HOOKS
/* Called by the holder right after every successful acquisition. */
typedef void (*jw_test_lock_hook_fn)(jw_lock_kind kind);
void jw_test_set_lock_hook(jw_test_lock_hook_fn fn);
void jw_test_lock_taken(jw_lock_kind kind);
#define JW_LOCK_TAKEN(kind) jw_test_lock_taken(kind)
#else
#define JW_LOCK_TAKEN(kind) ((void)0)
#endif

/* Spins before sleeping in jw_lock_acquire. Under the model checker each spin
 * is an explored scheduling point: keep it tiny there. */
#ifdef JW_VERIFY
#define JW_LOCK_SPINS 2
#else
#define JW_LOCK_SPINS 100
#endif

/* Takes the lock if it is free; never waits. Acquire on success: the holder
 * sees every write of the previous holder. A relaxed peek first, so that a
 * busy lock costs no read-modify-write (no cache-line steal from the holder). */
static inline bool jw_lock_try(jw_lock *l, jw_lock_kind kind) {
  uint32_t exp = 0;
  if (jw_load(&l->state, JW_RELAXED) != 0 || !jw_cas(&l->state, &exp, 1, JW_ACQUIRE, JW_RELAXED)) return false;
  JW_LOCK_TAKEN(kind);
  (void)kind;
  return true;
}

/* Whether the lock is held now (a relaxed peek: a hint for bounded spins). */
static inline bool jw_lock_is_held(jw_lock *l) { return jw_load(&l->state, JW_RELAXED) != 0; }

/* A malloc or free path's second chance at a lock that jw_lock_try found
 * busy, before it goes another way (docs/design/concurrency.md, "One yield
 * before a fallback"; callers take it only with JWMALLOC_LOCK_YIELD=1): spins
 * while the lock is held, at most `spins` pauses (a holder running on another
 * CPU is done within them); if it is still held, gives the CPU up once (a
 * holder preempted on this CPU may run and release it); then tries again.
 * Bounded: never a sleep, never a second yield; but the yield itself may not
 * return for other threads' time slices. */
static inline bool jw_lock_try_after_yield(jw_lock *l, jw_lock_kind kind, unsigned spins) {
  for (unsigned i = 0; i < spins && jw_lock_is_held(l); i++) jw_cpu_relax();
  if (jw_lock_is_held(l)) jw_yield();
  return jw_lock_try(l, kind);
}

/* Waits for the lock: spins briefly, then sleeps in the kernel (a futex), so
 * a descheduled holder gets the CPU back. Never on a malloc or free path. */
static inline void jw_lock_acquire(jw_lock *l, jw_lock_kind kind) {
  for (int i = 0; i < JW_LOCK_SPINS; i++) {
    if (jw_lock_try(l, kind)) return;
    jw_cpu_relax();
  }
  /* Acquire on the exchange that finds it free, as in jw_lock_try; state 2
   * tells the holder to wake a sleeper. */
  while (jw_xchg(&l->state, 2, JW_ACQUIRE) != 0) jw_futex_wait(&l->state, 2, NULL);
  JW_LOCK_TAKEN(kind);
}

static inline void jw_lock_release(jw_lock *l) {
  /* Release: publishes the holder's writes to the next holder. */
  if (jw_xchg(&l->state, 0, JW_RELEASE) == 2) jw_futex_wake(&l->state, 1);
}

/* Before sharing, or in a fork child (the holder, if any, does not exist
 * there): relaxed, a single thread runs. */
static inline void jw_lock_reset(jw_lock *l) { jw_store(&l->state, 0, JW_RELAXED); }

#endif
