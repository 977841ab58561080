/* A stage number threads of a test wait on (mutex and condition variable:
 * no spinning, no allocation). set_stage(s) raises it; wait_stage(s) blocks
 * until it is at least s. One per test program. */
#ifndef JW_TEST_STAGE_H
#define JW_TEST_STAGE_H

#include <pthread.h>

static pthread_mutex_t stage_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t stage_cv = PTHREAD_COND_INITIALIZER;
static int stage;

static inline void set_stage(int s) {
  pthread_mutex_lock(&stage_mu);
  stage = s;
  pthread_cond_broadcast(&stage_cv);
  pthread_mutex_unlock(&stage_mu);
}

static inline void wait_stage(int s) {
  pthread_mutex_lock(&stage_mu);
  while (stage < s) pthread_cond_wait(&stage_cv, &stage_mu);
  pthread_mutex_unlock(&stage_mu);
}

#endif
