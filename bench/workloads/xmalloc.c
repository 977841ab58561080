/* xmalloc-like workload (xmalloc-test by Lever and Boreham, as in mimalloc-bench).
 *
 * Half the threads (rounded up) only allocate, in batches of --batch blocks of
 * random size in [--min, --max]; the other half only free. Producer p hands its
 * blocks to consumer p mod C through its own ring, so nearly every free is
 * cross-thread (the brief's producer-consumer case). With one thread, that
 * thread frees its own batches. In ops mode --ops counts a producer's
 * allocations. docs/design/bench.md, "Workloads".
 */
#include <sched.h>
#include <stdio.h>

#include "harness.h"

static size_t min_size = 8, max_size = 1024, batch = 64;
static unsigned producers, consumers;
static jwb_ring **rings;               /* rings[p]: producer p -> consumer p % C */
static atomic_uint producers_done;

static void consume_ring(jwb_thread *t, jwb_ring *r, int *got) {
  jwb_item it;
  while (jwb_ring_pop(r, &it)) {
    jwb_item_free(t, &it);
    *got = 1;
  }
}

static void producer(jwb_thread *t) {
  jwb_ring *r = rings[t->index];
  while (!jwb_done(t)) {
    for (size_t i = 0; i < batch; i++) {
      jwb_item it;
      jwb_item_alloc(t, &it, jwb_size_log_uniform(&t->rng, min_size, max_size));
      while (!jwb_ring_push(r, it)) {
        if (consumers == 0) {
          int got = 0;
          consume_ring(t, r, &got);
        } else {
          sched_yield();  /* the consumer is behind: wait, as a bounded queue would */
        }
      }
    }
    if (consumers == 0) {
      int got = 0;
      consume_ring(t, r, &got);
    }
  }
  atomic_fetch_add_explicit(&producers_done, 1, memory_order_release);
}

static void consumer(jwb_thread *t) {
  unsigned c = t->index - producers;
  for (;;) {
    /* acquire: a producer's last pushes are visible once it counted itself done */
    int all_done = atomic_load_explicit(&producers_done, memory_order_acquire) == producers;
    int got = 0;
    for (unsigned p = c; p < producers; p += consumers) consume_ring(t, rings[p], &got);
    if (!got) {
      if (all_done) break;
      sched_yield();
    }
  }
}

static void worker(jwb_thread *t) {
  if (t->index < producers) producer(t);
  else consumer(t);
}

int main(int argc, char **argv) {
  jwb.ops = 200000;
  const jwb_opt opts[] = {
      {"min", JWB_OPT_SIZE, &min_size, "smallest block size in bytes (default 8)"},
      {"max", JWB_OPT_SIZE, &max_size, "largest block size in bytes (default 1024)"},
      {"batch", JWB_OPT_SIZE, &batch, "blocks a producer allocates before looking at the queue (default 64)"},
      {0},
  };
  jwb_init(argc, argv, "xmalloc-like: producer threads allocate, consumer threads free", opts);
  if (min_size < 1 || max_size < min_size || batch < 1) {
    fprintf(stderr, "%s: need 1 <= min <= max and batch >= 1\n", jwb.name);
    return 2;
  }
  producers = (jwb.threads + 1) / 2;
  consumers = jwb.threads - producers;
  rings = jwb_meta_alloc(producers * sizeof(jwb_ring *));
  for (unsigned i = 0; i < producers; i++) rings[i] = jwb_ring_new(batch * 64);
  jwb_run(jwb.threads, worker, 0);
  jwb_region_end();
  char extra[96];
  snprintf(extra, sizeof extra, "min=%zu max=%zu batch=%zu producers=%u consumers=%u", min_size, max_size, batch,
           producers, consumers);
  return jwb_report(extra);
}
