/* fork() while work is pending in other threads (docs/design/frontend.md,
 * "Batched remote frees" and thread exit; backend.md 7c, the root reserve):
 * the child is a working single-threaded process and the parent goes on.
 *
 * Usage: test_fork_pending CASE [SCALE]
 *   chain_pending a thread forks with a chain of cross-thread frees pending
 *                 on another thread's slab: in the child, a second free of a
 *                 chained block is reported (abort off), the chain is pushed
 *                 by malloc_trim, allocation works; in the parent the chain
 *                 still reaches its slab
 *   range_churn   a thread forks while others churn ranges and hold full
 *                 range budgets (4 MiB each) and the root reserve holds
 *                 emptied roots: the child allocates and frees whole roots'
 *                 worth of ranges many times (the reserve serves it: the roots
 *                 it maps stay bounded), a double free of a range the forking
 *                 thread cached is reported, malloc_trim works, and its
 *                 reclaimer gives every emptied root back; the parent's
 *                 threads finish
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checked_blocks.h"
#include "jwmalloc.h"
#include "owner_consumer.h"
#include "range_blocks.h"
#include "thread_test.h"

/* ---- chain_pending: fork with a chain pending ---- */

static void *fork_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]); /* a chain of 10, pending */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: a second free of a chained block is a double free. */
    jw_option_set("ABORT_ON_ERROR", 0);
    long inv0 = (long)st().invalid_frees;
    jw_free(blocks[3]);
    long inv1 = (long)st().invalid_frees;
    jw_malloc_trim(0); /* pushes the chain */
    for (int i = 0; i < 1000; i++) {
      void *p = make(16 + (size_t)i % 500, (uint64_t)i);
      if (p == NULL) _exit(3);
      check_and_free(p);
    }
    _exit(inv1 == inv0 + 1 && test_failures() == 0 ? 0 : 4);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "chain_pending: fork/waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "chain_pending: the child failed (status %#x: 4 = double free of a chained block not reported)", status);
  return NULL; /* the chain is pushed at exit */
}

static int case_chain_pending(void) {
  run_owner_consumer(fork_consumer, NULL);
  CHECK(owner_after <= owner_before,
        "chain_pending: the forking thread's chain never reached the slab (%ld bytes live)",
        owner_after - owner_before);
  if (!test_failures())
    printf("chain_pending: chained block's second free reported in the child, chain pushed in both\n");
  return test_failures() ? 1 : 0;
}

/* ---- range_churn: fork from a parent churning ranges ---- */

static atomic_int fork_stop;
static void *range_churner(void *arg) {
  uint64_t s = 0x5151ull * (uint64_t)((intptr_t)arg + 7);
  blk keep[6] = {{0}};
  while (!atomic_load(&fork_stop)) {
    /* Fill the cache: 1 MiB ranges freed while it is full grow its budget to 4 MiB. */
    void *m[6];
    for (int i = 0; i < 6; i++) m[i] = jw_malloc(1 << 20);
    for (int i = 0; i < 6; i++) jw_free(m[i]);
    int k = (int)(rnd(&s) % 6);
    if (keep[k].p) {
      if (!intact(&keep[k])) FAIL("range_churn: parent range corrupted");
      jw_free(keep[k].p);
    }
    keep[k].n = cached_class(rnd(&s));
    keep[k].p = jw_malloc(keep[k].n);
    keep[k].seed = (uint8_t)rnd(&s);
    fill(&keep[k]);
    /* Empty a whole root now and then: the reserve. */
    void *big = jw_malloc(4u << 20);
    jw_free(big);
  }
  for (int k = 0; k < 6; k++) jw_free(keep[k].p);
  return NULL;
}

static int range_child(void *arg) {
  (void)arg;
  /* A range this (the forking) thread caches in the child: freeing it again
   * is a double free. (The parent's cached ranges may have been aged and
   * handed to another thread before the fork: not a case to assert.) */
  jw_option_set("ABORT_ON_ERROR", 0);
  void *cached = jw_malloc(600000);
  jw_free(cached);
  uint64_t inv0 = st().invalid_frees;
  jw_free(cached);
  if (st().invalid_frees != inv0 + 1) {
    fprintf(stderr, "child: a double free of a cached range not reported\n");
    return 1;
  }
  jw_stats a = st();
  uint64_t roots0 = a.backend_root_bytes;
  for (int r = 0; r < 200; r++) {
    void *m[8];
    for (int i = 0; i < 8; i++) {
      m[i] = jw_malloc(i & 1 ? 1 << 20 : 3u << 20);
      if (!m[i]) {
        fprintf(stderr, "child: malloc failed\n");
        return 1;
      }
      memset(m[i], i, 4096);
    }
    for (int i = 0; i < 8; i++) jw_free(m[i]);
    if (r % 50 == 0) jw_malloc_trim(0);
  }
  jw_stats b = st();
  /* 200 rounds of 16 MiB: without reuse, 800+ roots mapped. */
  if (b.backend_roots_mapped - a.backend_roots_mapped > 64) {
    fprintf(stderr, "child: %llu roots mapped for 200 rounds of 16 MiB (emptied roots not reused)\n",
            (unsigned long long)(b.backend_roots_mapped - a.backend_roots_mapped));
    return 1;
  }
  /* Every root the child emptied (reserve included) is given back by its
   * reclaimer (restarted in the child) in time: none stuck. */
  double t0 = test_now_s();
  uint64_t roots = 0;
  while (test_now_s() - t0 < HANG) {
    jw_malloc_trim(0);
    if ((roots = st().backend_root_bytes) <= roots0) break;
    usleep(5000);
  }
  if (roots > roots0) {
    fprintf(stderr, "child: %llu MiB of roots mapped with everything freed, %llu MiB at the fork\n",
            (unsigned long long)(roots >> 20), (unsigned long long)(roots0 >> 20));
    return 1;
  }
  return 0;
}

static int case_range_churn(void) {
  pthread_t t[6];
  for (int i = 0; i < 6; i++) pthread_create(&t[i], NULL, range_churner, (void *)(intptr_t)i);
  for (int f = 0; f < scaled(20); f++) {
    void *m[4];
    for (int i = 0; i < 4; i++) m[i] = jw_malloc(600000);
    for (int i = 0; i < 4; i++) jw_free(m[i]);
    int status = test_run_child(range_child, NULL, HANG);
    if (status == -1) FAIL("range_churn: child %d hangs", f);
    else if (!test_exited_ok(status)) FAIL("range_churn: child %d failed (status %#x)", f, status);
  }
  atomic_store(&fork_stop, 1);
  for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
  CHECK(st().invalid_frees == 0, "range_churn: valid frees reported in the parent");
  printf("range_churn: %ld children forked from a churning parent, each reused emptied roots\n", scaled(20));
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"chain_pending", case_chain_pending},
      {"range_churn", case_range_churn},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  return TEST_MAIN(cases);
}
