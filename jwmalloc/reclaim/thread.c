/* The reclaim thread: started lazily, exits when idle, never keeps the
 * process alive, restarted in a forked child; without it, freeing threads
 * run due cycles. docs/design/reclamation.md, section 5. */
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <time.h>

#include "../backend/ahead.h"
#include "../common/backoff.h"
#include "../common/log.h"
#include "../os/os_mem.h"
#include "reclaim_internal.h"

uint64_t jw_reclaim_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts); /* vDSO: no system call */
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The only thread of the process left (the application's threads all ended
 * with pthread_exit)? From /proc/self/stat without allocating: field 20 is
 * the number of threads, and field 3 the state of the main thread, which,
 * when it ended with pthread_exit before others, stays a zombie ('Z') and
 * counted until the whole process ends. This thread is never the main one. */
static int alone(void) {
  char buf[1024];
  if (jw_os_read_file("/proc/self/stat", buf, sizeof buf) <= 0) return 0;
  const char *p = NULL;
  for (const char *q = buf; *q; q++)
    if (*q == ')') p = q; /* the command name may hold spaces and parentheses */
  if (p == NULL || p[1] != ' ') return 0;
  char main_state = p[2];
  unsigned field = 2;
  for (p++; *p && field < 20; p++)
    if (*p == ' ') field++;
  unsigned long threads = 0;
  for (; *p >= '0' && *p <= '9'; p++) threads = threads * 10 + (unsigned long)(*p - '0');
  return field == 20 && (threads == 1 || (threads == 2 && main_state == 'Z'));
}

/* Memory left to age: backed free ranges, deferred work, pages the tiers'
 * caches held after the last pass (or put there since: the dirty flag), or
 * roots mapped ahead, which the cycles give back once unused. */
static int has_work(void) {
  return jw_release_cached_bytes() != 0 || jw_release_pending() || jw_load(&jw_rc.tier_held, JW_RELAXED) != 0 ||
         jw_load(&jw_rc.tier_dirty, JW_RELAXED) != 0 || /* figures and hints: relaxed (see reclaim_main's fence) */
         jw_ahead_held() != 0;
}

/* After a last-thread hint: the ending thread still exists for a moment
 * (its destructors run before it is gone), so look for a few milliseconds. */
static int became_alone(void) {
  for (int i = 0; i < 40; i++) { /* 1 ms steps for 20 ms, then 10 ms steps: about 0.2 s in all */
    if (alone()) return 1;
    struct timespec ts = {0, i < 20 ? 1000000 : 10000000};
    nanosleep(&ts, NULL);
  }
  return 0;
}

/* Sleeps one interval, or less when woken early (the watermark). Returns 1
 * when, woken by a last-thread hint, it found itself the process's only
 * thread; 2 when a grace of the watermark ended (section 4): the caller
 * releases, then runs its cycle early as after a synchronous release. */
enum { SLEPT = 0, SLEPT_ALONE = 1, SLEPT_GRACE = 2 };
static int sleep_interval(void) {
  uint64_t deadline = jw_reclaim_now_ns() + (uint64_t)jw_load(&jw_rc.interval_ms, JW_RELAXED) * 1000000u;
  for (;;) {
    /* Acquire pairs with the waker's release (the early cycle sees the
     * frees that crossed the watermark; the lock orders them anyway). */
    uint32_t why = jw_xchg(&jw_rc.wake, 0, JW_ACQUIRE);
    if (why & JW_WAKE_LAST_THREAD) {
      jw_rc_bump(&jw_rc.last_thread_checks);
      if (became_alone()) return SLEPT_ALONE;
    }
    if (why & JW_WAKE_AHEAD) jw_ahead_fill(); /* then sleep on: no cycle */
    if (why & JW_WAKE_CYCLE) {
      jw_rc_bump(&jw_rc.early_wakes);
      return SLEPT;
    }
    uint64_t now = jw_reclaim_now_ns(), until = deadline;
    if (now >= deadline) return SLEPT;
    /* A grace running (its wake bit only woke this loop): sleep to its end. */
    uint64_t since = jw_load(&jw_rc.over_since_ns, JW_RELAXED); /* a time: relaxed */
    if (since != 0) {
      uint64_t end = since + (uint64_t)jw_load(&jw_rc.grace_ms, JW_RELAXED) * 1000000u;
      if (now >= end) return SLEPT_GRACE;
      if (end < until) until = end;
    }
    struct timespec ts = {(time_t)((until - now) / 1000000000u), (long)((until - now) % 1000000000u)};
    jw_futex_wait(&jw_rc.wake, 0, &ts);
  }
}

/* Set on the reclaim thread: it never starts another (its frees at its own
 * exit run inside glibc's thread teardown, see jw_reclaim_set_start_guard). */
static __thread int on_reclaim_thread;

void jw_reclaim_set_start_guard(jw_reclaim_start_guard_fn fn) {
  /* Release: set once at initialization, before any free could read it. */
  jw_store(&jw_rc.start_guard, (void *)fn, JW_RELEASE);
}

void jw_reclaim_set_create_scope(jw_reclaim_create_scope_fn fn) {
  jw_store(&jw_rc.create_scope, (void *)fn, JW_RELEASE); /* as the guard */
}

/* May this context create the thread? (jw_reclaim_set_start_guard) */
static int may_start(void) {
  if (on_reclaim_thread) return 0;
  /* Acquire pairs with the release store of the registration. */
  jw_reclaim_start_guard_fn g = (jw_reclaim_start_guard_fn)jw_load(&jw_rc.start_guard, JW_ACQUIRE);
  return g == NULL || g();
}

static void *reclaim_main(void *arg) {
  (void)arg;
  on_reclaim_thread = 1;
  prctl(PR_SET_NAME, "jw-reclaim", 0, 0, 0);
  for (;;) {
    int slept = sleep_interval();
    if (slept == SLEPT_ALONE) break; /* the last thread: end, as below */
    if (slept == SLEPT_GRACE) jw_reclaim_grace_end();
    if (!jw_load(&jw_rc.enabled, JW_RELAXED)) break; /* reclamation turned off */
    jw_reclaim_run(JW_RELEASE_DUE, 0, 1);
    if (!has_work()) {
      /* Nothing cached: a grace still running has nothing left to release. */
      if (jw_load(&jw_rc.over_since_ns, JW_RELAXED) != 0) jw_reclaim_grace_end();
      /* Idle: stop. A free racing with this either reads the flag cleared
       * (and starts a new thread) or is seen below: both sides use a
       * read-modify-write of the flag (see jw_reclaim_after_free). */
      uint32_t running = JW_THREAD_RUNNING;
      /* Seq-cst, with the seq-cst load of the dirty flag below, against
       * jw_reclaim_kick's (seq-cst exchange of the flag, seq-cst load of the
       * state): in their single total order either the kicker reads the
       * thread gone and starts one, or this reads the flag set. */
      jw_cas(&jw_rc.thread_state, &running, JW_THREAD_NONE, JW_SEQ_CST, JW_RELAXED);
      if (jw_load(&jw_rc.tier_dirty, JW_SEQ_CST) == 0 && !has_work()) goto out;
      uint32_t none = JW_THREAD_NONE;
      if (!jw_cas(&jw_rc.thread_state, &none, JW_THREAD_RUNNING, JW_RELAXED, JW_RELAXED)) goto out;
      continue; /* work came in: keep going (the flag is ours again) */
    }
    /* Only this thread left: end it, and glibc ends the process as it would
     * have without us. */
    if (alone()) break;
  }
  jw_store(&jw_rc.thread_state, JW_THREAD_NONE, JW_RELAXED);
out:
  jw_rc_bump(&jw_rc.thread_exits);
  return NULL;
}

static int start(void) {
  pthread_attr_t a;
  if (pthread_attr_init(&a) != 0) return -1;
  pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
  pthread_attr_setstacksize(&a, 256u << 10); /* a few frames deep; sanitizers need their default */
#endif
  /* Every signal blocked in the new thread (it inherits the mask): the
   * application's handlers never run on it. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  pthread_t t;
  /* Acquire pairs with the release store of the registration. */
  jw_reclaim_create_scope_fn scope = (jw_reclaim_create_scope_fn)jw_load(&jw_rc.create_scope, JW_ACQUIRE);
  if (scope) scope(1);
  int rc = pthread_create(&t, &a, reclaim_main, NULL);
  if (scope) scope(0);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  pthread_attr_destroy(&a);
  return rc;
}

/* Without a thread: the freeing thread runs the due cycle itself when an
 * interval has passed since the last one (one thread wins the clock). */
static void inline_cycle(void) {
  uint64_t now = jw_reclaim_now_ns(), last = jw_load(&jw_rc.last_cycle_ns, JW_RELAXED);
  if (now - last < (uint64_t)jw_load(&jw_rc.interval_ms, JW_RELAXED) * 1000000u) return;
  /* Relaxed: the CAS only elects one thread; the cycle's lock orders the rest. */
  if (!jw_cas(&jw_rc.last_cycle_ns, &last, now, JW_RELAXED, JW_RELAXED)) return;
  jw_rc_bump(&jw_rc.inline_cycles);
  jw_reclaim_run(JW_RELEASE_DUE, 0, 0);
  /* A thread that could not be created is tried again once per interval. */
  uint32_t failed = JW_THREAD_FAILED;
  jw_cas(&jw_rc.thread_state, &failed, JW_THREAD_NONE, JW_RELAXED, JW_RELAXED);
}

void jw_reclaim_thread_ensure(void) {
  uint32_t none = JW_THREAD_NONE;
  /* Relaxed: the CAS elects the one starter; the thread reads only settings
   * and atomics with their own orders. */
  if (jw_load(&jw_rc.thread_on, JW_RELAXED) && may_start() &&
      jw_cas(&jw_rc.thread_state, &none, JW_THREAD_RUNNING, JW_RELAXED, JW_RELAXED)) {
    jw_store(&jw_rc.wake, 0, JW_RELAXED); /* a new thread waits a full interval first */
    if (start() == 0) {
      jw_rc_bump(&jw_rc.thread_starts);
      return;
    }
    jw_store(&jw_rc.thread_state, JW_THREAD_FAILED, JW_RELAXED);
    if (jw_fetch_add(&jw_rc.thread_start_failures, 1, JW_RELAXED) == 0)
      jw_dprintf(2, "jwmalloc: cannot start the reclaim thread; freeing threads reclaim instead\n");
  }
  if (jw_load(&jw_rc.thread_state, JW_RELAXED) != JW_THREAD_RUNNING) inline_cycle();
}

void jw_reclaim_thread_wake(unsigned why) {
  if (jw_load(&jw_rc.thread_state, JW_RELAXED) != JW_THREAD_RUNNING) return;
  /* Release pairs with the sleeper's acquire exchange; one system call per
   * wake-up, not per free. */
  if ((jw_fetch_or(&jw_rc.wake, why, JW_RELEASE) & why) == 0)
    jw_futex_wake(&jw_rc.wake, 1);
}

void jw_reclaim_kick(void) {
  if (!jw_load(&jw_rc.enabled, JW_RELAXED)) return; /* a setting: relaxed */
  /* Common case: a pass is already due and the thread runs. Relaxed: hints;
   * the slow case below orders what matters. */
  if (jw_load(&jw_rc.tier_dirty, JW_RELAXED) != 0 &&
      jw_load(&jw_rc.thread_state, JW_RELAXED) == JW_THREAD_RUNNING)
    return;
  /* Seq-cst (a release too: the pages the caller put in its cache before
   * this are seen by the pass that clears the flag with an acquire
   * exchange, cycle.c), and the seq-cst load of the state: see the idle
   * test in reclaim_main. */
  jw_xchg(&jw_rc.tier_dirty, 1, JW_SEQ_CST);
  if (jw_load(&jw_rc.thread_state, JW_SEQ_CST) != JW_THREAD_RUNNING) jw_reclaim_thread_ensure();
}

void jw_reclaim_last_thread_hint(void) { jw_reclaim_thread_wake(JW_WAKE_LAST_THREAD); }

void jw_reclaim_wake_ahead(void) { jw_reclaim_thread_wake(JW_WAKE_AHEAD); }

int jw_reclaim_on_thread(void) { return on_reclaim_thread; }

void jw_reclaim_atfork_child(void) {
  /* Single-threaded child: relaxed. The parent's thread and reclaimer do not
   * exist here (fork prepare left no batch in flight). */
  jw_store(&jw_rc.thread_state, JW_THREAD_NONE, JW_RELAXED);
  jw_lock_reset(&jw_rc.token);
  jw_store(&jw_rc.wake, 0, JW_RELAXED);
  jw_store(&jw_rc.over_since_ns, 0, JW_RELAXED); /* no thread to end the parent's grace */
  jw_lock_reset(&jw_rc.aging); /* taken by fork prepare */
  jw_store(&jw_rc.last_cycle_ns, jw_reclaim_now_ns(), JW_RELAXED);
#if defined(__SANITIZE_THREAD__)
  /* ThreadSanitizer's runtime kills a child of a multi-threaded parent that
   * starts a thread: in the TSan build the child ages its memory on its
   * freeing threads instead (the no-thread mode). */
  jw_store(&jw_rc.thread_on, 0, JW_RELAXED);
#endif
}
