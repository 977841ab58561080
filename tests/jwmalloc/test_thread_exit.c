/* A thread's exit and pthread keys (docs/design/frontend.md, "Batched
 * remote frees", thread exit): a thread's pending chain of cross-thread frees
 * reaches its slab when the thread exits, whatever the program does with its
 * own keys and their destructors. Each case runs an owner and a consumer
 * (owner_consumer.h) and asserts that the owner's slab goes back once every
 * block is freed.
 *
 * Usage: test_thread_exit CASE [SCALE]
 *   keys_exhausted  every pthread key taken before jwmalloc's constructor
 *                   (JW_TEST_EXHAUST_KEYS=1 in the environment: a constructor
 *                   of priority 101 takes them): jwmalloc has no exit hook,
 *                   so it must not touch the program's keys, and a thread's
 *                   cross-thread frees must still reach their slab at exit
 *   key_past_32     (the drop-in build, JW_TEST_KEYS40=1: 40 keys taken
 *                   before jwmalloc's, so its exit key needs glibc's
 *                   second-level array, allocated by calloc, i.e. by jwmalloc
 *                   itself, on each thread's first pthread_setspecific) a
 *                   thread whose first call is a cross-thread free, and one
 *                   whose first call is a malloc, each leave a chain at exit:
 *                   both chains reach the slab
 *   dtor_chain      a key's destructor that runs before jwmalloc's (its key
 *                   made first) frees blocks of another thread's slab (a
 *                   chain): the chain reaches its slab (jwmalloc's hook,
 *                   later, pushes it)
 *   last_dtor_round (not in the default run: glibc does not tell a library
 *                   that a thread is exiting) a thread's first cross-thread
 *                   frees come from a key's destructor in glibc's last
 *                   destructor round: jwmalloc's exit hook registered then
 *                   never runs; the frees should still reach their slab
 *   dtor_exit       (not in the default run: glibc 2.36 runs no further
 *                   destructor) dtor_chain's destructor then calls
 *                   pthread_exit (undefined by POSIX): the chain should still
 *                   reach its slab
 */
#define _GNU_SOURCE
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_blocks.h"
#include "jwmalloc.h"
#include "owner_consumer.h"
#include "thread_test.h"

/* ---- keys_exhausted: no exit hook ---- */

static pthread_key_t prog_keys[PTHREAD_KEYS_MAX + 1];
static int prog_nkeys;
static atomic_int dtor_bad, dtor_calls;
static char sentinel[4];

static void prog_dtor(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  if (v != &sentinel[0] && v != &sentinel[1]) atomic_fetch_add(&dtor_bad, 1);
}

/* Before jwmalloc's own constructor (priority 101 runs before the default),
 * when asked: every key the process can have. */
static pthread_key_t early_key;
static void early_dtor(void *v);
__attribute__((constructor(101))) static void exhaust_keys(void) {
  if (getenv("JW_TEST_EXHAUST_KEYS") == NULL) {
    pthread_key_create(&early_key, early_dtor); /* before jwmalloc's exit key: its destructor runs first */
    if (getenv("JW_TEST_KEYS40"))
      while (prog_nkeys < 40 && pthread_key_create(&prog_keys[prog_nkeys], prog_dtor) == 0) prog_nkeys++;
    return;
  }
  while (prog_nkeys < PTHREAD_KEYS_MAX + 1 && pthread_key_create(&prog_keys[prog_nkeys], prog_dtor) == 0)
    prog_nkeys++;
}

static atomic_int consumer_ready;
static void *keys_consumer(void *arg) {
  (void)arg;
  for (int i = 0; i < prog_nkeys; i++) pthread_setspecific(prog_keys[i], &sentinel[0]);
  /* A thread cache first (without an exit hook it is never recycled: its
   * pages stay, so they are taken before the owner measures). */
  jw_free(jw_malloc(24));
  jw_free(jw_malloc(3000));
  atomic_store(&consumer_ready, 1);
  wait_step(1);
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]); /* cross-thread: a chain if hooked */
  for (int i = 0; i < prog_nkeys; i++)
    if (pthread_getspecific(prog_keys[i]) != &sentinel[0]) {
      FAIL("keys_exhausted: jwmalloc changed the program's key %u (value %p)", (unsigned)prog_keys[i],
           pthread_getspecific(prog_keys[i]));
      break;
    }
  return NULL;
}

static int case_keys_exhausted(void) {
  if (getenv("JW_TEST_EXHAUST_KEYS") == NULL) {
    fprintf(stderr, "keys_exhausted: run with JW_TEST_EXHAUST_KEYS=1\n");
    return 2;
  }
  pthread_key_t extra;
  if (pthread_key_create(&extra, NULL) == 0) {
    printf("keys_exhausted: SKIP: the keys could not all be taken (%d)\n", prog_nkeys);
    return 77;
  }
  run_owner_consumer(keys_consumer, &consumer_ready);
  CHECK(atomic_load(&dtor_bad) == 0, "keys_exhausted: a program key's destructor got %d values it never set",
        atomic_load(&dtor_bad));
  CHECK(owner_after <= owner_before,
        "keys_exhausted: the consumer's cross-thread frees never reached the slab: %ld bytes still live after the "
        "owner freed the rest and trimmed",
        owner_after - owner_before);
  if (!test_failures())
    printf("keys_exhausted: %d keys taken before jwmalloc; program keys untouched, %d destructor calls, frees "
           "reached the slab\n",
           prog_nkeys, atomic_load(&dtor_calls));
  return test_failures() ? 1 : 0;
}

/* ---- last_dtor_round: first frees in the last destructor round ---- */

static pthread_key_t late_key;
static int late_rounds;

static void late_dtor(void *v) {
  (void)v;
  if (++late_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(late_key, &sentinel[1]); /* run again next round */
    return;
  }
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]);
}

static void *late_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  pthread_setspecific(late_key, &sentinel[1]);
  return NULL; /* its first frees come from late_dtor */
}

static int case_last_dtor_round(void) {
  pthread_key_create(&late_key, late_dtor);
  run_owner_consumer(late_consumer, NULL);
  CHECK(late_rounds == PTHREAD_DESTRUCTOR_ITERATIONS, "last_dtor_round: the destructor ran %d rounds", late_rounds);
  CHECK(owner_after <= owner_before,
        "last_dtor_round: frees made in the last destructor round never reached the slab: %ld bytes still live after "
        "the owner freed the rest and trimmed",
        owner_after - owner_before);
  if (!test_failures()) printf("last_dtor_round: frees from the last destructor round reached the slab\n");
  return test_failures() ? 1 : 0;
}

/* ---- key_past_32: jwmalloc's exit key beyond glibc's first 32 ---- */

static int k40_malloc_first;
static void *k40_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  if (k40_malloc_first) free(malloc(40));
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]);
  return NULL; /* its exit pushes the chain */
}

static int case_key_past_32(void) {
  if (prog_nkeys < 40) {
    fprintf(stderr, "key_past_32: run with JW_TEST_KEYS40=1\n");
    return 2;
  }
  for (k40_malloc_first = 0; k40_malloc_first < 2; k40_malloc_first++) {
    run_owner_consumer(k40_consumer, NULL);
    CHECK(owner_after <= owner_before,
          "key_past_32 (first call %s): the consumer's chain never reached the slab (%ld bytes live)",
          k40_malloc_first ? "malloc" : "a cross-thread free", owner_after - owner_before);
  }
  if (!test_failures())
    printf("key_past_32: exit key past glibc's first 32: chains of both threads reached the slab\n");
  return test_failures() ? 1 : 0;
}

/* ---- dtor_chain, dtor_exit: frees in a destructor run before jwmalloc's ---- */

static int dtor_do_exit;
static void early_dtor(void *v) {
  (void)v;
  for (int i = 1; i < owner_first_free; i++) check_and_free(blocks[i]); /* joins the chain of blocks[0] */
  if (dtor_do_exit) pthread_exit(NULL);
}

static void *dtor_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  check_and_free(blocks[0]); /* registers the exit hook (uncached), starts a chain */
  pthread_setspecific(early_key, &sentinel[2]);
  return NULL;
}

static int dtor_frees(int do_exit) {
  dtor_do_exit = do_exit;
  run_owner_consumer(dtor_consumer, NULL);
  CHECK(owner_after <= owner_before,
        "%s: the chain of a thread that freed in a destructor run before jwmalloc's%s never reached the slab "
        "(%ld bytes live)",
        do_exit ? "dtor_exit" : "dtor_chain", do_exit ? " and called pthread_exit there" : "",
        owner_after - owner_before);
  if (!test_failures())
    printf("%s: frees in a destructor run before jwmalloc's%s: the chain reached its slab\n",
           do_exit ? "dtor_exit" : "dtor_chain", do_exit ? ", then pthread_exit" : "");
  return test_failures() ? 1 : 0;
}

static int case_dtor_chain(void) { return dtor_frees(0); }
static int case_dtor_exit(void) { return dtor_frees(1); }

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"keys_exhausted", case_keys_exhausted}, {"key_past_32", case_key_past_32},
      {"dtor_chain", case_dtor_chain},         {"last_dtor_round", case_last_dtor_round},
      {"dtor_exit", case_dtor_exit},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  return TEST_MAIN(cases);
}
