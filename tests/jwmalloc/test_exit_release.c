/* A thread's exit releases its whole thread cache even when the release
 * itself starts the reclaim thread (docs/design/concurrency.md, "Calls made
 * from inside the allocator").
 *
 * A thread's exit gives its bins back; a slab whose last blocks sat in a bin
 * empties, its page goes to the pool, and the pool put kicks the reclaimer,
 * which is not running: pthread_create runs on the exiting thread, in the
 * middle of the release. glibc's pthread_create allocates there (the new
 * thread's DTV, when it maps a fresh stack); this test makes every creation
 * allocate, through a wrapper (linked with --wrap=pthread_create), so that
 * the case is met every round instead of when glibc's stack cache is empty.
 * The allocation is of a class the release has already emptied. Each round
 * checks that the released cache points to no slab (jw_tc_released_held)
 * and that the cache's next user allocates and frees soundly.
 *
 * Built with JW_DROPIN against libjwmalloc.a (malloc and free are
 * jwmalloc's; the internal statistics are linked). Waits are bounded for
 * hangs, never timing checks. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "frontend/thread_cache.h"
#include "reclaim/reclaim.h"

#include "check.h"
#include "stage.h"

#define HANG 60.0 /* seconds: a bound for a hang */
enum { ROUNDS = 40, BIG = 2000, NESTED = 300 };

static _Atomic unsigned creations, nested_ok;

int __real_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg);

/* As glibc does for a fresh stack: an allocation on the creating thread. */
int __wrap_pthread_create(pthread_t *t, const pthread_attr_t *a, void *(*fn)(void *), void *arg) {
  char *p = malloc(NESTED);
  if (p != NULL) {
    memset(p, 0x5a, NESTED);
    nested_ok++;
  }
  creations++;
  int rc = __real_pthread_create(t, a, fn, arg);
  free(p);
  return rc;
}

static int reclaimer_running(void) {
  jw_reclaim_stats s;
  jw_reclaim_get_stats(&s);
  return s.thread_running;
}

static uint64_t released_held(void) { return jw_tc_released_held(); }

/* Two slabs of the BIG class: the first one's blocks freed, its first into
 * its local list (it was parked full: that free moves it to the partial
 * queue) and the rest into the bin, so that only the exit's bin flush empties
 * it. Nothing of the NESTED class is ever allocated here: at the exit that
 * class is already released when the flush of BIG kicks the reclaimer. */
static void *exiting(void *arg) {
  (void)arg;
  unsigned per = jw_class_blocks(jw_class_of(BIG));
  void *a[64];
  for (unsigned i = 0; i <= per && i < 64; i++) a[i] = malloc(BIG);
  for (unsigned i = 0; i < per && i < 64; i++) free(a[i]);
  set_stage(1);
  wait_stage(2); /* the reclaimer stops meanwhile */
  free(a[per]);  /* the current slab empties: it stays current */
  return NULL;
}

/* The next user of the released cache: every block it gets is its own. */
static void *next_user(void *arg) {
  (void)arg;
  enum { N = 400 };
  static unsigned char *p[N];
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)(16 + (i * 37) % 2000);
    p[i] = malloc(n);
    if (p[i] == NULL) return (void *)1;
    memset(p[i], i & 0xff, n);
  }
  for (int i = 0; i < N; i++) {
    size_t n = (size_t)(16 + (i * 37) % 2000);
    for (size_t k = 0; k < n; k++)
      if (p[i][k] != (unsigned char)(i & 0xff)) return (void *)2;
    free(p[i]);
  }
  return NULL;
}

int main(void) {
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  c.enabled = 1;
  c.thread = 1;
  c.interval_ms = 1; /* idle quickly between rounds */
  if (jw_reclaim_set_config(&c) != 0) {
    perror("jw_reclaim_set_config");
    return 2;
  }
  unsigned met = 0;
  for (int r = 0; r < ROUNDS && test_failures() == 0; r++) {
    set_stage(0);
    pthread_t t;
    pthread_create(&t, NULL, exiting, NULL);
    wait_stage(1);
    double end = test_now_s() + HANG;
    while (reclaimer_running() && test_now_s() < end) {
      struct timespec ts = {0, 1000000};
      nanosleep(&ts, NULL);
    }
    CHECK(!reclaimer_running(), "round %d: the reclaim thread did not go idle", r);
    unsigned before = creations;
    set_stage(2);
    pthread_join(t, NULL);
    if (creations != before) met++; /* the exit started the reclaimer */
    uint64_t held = released_held();
    CHECK(held == 0, "round %d: a released thread cache still points to %llu slabs", r, (unsigned long long)held);
    pthread_create(&t, NULL, next_user, NULL);
    void *res = NULL;
    pthread_join(t, &res);
    CHECK(res == NULL, "round %d: the released cache's next user saw wrong bytes or no memory (%p)", r, res);
  }
  CHECK(met > 0, "no thread exit started the reclaim thread in %d rounds (the case was never met)", ROUNDS);
  CHECK(nested_ok == creations, "an allocation inside pthread_create failed");
  printf("exit_release: %u of %d thread exits started the reclaim thread (an allocation inside pthread_create); "
         "every released cache held no slab\n",
         met, ROUNDS);
  return test_failures() != 0;
}
