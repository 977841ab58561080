/* A step handshake between the threads of one test case: a thread waits
 * until another has reached a given step. Deterministic orderings for the
 * cross-thread tests (test_xbatch.c, test_breakit4.c). Header-only: each test
 * program has its own step. */
#ifndef JW_TEST_STEP_H
#define JW_TEST_STEP_H

#include <pthread.h>

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
