/* What every test program of this tree shares: failed checks reported one
 * way (CHECK, FAIL, REQUIRE), a monotonic clock, and child processes run with
 * a bound on how long they may take. Header-only (each program has its own
 * failure count); C11 and C++; thread-safe.
 *
 * A failed check prints one line to stderr,
 *   FILE:LINE: check failed: EXPRESSION[: MESSAGE][ (errno N: TEXT)]
 * (errno as it was when the condition was found false, shown when not 0;
 * FAIL prints FILE:LINE: failed: MESSAGE), and counts. What happens next is the subject's choice, made once in its
 * header before it includes this one:
 * - by default the first failed check ends the process (exit status 1, so
 *   atexit handlers run: a test's daemons are killed): later steps would
 *   only act on a broken state (IOSR's tests, their forked apps);
 * - with TEST_CONTINUE_AFTER_FAILURE defined the program goes on (threads
 *   keep their own state consistent and later checks add information): the
 *   first TEST_FAILURES_PRINTED failures are printed, every one is counted,
 *   and the program's result is test_failures() != 0 (jwmalloc's tests).
 * REQUIRE ends the process in both: what follows cannot run without it. */
#ifndef TEST_SUPPORT_H
#define TEST_SUPPORT_H

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_FAILURES_PRINTED 20

/* ---- failed checks ---- */

static int test_failure_count;

/* Failures counted so far in this process (a forked child starts with its
 * parent's count: test_reset_failures). */
static inline int test_failures(void) { return __atomic_load_n(&test_failure_count, __ATOMIC_RELAXED); }
static inline void test_reset_failures(void) { __atomic_store_n(&test_failure_count, 0, __ATOMIC_RELAXED); }

#ifdef TEST_CONTINUE_AFTER_FAILURE
#define TEST_STOPS_AT_FAILURE 0
#else
#define TEST_STOPS_AT_FAILURE 1
#endif

/* Reports one failure (CHECK, FAIL and REQUIRE expand to it, then end the
 * process themselves when they stop: the compiler sees that they do). expr
 * is the condition's text (NULL for FAIL); fmt is " " followed by the
 * message's format (" " alone: no message); err is errno at the failure. */
__attribute__((format(printf, 6, 7))) static inline void test_failed(const char *file, int line, int stop,
                                                                      const char *expr, int err, const char *fmt,
                                                                      ...) {
  int n = __atomic_add_fetch(&test_failure_count, 1, __ATOMIC_RELAXED);
  if (!stop && n > TEST_FAILURES_PRINTED) return;
  flockfile(stderr); /* one line, whatever other threads print */
  fprintf(stderr, "%s:%d: %s", file, line, expr ? "check failed: " : "failed");
  if (expr) fputs(expr, stderr);
  if (fmt[1]) {
    va_list ap;
    va_start(ap, fmt);
    fputc(':', stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
  }
  if (err) fprintf(stderr, " (errno %d: %s)", err, strerror(err));
  fputc('\n', stderr);
  funlockfile(stderr);
}

/* CHECK(cond) or CHECK(cond, "format", ...): reports cond when false. */
#define CHECK(cond, ...)                                                                   \
  do {                                                                                     \
    if (!(cond)) {                                                                         \
      int test_errno_ = errno;                                                             \
      test_failed(__FILE__, __LINE__, TEST_STOPS_AT_FAILURE, #cond, test_errno_, " " __VA_ARGS__); \
      if (TEST_STOPS_AT_FAILURE) exit(1);                                                  \
    }                                                                                      \
  } while (0)

/* REQUIRE(cond[, "format", ...]): a CHECK that always ends the process. */
#define REQUIRE(cond, ...)                                                 \
  do {                                                                     \
    if (!(cond)) {                                                         \
      int test_errno_ = errno;                                             \
      test_failed(__FILE__, __LINE__, 1, #cond, test_errno_, " " __VA_ARGS__); \
      exit(1);                                                             \
    }                                                                      \
  } while (0)

/* FAIL("format", ...): a failure found without a single condition. */
#define FAIL(...)                                                          \
  do {                                                                     \
    test_failed(__FILE__, __LINE__, TEST_STOPS_AT_FAILURE, NULL, 0, " " __VA_ARGS__); \
    if (TEST_STOPS_AT_FAILURE) exit(1);                                    \
  } while (0)

/* ---- clock ---- */

/* Seconds on the monotonic clock (bounds for hangs and waits; never a
 * figure a test asserts). */
static inline double test_now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Sleeps ms milliseconds. */
static inline void test_sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* TEST_WAIT_FOR(cond, seconds): evaluates cond every millisecond until it
 * holds, for at most `seconds` (a bound for a hang, not a timing check);
 * its value is 1 when cond came true. A GNU statement expression. */
#define TEST_WAIT_FOR(cond, seconds)                                   \
  ({                                                                   \
    double test_deadline_ = test_now_s() + (seconds);                  \
    int test_ok_;                                                      \
    while (!(test_ok_ = !!(cond)) && test_now_s() < test_deadline_) test_sleep_ms(1); \
    test_ok_;                                                          \
  })

/* ---- child processes ---- */

/* Forks a child that returns fn(arg) as its exit status (_exit: the
 * parent's atexit handlers and stdio buffers are not run twice; stdout and
 * stderr are flushed before the fork for the same reason). Returns its pid
 * in the parent; a failed fork ends the test. */
static inline pid_t test_spawn(int (*fn)(void *), void *arg) {
  fflush(NULL);
  pid_t pid = fork();
  REQUIRE(pid >= 0, "fork");
  if (pid == 0) _exit(fn(arg));
  return pid;
}

/* Waits for child pid for at most `seconds` (a bound for a hang, never a
 * timing check). Returns its wait status; -1 when it cannot be waited for,
 * or when it is still running then: it is killed (its whole process group
 * when it leads one) and reaped. */
static inline int test_wait_bounded(pid_t pid, double seconds) {
  int st = 0;
  double end = test_now_s() + seconds;
  for (;;) {
    pid_t r = waitpid(pid, &st, WNOHANG);
    if (r == pid) return st;
    if (r < 0 && errno != EINTR) return -1; /* not our child */
    if (test_now_s() > end) break;
    test_sleep_ms(1);
  }
  kill(getpgid(pid) == pid ? -pid : pid, SIGKILL);
  waitpid(pid, &st, 0);
  return -1;
}

/* test_wait_bounded for a child that must end: a hang ends the test
 * (REQUIRE, naming the child `what`). Returns its wait status. */
static inline int test_wait_child(pid_t pid, double seconds, const char *what) {
  int st = test_wait_bounded(pid, seconds);
  REQUIRE(st != -1, "%s did not end within %.0f s (a hang)", what, seconds);
  return st;
}

/* 1 when a wait status says the child exited with status 0. */
static inline int test_exited_ok(int status) { return status != -1 && WIFEXITED(status) && WEXITSTATUS(status) == 0; }

/* test_spawn, then test_wait_bounded: the child's wait status, -1 on a hang. */
static inline int test_run_child(int (*fn)(void *), void *arg, double seconds) {
  return test_wait_bounded(test_spawn(fn, arg), seconds);
}

#endif
