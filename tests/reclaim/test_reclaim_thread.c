/* The reclaim thread's life: lazy start, release, exit when idle, restart,
 * deferred frees drained by it, no lock held while a batch is in flight,
 * early wake by the watermark, the watermark's grace, the no-thread mode, fork while it works, exit
 * while a release is in flight, and a main thread that ends with
 * pthread_exit. Waits are bounded (for hangs), never timing checks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

#include "backend/backend_internal.h" /* the raw lock, for a holder that drains nothing */
#include "rt.h"

#define PAGES(n) ((size_t)(n) * JW_GRANULE)
#define HANG 60.0 /* seconds: a bound for a hang */

enum { N = 32 };

/* N dirty ranges of 16 granules with a live guard between each two (so they
 * cannot merge); frees the ranges and keeps the guards. */
typedef struct spread {
  char *r[N], *guard[N];
} spread;

static void spread_make(spread *s) {
  for (int i = 0; i < N; i++) {
    memset(s->r[i] = rt_alloc(16), 0x5a, PAGES(16));
    memset(s->guard[i] = rt_alloc(16), 0xa5, PAGES(16));
  }
}
static void spread_free(spread *s) {
  for (int i = 0; i < N; i++) jw_pages_free(s->r[i]);
}
static void spread_check_guards(spread *s, const char *what) {
  for (int i = 0; i < N; i++)
    for (size_t k = 0; k < PAGES(16); k += 1024)
      REQUIRE((unsigned char)s->guard[i][k] == 0xa5, "%s: live guard %d changed at %zu", what, i, k);
}
static void spread_end(spread *s) {
  for (int i = 0; i < N; i++) jw_pages_free(s->guard[i]);
}

/* Makes a spread, frees it with the test hold on, and waits until the
 * reclaimer has taken a batch of it and stopped (no lock held). */
static void freeze_in_flight(spread *s) {
  spread_make(s);
  jw_reclaim_test_hold(1);
  uint64_t held = jw_reclaim_test_held();
  spread_free(s);
  REQUIRE(TEST_WAIT_FOR(jw_reclaim_test_held() > held, HANG), "reclaimer never took a batch");
}

static bool thread_gone(void) { return !rt_stats().thread_running && rt_threads() == 1; }

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_reclaim_thread: a call waited for the reclaim thread (hang)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

/* Starts only at the first free, releases after two cycles, exits when idle,
 * starts again at the next free. */
static void t_lifecycle(void) {
  CHECK(rt_stats().thread_starts == 0 && rt_threads() == 1, "a thread exists before any free");
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  spread s;
  spread_make(&s);
  CHECK(rt_stats().thread_starts == 0 && rt_threads() == 1, "allocation started a thread");
  uint64_t released = rt_stats().bytes_released;
  spread_free(&s);
  CHECK(rt_stats().thread_starts == 1 && rt_threads() == 2, "the first free did not start the thread");
  /* (Cached bytes exclude a batch in flight: wait for the released bytes.) */
  CHECK(TEST_WAIT_FOR(rt_stats().bytes_released - released >= N * PAGES(16), HANG), "released %llu bytes",
        (unsigned long long)(rt_stats().bytes_released - released));
  CHECK(rt_bstats().pages.cached_bytes == 0, "cached memory left");
  CHECK(TEST_WAIT_FOR(thread_gone(), HANG), "idle thread did not exit");
  CHECK(rt_stats().thread_exits == 1, "%llu exits", (unsigned long long)rt_stats().thread_exits);
  spread_check_guards(&s, "lifecycle");
  for (int i = 0; i < N; i++) memset(s.r[i] = rt_alloc(16), 1, PAGES(16));
  spread_free(&s);
  CHECK(rt_stats().thread_starts == 2, "thread not restarted by a free after it exited");
  CHECK(TEST_WAIT_FOR(thread_gone() && rt_bstats().pages.cached_bytes == 0, HANG), "restarted thread did not finish");
  spread_end(&s);
  CHECK(TEST_WAIT_FOR(thread_gone() && rt_bstats().pages.roots == 0, HANG), "roots not returned");
  rt_check_all("lifecycle");
}

/* A free deferred while the lock was held, by a holder that then leaves
 * without draining: the reclaim thread completes it. */
static void t_deferred_drained(void) {
  /* 80 granules: a class without a bitmap (docs/design/backend.md, section
   * 7a), so the free with the lock held is deferred. */
  char *a = rt_alloc(80), *guard = rt_alloc(80);
  memset(a, 1, PAGES(80));
  uint64_t live = rt_bstats().pages.live_bytes, deferred = rt_bstats().deferred_frees;
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  REQUIRE(jw_backend_free(a) == 0, "deferred free refused");
  jw_lock_release(&jw_be.lock); /* no drain */
  CHECK(rt_bstats().deferred_frees == deferred + 1 && rt_bstats().pages.live_bytes == live, "free not deferred");
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.live_bytes == live - PAGES(80), HANG), "deferred free never drained");
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "drained range never released");
  jw_pages_free(guard);
  rt_check_all("deferred");
}

/* The reclaim thread frozen with a batch in flight holds no lock: frees and
 * allocations of other threads complete; the ranges in flight are free, not
 * allocatable, and a free of one is rejected. */
static void t_no_lock_in_flight(void) {
  spread s;
  freeze_in_flight(&s);
  signal(SIGALRM, on_alarm);
  alarm((unsigned)HANG);
  for (int i = 0; i < 500; i++) {
    char *p = jw_pages_alloc(1 + (uint32_t)(i % 40), JW_KIND_LARGE, NULL, NULL);
    REQUIRE(p != NULL, "alloc while a batch is in flight");
    for (int k = 0; k < N; k++) REQUIRE(p != s.r[k] || i < 0, "a range in flight was handed out");
    p[0] = 1;
    REQUIRE(jw_backend_free(p) == 0, "free while a batch is in flight");
  }
  int in_flight = 0;
  for (int k = 0; k < N; k++) {
    jw_range_info info;
    if (jw_backend_classify(s.r[k], &info) == JW_PTR_FREE) in_flight++;
    errno = 0;
    CHECK(jw_backend_free(s.r[k]) == -1 && errno == EINVAL, "free of a range in flight accepted");
  }
  alarm(0);
  CHECK(in_flight == N, "%d of %d freed ranges classified free", in_flight, N);
  jw_reclaim_test_hold(0);
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "batch not finished");
  spread_check_guards(&s, "in flight");
  spread_end(&s);
  rt_check_all("in flight");
}

/* With an interval no test reaches, only the watermark's early wake can make
 * the thread run a cycle. A free past the watermark also releases at once,
 * trying the token and the lock only (a free never waits): in a round where
 * the thread holds them throughout (woken, then preempted on a busy machine)
 * nothing is released synchronously, so up to ROUNDS rounds, each after the
 * thread's early cycle, must show one. */
#define ROUNDS 4
static void t_early_wake(void) {
  rt_config(1, 600000, 1u << 20, JW_POLICY_LIFETIME, 1);
  char *first = rt_alloc(4), *keep = rt_alloc(4);
  memset(first, 1, PAGES(4));
  jw_pages_free(first); /* starts the thread: it sleeps 600 s */
  REQUIRE(TEST_WAIT_FOR(rt_threads() == 2, HANG), "thread not started");
  static spread s[ROUNDS]; /* the guards stay live until the end: their frees would cross it again */
  int rounds = 0, sync = 0;
  for (; rounds < ROUNDS && !sync; rounds++) {
    jw_reclaim_stats s0 = rt_stats();
    spread_make(&s[rounds]);
    spread_free(&s[rounds]); /* 2 MiB past a 1 MiB watermark */
    sync = rt_stats().sync_releases > s0.sync_releases;
    CHECK(TEST_WAIT_FOR(rt_stats().cycles > s0.cycles && rt_stats().early_wakes > s0.early_wakes, HANG),
          "the watermark did not wake the thread early");
  }
  CHECK(sync, "no synchronous release past the watermark in %d rounds", ROUNDS);
  for (int i = 0; i < rounds; i++) {
    spread_check_guards(&s[i], "early wake");
    spread_end(&s[i]);
  }
  jw_pages_free(keep);
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  /* The sleeping thread picks up the short interval at its next wake. */
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "thread did not finish");
}


/* The grace (reclamation.md section 4): past the watermark a free leaves the
 * excess cached and starts the grace, up to four times the watermark, past
 * which a free releases at once; at the grace's end the reclaim thread
 * releases down to three quarters of the watermark with no further free, or
 * releases nothing when allocations took the excess back meanwhile. Each
 * part starts with no thread and nothing cached, a grace of 600 s (which
 * keeps a grace running for the checks; a change to 1 ms then ends it) and
 * an interval of 600 s: the thread, started by the part's first free, only
 * sleeps until then and never holds the token that a free tries. A fork,
 * and reclamation turned off and on, end a grace too. */
#define GRACE_WM ((uint64_t)1 << 20)
static char *grace_start(void) {
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  REQUIRE(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "thread did not finish");
  rt_config_grace(1, 600000, GRACE_WM, JW_POLICY_LIFETIME, 1, 600000);
  char *first = rt_alloc(4), *keep = rt_alloc(4);
  memset(first, 1, PAGES(4));
  jw_pages_free(first); /* starts the thread: it sleeps 600 s */
  REQUIRE(TEST_WAIT_FOR(rt_threads() == 2, HANG), "thread not started");
  return keep;
}

/* A grace started (grace_start, then a spread freed past the watermark);
 * grace_done checks the spread's guards and frees them and `keep`. */
static char *grace_excess(spread *s) {
  char *keep = grace_start();
  spread_make(s);
  spread_free(s);
  CHECK(rt_bstats().pages.cached_bytes > GRACE_WM, "no excess past the watermark");
  return keep;
}
static void grace_done(spread *s, char *keep, const char *what) {
  spread_check_guards(s, what);
  spread_end(s);
  jw_pages_free(keep);
}

static void t_grace(void) {
  const uint64_t wm = GRACE_WM;
  static spread s, more[3];
  /* Past the watermark: nothing released until the grace ends. */
  char *keep = grace_start();
  spread_make(&s);
  jw_reclaim_stats s0 = rt_stats();
  spread_free(&s); /* 2 MiB past a 1 MiB watermark */
  jw_reclaim_stats s1 = rt_stats();
  CHECK(s1.grace_waits == s0.grace_waits + 1, "%llu graces started, not one",
        (unsigned long long)(s1.grace_waits - s0.grace_waits));
  CHECK(s1.sync_releases == s0.sync_releases && s1.bytes_released == s0.bytes_released &&
            rt_bstats().pages.cached_bytes > wm,
        "released within the grace: %llu bytes, cached %llu", (unsigned long long)(s1.bytes_released - s0.bytes_released),
        (unsigned long long)rt_bstats().pages.cached_bytes);
  rt_config_grace(1, 600000, wm, JW_POLICY_LIFETIME, 1, 1); /* the grace ends with no free */
  CHECK(TEST_WAIT_FOR(rt_stats().grace_releases > s1.grace_releases && rt_bstats().pages.cached_bytes <= wm - wm / 4,
                    HANG),
        "not released at the grace's end: cached %llu", (unsigned long long)rt_bstats().pages.cached_bytes);
  CHECK(rt_stats().sync_releases == s1.sync_releases, "a free released synchronously");
  spread_check_guards(&s, "grace release");
  spread_end(&s);
  jw_pages_free(keep);
  /* 6 MiB freed: past four watermarks a free releases, grace or not. */
  keep = grace_start();
  for (int k = 0; k < 3; k++) spread_make(&more[k]);
  jw_reclaim_stats s2 = rt_stats();
  for (int k = 0; k < 3; k++) spread_free(&more[k]);
  CHECK(rt_stats().sync_releases > s2.sync_releases && rt_bstats().pages.cached_bytes <= 4 * wm,
        "%llu releases past four watermarks, cached %llu",
        (unsigned long long)(rt_stats().sync_releases - s2.sync_releases),
        (unsigned long long)rt_bstats().pages.cached_bytes);
  for (int k = 0; k < 3; k++) {
    spread_check_guards(&more[k], "grace bound");
    spread_end(&more[k]);
  }
  jw_pages_free(keep);
  /* Past it, and taken back by allocations before the grace ends. */
  keep = grace_start();
  spread_make(&s);
  jw_reclaim_stats s3 = rt_stats();
  spread_free(&s);
  CHECK(rt_stats().grace_waits == s3.grace_waits + 1 && rt_bstats().pages.cached_bytes > wm, "no grace started");
  for (int i = 0; i < N; i++) s.r[i] = rt_alloc(16);
  CHECK(rt_bstats().pages.cached_bytes <= wm, "allocations left %llu cached",
        (unsigned long long)rt_bstats().pages.cached_bytes);
  rt_config_grace(1, 600000, wm, JW_POLICY_LIFETIME, 1, 1);
  CHECK(TEST_WAIT_FOR(rt_stats().grace_reused > s3.grace_reused, HANG), "the grace did not end");
  CHECK(rt_stats().grace_releases == s3.grace_releases && rt_stats().sync_releases == s3.sync_releases,
        "released after the excess was taken back");
  spread_free(&s);
  grace_done(&s, keep, "grace reused");
  /* A fork ends a running grace: the child, which has no thread to end it,
   * does not keep the excess, nor does the parent. */
  keep = grace_excess(&s);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) _exit(rt_bstats().pages.cached_bytes <= wm ? 0 : 1);
  int st;
  REQUIRE(waitpid(pid, &st, 0) == pid, "waitpid");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the child inherited the grace's excess");
  CHECK(rt_bstats().pages.cached_bytes <= wm - wm / 4, "the parent kept %llu cached after the fork",
        (unsigned long long)rt_bstats().pages.cached_bytes);
  grace_done(&s, keep, "grace fork");
  /* Reclamation off during a grace (its thread ends), then on again: the
   * excess is released, with no further free. */
  keep = grace_excess(&s);
  rt_config_grace(0, 600000, wm, JW_POLICY_LIFETIME, 1, 600000);
  REQUIRE(TEST_WAIT_FOR(thread_gone(), HANG), "the thread did not end with reclamation off");
  CHECK(rt_bstats().pages.cached_bytes > wm, "released with reclamation off");
  rt_config_grace(1, 600000, wm, JW_POLICY_LIFETIME, 1, 1);
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes <= wm - wm / 4, HANG),
        "reclamation back on: %llu cached", (unsigned long long)rt_bstats().pages.cached_bytes);
  grace_done(&s, keep, "grace toggle");
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "thread did not finish");
}

/* No thread: freeing threads run the due cycles. */
static void t_no_thread(void) {
  rt_config(1, 5, 0, JW_POLICY_LIFETIME, 0);
  uint64_t starts = rt_stats().thread_starts, inl = rt_stats().inline_cycles;
  spread s;
  spread_make(&s);
  uint64_t released = rt_stats().bytes_released;
  spread_free(&s);
  /* The program keeps freeing (a root of its own, freed and taken back): a
   * freeing thread runs each due cycle. */
  char *g = rt_alloc(1024);
  CHECK(TEST_WAIT_FOR((jw_pages_free(g), g = rt_alloc(1024),
                     rt_bstats().pages.cached_bytes == 0 && rt_stats().bytes_released - released >= N * PAGES(16)),
                    HANG),
        "no-thread mode never released");
  jw_pages_free(g);
  CHECK(rt_stats().inline_cycles > inl && rt_stats().thread_starts == starts && rt_threads() == 1,
        "no-thread mode: %llu inline cycles, %llu thread starts",
        (unsigned long long)(rt_stats().inline_cycles - inl), (unsigned long long)(rt_stats().thread_starts - starts));
  spread_end(&s);
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  rt_check_all("no thread");
}

/* ---- fork ---------------------------------------------------------------- */

/* In a child: the backend is consistent, and the reclaim thread starts again
 * and releases the child's cached memory. Exit status 0 when all holds. */
static int child_after_fork(void) {
  char err[300];
  if (jw_backend_check_all(err, sizeof err) != 0) {
    fprintf(stderr, "child: %s\n", err);
    return 2;
  }
  uint64_t starts = rt_stats().thread_starts;
  char *p = jw_pages_alloc(16, JW_KIND_LARGE, NULL, NULL), *q = jw_pages_alloc(16, JW_KIND_LARGE, NULL, NULL);
  if (p == NULL || q == NULL) return 3;
  memset(p, 1, PAGES(16));
  jw_pages_free(p);
  if (rt_stats().thread_starts != starts + 1) return 4;
  if (!TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0, HANG)) return 5;
  jw_pages_free(q);
  return jw_backend_check_all(err, sizeof err) == 0 ? 0 : 6;
}

static void wait_child(pid_t pid, const char *what) {
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid, "%s: waitpid", what);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: child status %#x", what, status);
}

static jw_atomic_u32 forked, churn_stop;
static void *forker(void *arg) {
  pid_t pid = fork();
  if (pid == 0) _exit(child_after_fork());
  jw_store(&forked, 1, JW_RELEASE);
  *(pid_t *)arg = pid;
  return NULL;
}

/* A fork while a batch is in flight waits for it to finish (the child must
 * not inherit ranges in transit), then both sides go on. */
static void t_fork_in_flight(void) {
  spread s;
  freeze_in_flight(&s);
  pid_t pid = 0;
  pthread_t th;
  jw_store(&forked, 0, JW_RELAXED);
  pthread_create(&th, NULL, forker, &pid);
  usleep(50000);
  CHECK(jw_load(&forked, JW_ACQUIRE) == 0, "fork completed with a batch in flight");
  jw_reclaim_test_hold(0);
  pthread_join(th, NULL);
  wait_child(pid, "fork in flight");
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "parent did not finish");
  spread_check_guards(&s, "fork in flight");
  spread_end(&s);
  rt_check_all("fork in flight");
}

/* Forks while another thread churns and the reclaim thread cycles every
 * millisecond. */
static void *churn(void *arg) {
  tb_rng r = {(uint64_t)(uintptr_t)arg};
  char *live[64] = {0};
  while (!jw_load(&churn_stop, JW_ACQUIRE)) {
    unsigned i = tb_below(&r, 64);
    if (live[i]) jw_pages_free(live[i]);
    uint32_t n = 1 + tb_below(&r, 48);
    live[i] = jw_pages_alloc(n, JW_KIND_LARGE, NULL, NULL);
    REQUIRE(live[i] != NULL, "churn alloc");
    memset(live[i], (int)i, PAGES(n));
  }
  for (int i = 0; i < 64; i++)
    if (live[i]) jw_pages_free(live[i]);
  return NULL;
}

static void t_fork_churn(void) {
  rt_config(1, 1, 256u << 10, JW_POLICY_LIFETIME, 1);
  pthread_t th;
  jw_store(&churn_stop, 0, JW_RELAXED);
  pthread_create(&th, NULL, churn, (void *)7);
  uint64_t c0 = rt_stats().cycles;
  for (int k = 0; k < 20; k++) {
    usleep(3000);
    pid_t pid = fork();
    if (pid == 0) _exit(child_after_fork());
    wait_child(pid, "fork during churn");
  }
  jw_store(&churn_stop, 1, JW_RELEASE);
  pthread_join(th, NULL);
  CHECK(rt_stats().cycles > c0, "the reclaim thread did not cycle during the forks");
  rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
  CHECK(TEST_WAIT_FOR(rt_bstats().pages.cached_bytes == 0 && thread_gone(), HANG), "churn memory not released");
  rt_check_all("fork churn");
}

/* ---- exit ---------------------------------------------------------------- */

static int exit_pipe = -1;
static void at_exit_allocates(void) {
  /* Exit handlers allocate and free; nothing they need is held. */
  char *p = jw_pages_alloc(5, JW_KIND_LARGE, NULL, NULL);
  if (p) {
    p[0] = 1;
    jw_pages_free(p);
    (void)!write(exit_pipe, "x", 1);
  }
}

/* exit() while the reclaim thread is frozen in the middle of a release: the
 * process ends at once with the status asked for. */
static void t_exit_in_flight(void) {
  int fds[2];
  REQUIRE(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    exit_pipe = fds[1];
    rt_config(1, 5, 0, JW_POLICY_LIFETIME, 1);
    jw_reclaim_test_hold(1);
    spread s;
    spread_make(&s);
    spread_free(&s);
    if (!TEST_WAIT_FOR(jw_reclaim_test_held() > 0 && rt_threads() == 2, HANG)) _exit(5);
    atexit(at_exit_allocates);
    exit(7);
  }
  close(fds[1]);
  int status = test_wait_child(pid, HANG, "the exiting process");
  char c = 0;
  ssize_t got = read(fds[0], &c, 1);
  close(fds[0]);
  CHECK(got == 1 && c == 'x', "exit handler did not allocate and free");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 7, "exit while a release was in flight: status %#x", status);
}

/* The main thread ends with pthread_exit while the reclaim thread has memory
 * to age: the process still ends (status 0, as glibc gives the last thread). */
static void t_pthread_exit_main(void) {
  pid_t pid = fork();
  if (pid == 0) {
    rt_config(1, 20, 0, JW_POLICY_LIFETIME, 1);
    spread s;
    spread_make(&s);
    spread_free(&s);
    if (rt_threads() != 2) _exit(5);
    pthread_exit(NULL);
  }
  int status = test_wait_child(pid, HANG, "the process whose main thread called pthread_exit");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "pthread_exit from main: status %#x", status);
}

int main(void) {
  jw_backend_set_check(1);
  pthread_atfork(jw_pages_atfork_prepare, jw_pages_atfork_parent, jw_pages_atfork_child);
  t_lifecycle();
  t_deferred_drained();
  t_no_lock_in_flight();
  t_early_wake();
  t_grace();
  t_no_thread();
  t_fork_in_flight();
  t_fork_churn();
  t_exit_in_flight();
  t_pthread_exit_main();
  if (test_failures()) return 1;
  puts("reclaim thread: ok");
  return 0;
}
