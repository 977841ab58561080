/* What the cross-thread tests share (test_xbatch.c, test_breakit4.c): a step
 * handshake (a thread waits until another has reached a given step, for
 * deterministic orderings; test_backoff for any other wait), a scale for their
 * iteration counts, and the statistics. Header-only: each test
 * program has its own copy of the state. */
#ifndef JW_TEST_THREAD_TEST_H
#define JW_TEST_THREAD_TEST_H

#include <pthread.h>
#include <sched.h>
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

#endif
