/* Oversubscription: many more runnable threads than cores allocate while one
 * thread, the pauser, repeatedly holds what they wait for and is preempted
 * there (it sleeps inside, through a test hook, common/test_hooks.h). A
 * waiter may spin a few microseconds, then must give the CPU away and sleep
 * (common/backoff.h; docs/design/concurrency.md, "Every wait and its
 * bound"): asserted is that the waiters' CPU time stays a small multiple of
 * the work they did, not of the time they spent waiting.
 *
 * Usage: test_oversubscribed MODE
 *   checker  the pauser runs jw_backend_check_all in a loop and sleeps with
 *            the backend lock held and the checker's flag raised
 *            (JW_TP_BE_CHECKING); the workers allocate and free eight
 *            1 MiB ranges at a time, more than their block caches hold, and
 *            the backend's wait for the flag (backend.c lf_enter_wait)
 *   fork     the pauser forks in a loop (the child exits at once) and sleeps
 *            in fork prepare at the same point, with every lock fork holds
 *   reclaim  the pauser runs reclaim cycles and sleeps with a release batch
 *            in flight (JW_TP_RC_BATCH, the reclaimer's hand-off); the
 *            workers' quiet statistics wait for the batch (one of them, in
 *            jw_release_quiesce) or for the backend lock (the others)
 *   lock     the pauser frees 5 MiB blocks into the kept-mappings cache and
 *            sleeps holding its lock (the lock hook, JW_LK_HUGE); the
 *            workers' malloc_trim waits for that lock
 *
 * Each mode runs two phases with fresh workers, 12 per online CPU (at least
 * 24), that repeat one operation, THINK_US apart (an application's threads
 * allocate between other work: the CPU is not saturated by allocations
 * alone, so time burnt waiting shows), until the pauser has reached its point
 * `pauses` times (120; 60 in fork mode), PAUSE_GAP_MS apart: the baseline, where the hook returns at
 * once, then the paused phase, where it sleeps PAUSE_MS each time. Each
 * worker reads its own CPU time (getrusage RUSAGE_THREAD, user + system)
 * over its loop. Asserted, all counts or CPU times, never a wall duration:
 *   - the pauser reached its point `pauses` times in each phase (a hang bound
 *     of HANG seconds without reaching it otherwise);
 *   - at the end of the pauses, workers were in the middle of an operation
 *     (at least one per pause on average): the pauses were waited for;
 *   - the waiters' CPU time in the paused phase is at most
 *     CPU_PER_OP_FACTOR times the baseline's CPU per operation for the
 *     operations they did, plus WAIT_CPU_US per pause and worker (the cost
 *     of a bounded spin, a few yields, a sleep and its wake-up is far below
 *     it) or SPIN_SHARE of the pauses' CPU-seconds, whichever is more. A
 *     waiter spinning for the pauser spends its share of every pause on the
 *     CPU instead: up to `pauses` x PAUSE_MS x CPUs in all, several times
 *     that allowance.
 * The figures are printed (one line per phase).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/lock.h"
#include "common/test_hooks.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"

/* Pauses per phase, half of them in fork mode. The pauser competes for the
 * CPU with 12 workers per core at its own priority (the case this test is
 * about), so under other load each of its rounds waits for several time
 * slices, and a fork round for more (the child too): 0.76 s each beside two
 * CPU-bound programs. Fewer pauses in the other modes make their baseline,
 * the per-operation reference, too short to hold steady under load. */
#define PAUSES_MAX 120
static int pauses = PAUSES_MAX;
#define PAUSE_MS 20
#define PAUSE_GAP_MS 2
#define HANG 90.0 /* seconds without reaching the point: a bound for a hang, never a timing check */
#define THINK_US 500 /* a worker's pause between operations */
#define CPU_PER_OP_FACTOR 3.0
#define WAIT_CPU_US 200.0
/* The allowance for waiting is at least this share of the CPU-seconds the
 * pauses span: a waiter that spins for the pauser takes most of them (all on
 * an idle machine, its fair share beside other load: 24 waiters beside two
 * CPU-bound programs on 2 CPUs, over nine tenths), one that sleeps a part.
 * The floor keeps the bound clear of the per-operation cost's drift when
 * other programs share the CPUs between the two phases: beside two CPU-bound
 * programs the sleeping waiters of checker mode took 0.3 of the pauses'
 * CPU-seconds over three times their baseline cost per operation. */
#define SPIN_SHARE 0.5
#define MAX_WORKERS 512

enum { M_CHECKER, M_FORK, M_RECLAIM, M_LOCK };
static int mode;

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static void sleep_ms(long ms) { sleep_us(ms * 1000); }

/* This thread's CPU time so far, user and system, in seconds. */
static void thread_cpu(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_THREAD, &ru);
  *user = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6;
  *sys = (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

/* ---- the pauser and its hook ---- */

static __thread int is_pauser;
static atomic_int pause_ms;  /* 0 in the baseline */
static atomic_int reached;   /* the pauser at its point, this phase */
static atomic_int in_op;     /* workers in the middle of an operation now */
static atomic_long mid_op;   /* sum of in_op at the end of each pause */
static atomic_int stop;

/* The pauser at its point: it stands for a thread preempted there. */
static void at_point(void) {
  if (!is_pauser || atomic_load(&reached) >= pauses) return;
  int ms = atomic_load(&pause_ms);
  if (ms) sleep_ms(ms);
  atomic_fetch_add(&mid_op, atomic_load(&in_op));
  atomic_fetch_add(&reached, 1);
}

static void point_hook(jw_test_point p) {
  if (p == (mode == M_RECLAIM ? JW_TP_RC_BATCH : JW_TP_BE_CHECKING)) at_point();
}

static void lock_hook(jw_lock_kind k) {
  if (k == JW_LK_HUGE) at_point();
}

static void *pauser(void *arg) {
  (void)arg;
  is_pauser = 1;
  double last = test_now_s();
  int seen = 0;
  while (atomic_load(&reached) < pauses && test_now_s() - last < HANG) {
    if (atomic_load(&reached) != seen) seen = atomic_load(&reached), last = test_now_s();
    if (mode == M_CHECKER) {
      char err[256];
      CHECK(jw_backend_check_all(err, sizeof err) == 0, "check_all: %s", err);
    } else if (mode == M_FORK) {
      pid_t pid = fork();
      if (pid == 0) _exit(0);
      CHECK(pid > 0, "fork: %s", strerror(errno));
      int st;
      if (pid > 0) CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "child");
    } else if (mode == M_RECLAIM) {
      /* Something to release in the next cycles: 64 KiB ranges freed now. */
      void *p[8];
      for (int i = 0; i < 8; i++) p[i] = jw_malloc((size_t)64 << 10);
      for (int i = 0; i < 8; i++) jw_free(p[i]);
      jw_reclaim_cycle();
    } else {
      jw_free(jw_malloc((size_t)5 << 20));
    }
    sleep_ms(PAUSE_GAP_MS);
  }
  atomic_store(&stop, 1);
  return NULL;
}

/* ---- the workers ---- */

typedef struct worker_out {
  long ops;
  double user, sys;
} worker_out;

static void one_op(void) {
  if (mode == M_CHECKER || mode == M_FORK) {
    /* More than the thread's block cache keeps (4 MiB of 80 KiB-1 MiB
     * ranges): at least half of them come from the backend. */
    enum { NB = 8 };
    size_t n = (size_t)1 << 20;
    volatile unsigned char *p[NB];
    for (int i = 0; i < NB; i++) {
      p[i] = jw_malloc(n);
      CHECK(p[i] != NULL, "jw_malloc(1 MiB): %s", strerror(errno));
      if (p[i]) p[i][0] = (unsigned char)i, p[i][n - 1] = (unsigned char)~i;
    }
    for (int i = 0; i < NB; i++) {
      if (!p[i]) continue;
      CHECK(p[i][0] == (unsigned char)i && p[i][n - 1] == (unsigned char)~i, "block %d changed", i);
      jw_free((void *)p[i]);
    }
  } else if (mode == M_RECLAIM) {
    volatile unsigned char *p = jw_malloc((size_t)64 << 10);
    CHECK(p != NULL, "jw_malloc(64 KiB): %s", strerror(errno));
    if (p) p[0] = 1, jw_free((void *)p);
    jw_backend_stats s;
    jw_backend_get_stats_quiet(&s);
  } else {
    jw_free(jw_malloc(100));
    jw_malloc_trim(0);
  }
}

static void *worker(void *arg) {
  worker_out *o = arg;
  double u0, s0;
  thread_cpu(&u0, &s0);
  long ops = 0;
  while (!atomic_load(&stop)) {
    atomic_fetch_add(&in_op, 1);
    one_op();
    atomic_fetch_sub(&in_op, 1);
    ops++;
    sleep_us(THINK_US);
  }
  thread_cpu(&o->user, &o->sys);
  o->user -= u0;
  o->sys -= s0;
  o->ops = ops;
  return NULL;
}

typedef struct phase_out {
  long ops, mid_op;
  int reached;
  double cpu, user, sys, wall;
} phase_out;

static phase_out run_phase(int nw, int ms) {
  static pthread_t t[MAX_WORKERS];
  static worker_out w[MAX_WORKERS];
  atomic_store(&stop, 0);
  atomic_store(&reached, 0);
  atomic_store(&mid_op, 0);
  atomic_store(&pause_ms, ms);
  memset(w, 0, sizeof w);
  double t0 = test_now_s();
  int made = 0;
  for (; made < nw; made++)
    if (pthread_create(&t[made], NULL, worker, &w[made]) != 0) break;
  CHECK(made == nw, "pthread_create: %d of %d workers", made, nw);
  pthread_t p;
  CHECK(pthread_create(&p, NULL, pauser, NULL) == 0, "pthread_create (pauser)");
  pthread_join(p, NULL);
  for (int i = 0; i < made; i++) pthread_join(t[i], NULL);
  phase_out r = {0};
  r.wall = test_now_s() - t0;
  for (int i = 0; i < made; i++) r.ops += w[i].ops, r.user += w[i].user, r.sys += w[i].sys;
  r.cpu = r.user + r.sys;
  r.reached = atomic_load(&reached);
  r.mid_op = atomic_load(&mid_op);
  return r;
}

static void report(const char *name, int nw, int ms, const phase_out *r) {
  printf("%s: %d workers, %d pauses of %d ms: %ld ops, waiters' CPU %.3f s (user %.3f, sys %.3f), "
         "%.1f us per op, %.1f workers mid-op per pause, wall %.2f s\n",
         name, nw, r->reached, ms, r->ops, r->cpu, r->user, r->sys, r->ops ? r->cpu / (double)r->ops * 1e6 : 0.0,
         r->reached ? (double)r->mid_op / r->reached : 0.0, r->wall);
}

int main(int argc, char **argv) {
  const char *m = argc > 1 ? argv[1] : "";
  if (!strcmp(m, "checker")) mode = M_CHECKER;
  else if (!strcmp(m, "fork")) mode = M_FORK, pauses = PAUSES_MAX / 2;
  else if (!strcmp(m, "reclaim")) mode = M_RECLAIM;
  else if (!strcmp(m, "lock")) mode = M_LOCK;
  else {
    fprintf(stderr, "usage: test_oversubscribed checker|fork|reclaim|lock\n");
    return 2;
  }
  alarm(400); /* a hang bound for the whole program */
  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  int nw = (int)(12 * cpus < 24 ? 24 : 12 * cpus > MAX_WORKERS ? MAX_WORKERS : 12 * cpus);
  if (mode == M_LOCK) jw_test_set_lock_hook(lock_hook);
  else jw_test_set_point_hook(point_hook);

  phase_out base = run_phase(nw, 0);
  report("baseline", nw, 0, &base);
  phase_out paused = run_phase(nw, PAUSE_MS);
  report("paused", nw, PAUSE_MS, &paused);
  jw_test_set_lock_hook(NULL);
  jw_test_set_point_hook(NULL);

  CHECK(base.reached == pauses && paused.reached == pauses, "the pauser reached its point %d and %d times, want %d",
        base.reached, paused.reached, pauses);
  CHECK(base.ops > 0, "no operation in the baseline");
  CHECK(paused.mid_op >= paused.reached, "%ld workers mid-operation at the ends of %d pauses: nobody waited",
        paused.mid_op, paused.reached);
  double per_op = base.ops ? base.cpu / (double)base.ops : 0.0;
  double spin = (double)paused.reached * PAUSE_MS * 1e-3 * (double)cpus;
  double wait = WAIT_CPU_US * 1e-6 * (double)nw * paused.reached;
  if (wait < SPIN_SHARE * spin) wait = SPIN_SHARE * spin;
  double bound = CPU_PER_OP_FACTOR * per_op * (double)paused.ops + wait;
  printf("bound: %.1f x %.1f us per op x %ld ops + max(%.0f us x %d workers x %d pauses, %.2f x %.3f s of pauses) "
         "= %.3f s; waiters' CPU %.3f s (%.2f of the bound; the pauses alone span %.3f CPU-seconds)\n",
         CPU_PER_OP_FACTOR, per_op * 1e6, paused.ops, WAIT_CPU_US, nw, paused.reached, SPIN_SHARE, spin, bound,
         paused.cpu, bound > 0 ? paused.cpu / bound : 0.0, spin);
  CHECK(paused.cpu <= bound, "waiters spent %.3f s of CPU in %d pauses of %d ms, more than their work allows "
        "(%.3f s): they spin for the pauser instead of sleeping", paused.cpu, paused.reached, PAUSE_MS, bound);
  return test_failures() ? 1 : 0;
}
