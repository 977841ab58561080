/* Holding libiosr's dropper at a chosen point (the test hook of
 * client/client_int.h), for tests that need a drop in a given state: asked
 * for but not begun (phase 0), its pages to discard chosen, before its drop
 * mark (2), a run announced and about to be discarded (3), iosrd's answer
 * received by a dropper that moves, before the moves (4), or done but not
 * yet confirmed (phase 1).
 * Every wait is bounded (a hang is a failure, not a wait forever). */
#ifndef IOSR_TEST_GATE_H
#define IOSR_TEST_GATE_H

#include "util.h" /* first: it sets _GNU_SOURCE */

#include <pthread.h>
#include <sys/wait.h>
#include <time.h>

#include "client/client_int.h"

static pthread_mutex_t gate_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t gate_cv = PTHREAD_COND_INITIALIZER;
static int gate_phase = -1;    /* the phase to hold at; -1: open */
static uint64_t gate_held;     /* the id of the drop held there (0: none yet) */
static unsigned gate_gen;      /* a release: the holder goes on */

static void gate_fn(uint64_t id, int after) {
  pthread_mutex_lock(&gate_mu);
  if (gate_phase == after && !gate_held) {
    gate_held = id;
    unsigned gen = gate_gen;
    pthread_cond_broadcast(&gate_cv);
    while (gate_phase >= 0 && gate_gen == gen) pthread_cond_wait(&gate_cv, &gate_mu);
  }
  pthread_mutex_unlock(&gate_mu);
}

/* The next drop to reach `phase` is held there. */
static inline void gate_close(int phase) {
  pthread_mutex_lock(&gate_mu);
  gate_phase = phase;
  gate_held = 0;
  iosr_test_drop_gate = gate_fn;
  pthread_mutex_unlock(&gate_mu);
}

/* Waits (at most `secs`) until a drop is held; returns its id. */
static inline uint64_t gate_wait(int secs) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += secs;
  pthread_mutex_lock(&gate_mu);
  int rc = 0;
  while (!gate_held && rc == 0) rc = pthread_cond_timedwait(&gate_cv, &gate_mu, &ts);
  uint64_t id = gate_held;
  pthread_mutex_unlock(&gate_mu);
  CHECK(id, "no drop reached the gate within %d s", secs);
  return id;
}

/* Lets the held drop go on and holds the next drop to reach `phase` (the
 * same one, when it is the later phase). */
static inline void gate_move(int phase) {
  pthread_mutex_lock(&gate_mu);
  gate_phase = phase;
  gate_held = 0;
  gate_gen++;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}

static inline void gate_open(void) {
  pthread_mutex_lock(&gate_mu);
  gate_phase = -1;
  pthread_cond_broadcast(&gate_cv);
  pthread_mutex_unlock(&gate_mu);
}

/* Waits for child pid at most `secs`; returns its wait status (kills it and
 * fails on a hang). */
static inline int wait_child(pid_t pid, int secs, const char *what) { return test_wait_child(pid, secs, what); }

/* The app said the dropper does not move here (no UFFDIO_MOVE before Linux
 * 6.8, or no graveyard): waits for it, stops the daemon and returns 77, the
 * tests' skip status. */
static inline int gate_skip_no_move(pid_t app, pid_t daemon) {
  printf("SKIP: no UFFDIO_MOVE (Linux 6.8) or no graveyard: the dropper does not move\n");
  wait_child(app, 60, "the app");
  iosr_test_stop_daemon(daemon);
  iosr_test_cleanup();
  return 77;
}

#endif
