/* Waiting for another thread's progress without burning the CPU it needs.
 *
 * Every loop of the allocator that waits for another thread (a lock holder, a
 * checker, a reclaimer's batch, a notifier between two steps) waits here: it
 * spins JW_BACKOFF_SPINS times (a holder on another CPU is usually done
 * within them), yields JW_BACKOFF_YIELDS times (a holder that is runnable
 * on this CPU gets it), and then sleeps: on a futex word where the other side
 * wakes sleepers (jw_backoff_futex), else for a short time that doubles from
 * JW_BACKOFF_SLEEP_MIN_NS to JW_BACKOFF_SLEEP_MAX_NS (jw_backoff_pause). A
 * waiter whose holder is descheduled therefore costs a few microseconds of
 * CPU per wait, not the holder's whole time off the CPU. Every such loop and
 * its bound: docs/design/concurrency.md, "Every wait and its bound".
 *
 * No allocation, no stdio, no pthread: raw system calls (sched_yield,
 * nanosleep, futex), so it works before main and in a forked child. Under
 * the model checker (JW_VERIFY) each call is one jw_cpu_relax(): the
 * checker's await, which already stands for any finite number of spins.
 * Thread-safe (a jw_backoff is the waiting thread's own, on its stack).
 */
#ifndef JW_COMMON_BACKOFF_H
#define JW_COMMON_BACKOFF_H

#include <time.h>

#include "atomic.h"

#ifndef JW_VERIFY
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

#define JW_BACKOFF_SPINS 64 /* pause instructions: a few microseconds */
#define JW_BACKOFF_YIELDS 4
#define JW_BACKOFF_SLEEP_MIN_NS 20000L   /* 20 us */
#define JW_BACKOFF_SLEEP_MAX_NS 1000000L /* 1 ms */

typedef struct jw_backoff {
  unsigned round; /* waits so far */
} jw_backoff;

#define JW_BACKOFF_INIT {0}

/* Sleeps in the kernel while *w holds val (returns at once if it does not, on
 * a wake-up, a signal, or after *timeout when not NULL). Under the model
 * checker: a scheduling point that waits for *w to change. */
static inline void jw_futex_wait(jw_atomic_u32 *w, uint32_t val, const struct timespec *timeout) {
#ifdef JW_VERIFY
  (void)w, (void)val, (void)timeout;
  jw_cpu_relax();
#else
  syscall(SYS_futex, &w->v, FUTEX_WAIT_PRIVATE, val, timeout, NULL, 0);
#endif
}

/* Wakes up to n sleepers of jw_futex_wait on w (nothing under the checker,
 * whose waits end when the value changes). */
static inline void jw_futex_wake(jw_atomic_u32 *w, int n) {
#ifdef JW_VERIFY
  (void)w, (void)n;
#else
  syscall(SYS_futex, &w->v, FUTEX_WAKE_PRIVATE, n, NULL, NULL, 0);
#endif
}

/* Gives the CPU up once (sched_yield): a thread preempted on this CPU may
 * run. Under the model checker: one scheduling point. */
static inline void jw_yield(void) {
#ifdef JW_VERIFY
  jw_cpu_relax();
#else
  sched_yield();
#endif
}

/* The spin and yield rounds of a wait; false once the wait should sleep. */
static inline bool jw_backoff_busy_step(jw_backoff *b) {
#ifdef JW_VERIFY
  (void)b;
  return false;
#else
  unsigned r = b->round;
  if (r >= JW_BACKOFF_SPINS + JW_BACKOFF_YIELDS) return false;
  b->round = r + 1;
  if (r < JW_BACKOFF_SPINS)
    jw_cpu_relax();
  else
    sched_yield();
  return true;
#endif
}

/* One wait where nobody wakes the waiter: spin, then yield, then sleep
 * 20 us, 40 us, ... up to 1 ms per call. The caller looks again after each. */
static inline void jw_backoff_pause(jw_backoff *b) {
#ifdef JW_VERIFY
  (void)b;
  jw_cpu_relax();
#else
  if (jw_backoff_busy_step(b)) return;
  unsigned k = b->round++ - (JW_BACKOFF_SPINS + JW_BACKOFF_YIELDS);
  long ns = k >= 6 ? JW_BACKOFF_SLEEP_MAX_NS : JW_BACKOFF_SLEEP_MIN_NS << k;
  if (ns > JW_BACKOFF_SLEEP_MAX_NS) ns = JW_BACKOFF_SLEEP_MAX_NS;
  struct timespec ts = {0, ns};
  nanosleep(&ts, NULL);
#endif
}

/* One wait on a busy word w (0: free; any other value: busy; `sleeper`:
 * busy with a sleeper, which the side that clears w must wake with
 * jw_futex_wake when its exchange returns `sleeper`): spin, then yield, then
 * mark w and sleep until woken. Returns at once when w was cleared
 * meanwhile. The caller looks again after each. Relaxed: the marking and the
 * clearing exchange are read-modify-writes of w alone, so one of them sees
 * the other (a mark after the clear fails, a clear after the mark wakes);
 * what the caller reads after the wait is ordered by its own look. */
static inline void jw_backoff_futex(jw_backoff *b, jw_atomic_u32 *w, uint32_t sleeper) {
  if (jw_backoff_busy_step(b)) return;
  uint32_t v = jw_load(w, JW_RELAXED);
  if (v == 0) return;
  if (v != sleeper && !jw_cas(w, &v, sleeper, JW_RELAXED, JW_RELAXED)) return; /* changed: look again */
  jw_futex_wait(w, sleeper, NULL);
}

#endif
