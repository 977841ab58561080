/* An owner thread and a consumer thread of one slab, for the tests of
 * cross-thread frees that reach (or must reach) their slab: the owner
 * allocates NB blocks of BSIZE bytes (step 1), the consumer frees the first
 * owner_first_free of them from its own thread, the owner frees the rest,
 * trims and measures whether its slab went back (owner_before and
 * owner_after, the page source's live bytes). Steps: thread_test.h. */
#ifndef JW_TEST_OWNER_CONSUMER_H
#define JW_TEST_OWNER_CONSUMER_H

#include <pthread.h>
#include <stdatomic.h>

#include "checked_blocks.h"
#include "jwmalloc.h"
#include "thread_test.h"

static inline long pages_live(void) { return (long)st().page_source_live_bytes; }

/* One slab's worth of blocks of one class, handed out by an owner thread
 * (32 bytes: 126 blocks a slab; 60 stay in its current slab). */
#define NB 60
#define BSIZE 32
static void *blocks[NB];

/* The owner of `blocks`: allocates them (step 1), waits until the
 * consumer is done (step 3), frees the rest itself, trims, and measures
 * whether its slab went back (step 4 reports). */
static long owner_before, owner_after;
static int owner_first_free = 10; /* blocks [0, first) are the consumer's */
static inline void *owner_thread(void *arg) {
  (void)arg;
  jw_free(jw_malloc(BSIZE)); /* a cache, and a slab of the class */
  jw_malloc_trim(0);
  owner_before = pages_live();
  for (int i = 0; i < NB; i++) blocks[i] = make(BSIZE, (uint64_t)i + 11);
  set_step(1);
  wait_step(3);
  for (int i = owner_first_free; i < NB; i++) check_and_free(blocks[i]);
  jw_malloc_trim(0);
  owner_after = pages_live();
  set_step(4);
  wait_step(5);
  return NULL;
}

/* Runs owner_thread against `consumer` (which waits for step 1, frees
 * blocks [0, owner_first_free) and exits; `ready`, when not NULL, is
 * awaited before the owner starts); then the owner frees the rest, trims and
 * measures. Returns with owner_before/owner_after set. */
static inline void run_owner_consumer(void *(*consumer)(void *), atomic_int *ready) {
  step = 0;
  pthread_t to, tc;
  pthread_create(&tc, NULL, consumer, NULL);
  if (ready) TEST_WAIT_UNTIL(atomic_load(ready));
  pthread_create(&to, NULL, owner_thread, NULL);
  pthread_join(tc, NULL);
  set_step(3);
  wait_step(4);
  set_step(5);
  pthread_join(to, NULL);
}

#endif
