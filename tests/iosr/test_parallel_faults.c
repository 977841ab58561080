/* Faults served in parallel (issue 24, design note section 8): two threads
 * fault on swapped pages of two regions; the engine queues a read for each
 * while the other's is outstanding (the dispatcher held, so both are queued
 * before either completes: an engine that served one fault at a time would
 * never queue the second), and once released both reads are in flight at
 * once (the engine's peak of reads in flight). Each thread then reads its
 * page's bytes. In-process engine, FIFO dispatch, one-page reads. */
#include "util.h"
#include <pthread.h>

#define NP 16u

typedef struct reader {
  const uint8_t *p;
  uint64_t seed;
  int ok;
} reader;

static void *fault_one(void *arg) {
  reader *r = arg;
  r->ok = iosr_check(r->p, r->seed, 0, 0); /* blocks in the fault until its read is mapped */
  return NULL;
}

int main(void) {
  iosr_test_require();
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, "test_hooks=1,readahead=cluster,page_cluster=0,sched=fifo", "par");
  iosr_region *r1 = iosr_region_create(env.ctx, NP * 4096), *r2 = iosr_region_create(env.ctx, NP * 4096);
  CHECK(r1 && r2);
  uint8_t *p1 = iosr_region_base(r1), *p2 = iosr_region_base(r2);
  for (uint64_t i = 0; i < NP; i++) {
    iosr_fill(p1 + i * 4096, 41, i, 0);
    iosr_fill(p2 + i * 4096, 42, i, 0);
  }
  uint64_t got;
  CHECK(iosr_ctl_reclaim(env.ctl, "par", 0, &got) == 0 && got == 2 * NP * 4096);
  CHECK(iosr_test_stat(env.ctl, "\"reads_inflight_peak\":") == 0);

  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 1) == 0);
  reader a = {p1, 41, 0}, b = {p2, 42, 0};
  pthread_t ta, tb;
  CHECK(pthread_create(&ta, NULL, fault_one, &a) == 0);
  CHECK(pthread_create(&tb, NULL, fault_one, &b) == 0);
  /* both faults' reads queued, neither served yet */
  iosr_test_wait_queued(env.ctl, 2);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 0) == 0);
  CHECK(pthread_join(ta, NULL) == 0 && pthread_join(tb, NULL) == 0);
  CHECK(a.ok && b.ok);
  uint64_t peak = iosr_test_stat(env.ctl, "\"reads_inflight_peak\":");
  CHECK(peak >= 2, "at most %llu read in flight at once for two faulting threads", (unsigned long long)peak);
  for (uint64_t i = 0; i < NP; i++) {
    CHECK(iosr_check(p1 + i * 4096, 41, i, 0));
    CHECK(iosr_check(p2 + i * 4096, 42, i, 0));
  }
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  fprintf(stderr, "parallel faults: two threads' reads queued and in flight at once (peak %llu), bytes right\n",
          (unsigned long long)peak);
  return 0;
}
