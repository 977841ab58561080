/* The backend lock: a futex-based mutex with try-lock.
 *
 * Brief: "Non-blocking interface" (the locked list is taken with a try-lock).
 * Every lock of the backend is listed in docs/design/backend.md, "Locks".
 *
 * States: 0 free, 1 held, 2 held with waiters. No allocation, no pthread: it
 * works before main, in a forked child (jw_lock_init resets it) and under the
 * verifier (every access goes through common/atomic.h).
 */
#ifndef JW_BACKEND_LOCK_H
#define JW_BACKEND_LOCK_H

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/atomic.h"

typedef struct jw_lock {
  jw_atomic_u32 state;
} jw_lock;

#define JW_LOCK_INIT {JW_ATOMIC_INIT(0)}

static inline void jw_lock_init(jw_lock *l) {
  /* Relaxed: used in a forked child (single thread) or before sharing. */
  jw_store(&l->state, 0, JW_RELAXED);
}

/* Takes the lock if it is free. Acquire on success: the holder sees every
 * write of the previous holder. */
static inline int jw_lock_try(jw_lock *l) {
  uint32_t exp = 0;
  return jw_cas(&l->state, &exp, 1, JW_ACQUIRE, JW_RELAXED);
}

static inline void jw_lock_take(jw_lock *l) {
  if (jw_lock_try(l)) return;
  for (int i = 0; i < 100; i++) {
    jw_cpu_relax();
    /* Relaxed peek; the CAS in jw_lock_try orders. */
    if (jw_load(&l->state, JW_RELAXED) == 0 && jw_lock_try(l)) return;
  }
  /* Acquire on the exchange that finds it free, as in jw_lock_try. */
  while (jw_xchg(&l->state, 2, JW_ACQUIRE) != 0) {
#ifdef JW_VERIFY
    jw_cpu_relax(); /* under the model checker: a scheduling point, no kernel */
#else
    syscall(SYS_futex, &l->state.v, FUTEX_WAIT_PRIVATE, 2, NULL, NULL, 0);
#endif
  }
}

static inline void jw_lock_give(jw_lock *l) {
  /* Release: publishes the holder's writes to the next holder. */
  if (jw_xchg(&l->state, 0, JW_RELEASE) == 2) {
#ifndef JW_VERIFY
    syscall(SYS_futex, &l->state.v, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
#endif
  }
}

#endif
