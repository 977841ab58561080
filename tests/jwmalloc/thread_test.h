/* What the multi-threaded jw_ API tests share: a step handshake (a thread
 * waits until another has reached a given step, for deterministic orderings;
 * test_backoff for any other wait), a scale for their iteration counts, the
 * statistics, and their main(): `test_x CASE [SCALE]` runs one case.
 * Header-only: each test program has its own copy of the state. */
#ifndef JW_TEST_THREAD_TEST_H
#define JW_TEST_THREAD_TEST_H

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked_blocks.h"
#include "jwmalloc.h"

/* One wait of a test thread for another thread's progress: a few yields,
 * then sleeps of 50 us doubling to 1 ms, so that a waiter never spins for a
 * thread that is not running (docs/design/concurrency.md, "Every wait and
 * its bound"). `round` starts at 0 for each wait. */
static inline void test_backoff(unsigned *round) {
  unsigned r = (*round)++;
  if (r < 8) {
    sched_yield();
    return;
  }
  long us = r - 8 >= 5 ? 1000 : 50L << (r - 8);
  struct timespec ts = {0, (us > 1000 ? 1000 : us) * 1000L};
  nanosleep(&ts, NULL);
}

/* Waits until cond holds (test_backoff between looks). */
#define TEST_WAIT_UNTIL(cond)                  \
  do {                                         \
    unsigned test_round_ = 0;                  \
    while (!(cond)) test_backoff(&test_round_); \
  } while (0)

/* Percent of each case's default iteration counts (argument of the TSan runs). */
static int scale = 100;
static inline long scaled(long n) { return n * scale / 100 > 0 ? n * scale / 100 : 1; }

static inline jw_stats st(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

static pthread_mutex_t step_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t step_cv = PTHREAD_COND_INITIALIZER;
static int step;

/* Blocks until the step is at least `want`. */
static inline void wait_step(int want) {
  pthread_mutex_lock(&step_mu);
  while (step < want) pthread_cond_wait(&step_cv, &step_mu);
  pthread_mutex_unlock(&step_mu);
}

/* Sets the step to s and wakes every waiter. */
static inline void set_step(int s) {
  pthread_mutex_lock(&step_mu);
  step = s;
  pthread_cond_broadcast(&step_cv);
  pthread_mutex_unlock(&step_mu);
}

/* A thread body: malloc_trim every millisecond until *(atomic_int *)stop is
 * set (trims racing the other threads' mallocs and frees). */
static inline void *trim_until(void *stop) {
  while (!atomic_load((atomic_int *)stop)) {
    jw_malloc_trim(0);
    test_sleep_ms(1);
  }
  return NULL;
}

/* Sets the step to 0, then starts threads a (running fa) and b (fb): an
 * owner and a consumer handing over at given steps. */
static inline void start_step_pair(pthread_t *a, void *(*fa)(void *), pthread_t *b, void *(*fb)(void *)) {
  step = 0;
  pthread_create(a, NULL, fa, NULL);
  pthread_create(b, NULL, fb, NULL);
}

/* One case of a test program, run as `test_x NAME [SCALE]`: its exit status
 * (0, 77 to skip). */
typedef struct test_case {
  const char *name;
  int (*run)(void);
} test_case;

/* main() of a program of cases: runs the case argv[1] names, with `scale`
 * set from argv[2] (percent, 100 when absent or not positive). Returns the
 * case's status, 1 where it returned 0 but a check failed, 2 for a usage
 * error. */
static inline int test_main(int argc, char **argv, const test_case *cases, size_t ncases) {
  if (argc > 2) scale = atoi(argv[2]);
  if (scale <= 0) scale = 100;
  for (size_t i = 0; argc > 1 && i < ncases; i++) {
    if (strcmp(argv[1], cases[i].name) != 0) continue;
    int r = cases[i].run();
    if (r == 0 && test_failures()) r = 1;
    if (test_failures()) fprintf(stderr, "%s %s: %d failed checks\n", argv[0], argv[1], test_failures());
    return r;
  }
  fprintf(stderr, "usage: %s CASE [SCALE]; CASE is one of:", argv[0]);
  for (size_t i = 0; i < ncases; i++) fprintf(stderr, " %s", cases[i].name);
  fputc('\n', stderr);
  return 2;
}

#define TEST_MAIN(cases) test_main(argc, argv, cases, sizeof cases / sizeof *cases)

#endif
