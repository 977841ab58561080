/* A one-word lock: try-lock for the non-blocking paths, a spinning acquire
 * only where waiting is allowed (fork prepare, the temporary page source).
 * Every use is listed in docs/design/concurrency.md. Never allocates. */
#ifndef JW_COMMON_LOCK_H
#define JW_COMMON_LOCK_H

#include <sched.h>
#include <stdbool.h>

#include "atomic.h"

typedef struct jw_lock {
  jw_atomic_u32 held;
} jw_lock;

/* Takes the lock if free. Acquire: the previous holder's writes. */
static inline bool jw_lock_try(jw_lock *l) {
  return jw_load(&l->held, JW_RELAXED) == 0 && jw_xchg(&l->held, 1, JW_ACQUIRE) == 0;
}

/* Waits for the lock: spins, then yields the CPU (a descheduled holder must
 * get to run under oversubscription). */
static inline void jw_lock_acquire(jw_lock *l) {
  for (unsigned spins = 0; !jw_lock_try(l); spins++) {
    if (spins < 64) jw_cpu_relax();
    else sched_yield();
  }
}

/* Release: publishes the holder's writes to the next holder. */
static inline void jw_lock_release(jw_lock *l) { jw_store(&l->held, 0, JW_RELEASE); }

/* fork child: the holder (if any) does not exist there. */
static inline void jw_lock_reset(jw_lock *l) { jw_store(&l->held, 0, JW_RELAXED); }

#endif
