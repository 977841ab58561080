/* rptest-like workload (the rpmalloc benchmark as mimalloc-bench runs it).
 *
 * Each thread keeps a live set of --blocks slots and replaces random slots with
 * blocks of random size in [--min, --max]; a fraction --cross of the replaced
 * blocks is handed to the next thread, which frees them (cross-thread frees).
 * --dist log: log-uniform sizes; near4k: 80% of sizes in 3-4 KiB and the rest
 * log-uniform in [min, 3 KiB), the brief's one regression case.
 * docs/design/bench.md, "Workloads".
 */
#include <sched.h>
#include <string.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness.h"

static size_t min_size = 8, max_size = 16384, blocks = 2000;
static double cross = 0.1;
static const char *dist = "log";
static int near4k;
static jwb_ring **rings;          /* rings[i]: blocks handed to thread i */
static pthread_barrier_t end_gate;

static size_t draw(jwb_thread *t) {
  if (near4k) {
    if (jwb_below(&t->rng, 100) < 80) return 3072 + (size_t)jwb_below(&t->rng, 1025);
    return jwb_size_log_uniform(&t->rng, min_size, 3071);
  }
  return jwb_size_log_uniform(&t->rng, min_size, max_size);
}

static void drain(jwb_thread *t) {
  jwb_item it;
  while (jwb_ring_pop(rings[t->index], &it)) jwb_item_free(t, &it);
}

static void worker(jwb_thread *t) {
  jwb_item *slot = jwb_meta_alloc(blocks * sizeof(jwb_item));
  unsigned next = (t->index + 1) % jwb.threads;
  uint64_t iter = 0;
  while (!jwb_done(t)) {
    jwb_item *s = &slot[jwb_below(&t->rng, blocks)];
    /* a handed-over block is checked and freed by the next thread */
    if (!(s->p && next != t->index && jwb_chance(&t->rng, cross) && jwb_ring_push(rings[next], *s)))
      jwb_item_free(t, s);
    jwb_item_alloc(t, s, draw(t));
    if ((++iter & 31) == 0) drain(t);
  }
  for (size_t i = 0; i < blocks; i++) jwb_item_free(t, &slot[i]);
  pthread_barrier_wait(&end_gate);  /* every sender is done: drain for the last time */
  drain(t);
  jwb_meta_free(slot, blocks * sizeof(jwb_item));
}

int main(int argc, char **argv) {
  jwb.ops = 200000;
  const jwb_opt opts[] = {
      {"min", JWB_OPT_SIZE, &min_size, "smallest block size in bytes (default 8)"},
      {"max", JWB_OPT_SIZE, &max_size, "largest block size in bytes (default 16K)"},
      {"blocks", JWB_OPT_SIZE, &blocks, "live slots per thread (default 2000)"},
      {"cross", JWB_OPT_DOUBLE, &cross, "fraction of replaced blocks freed by the next thread (default 0.1)"},
      {"dist", JWB_OPT_STR, &dist, "size distribution: log or near4k (default log)"},
      {0},
  };
  jwb_init(argc, argv, "rptest-like: random sizes, random slot replacement, part of the frees cross-thread", opts);
  if (strcmp(dist, "near4k") == 0) near4k = 1;
  else if (strcmp(dist, "log") != 0) {
    fprintf(stderr, "%s: unknown --dist '%s' (log or near4k)\n", jwb.name, dist);
    return 2;
  }
  if (min_size < 1 || max_size < min_size || blocks < 1 || cross > 1) {
    fprintf(stderr, "%s: need 1 <= min <= max, blocks >= 1, cross <= 1\n", jwb.name);
    return 2;
  }
  rings = jwb_meta_alloc(jwb.threads * sizeof(jwb_ring *));
  for (unsigned i = 0; i < jwb.threads; i++) rings[i] = jwb_ring_new(4096);
  pthread_barrier_init(&end_gate, NULL, jwb.threads);
  jwb_run(jwb.threads, worker, 0);
  jwb_region_end();
  char extra[128];
  snprintf(extra, sizeof extra, "min=%zu max=%zu blocks=%zu cross=%.3f dist=%s", min_size, max_size, blocks, cross,
           dist);
  return jwb_report(extra);
}
