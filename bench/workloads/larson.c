/* larson-like workload (Larson and Krishnan's server simulation, as in
 * mimalloc-bench).
 *
 * --threads lineages, each with a live set of --blocks slots filled by the main
 * thread before the start (so the first frees of every thread are cross-thread).
 * A thread replaces random slots (free, then allocate a random size in
 * [--min, --max]: log-uniform, or uniform with --dist uniform as the public
 * larson draws them); after --thread-ops allocator calls it hands its live set to a
 * new thread and exits ("bleeding": blocks outlive the thread that allocated
 * them). docs/design/bench.md, "Workloads".
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

static size_t min_size = 8, max_size = 1000, blocks = 1000;
static uint64_t thread_ops = 20000;
static const char *dist = "log";
static int uniform;

static size_t draw(jwb_rng *r) {
  return uniform ? min_size + (size_t)jwb_below(r, max_size - min_size + 1) : jwb_size_log_uniform(r, min_size, max_size);
}
static jwb_item **sets;
static atomic_ullong generations;

static void worker(jwb_thread *t) {
  jwb_item *slot = sets[t->index];
  uint64_t until = t->ops + thread_ops;
  while (!jwb_done(t)) {
    if (t->ops >= until) {
      atomic_fetch_add_explicit(&generations, 1, memory_order_relaxed);
      jwb_hand_over(t, worker);
      return;
    }
    jwb_item *s = &slot[jwb_below(&t->rng, blocks)];
    jwb_item_free(t, s);
    jwb_item_alloc(t, s, draw(&t->rng));
  }
}

int main(int argc, char **argv) {
  jwb.ops = 200000;
  const jwb_opt opts[] = {
      {"min", JWB_OPT_SIZE, &min_size, "smallest block size (default 8)"},
      {"max", JWB_OPT_SIZE, &max_size, "largest block size (default 1000)"},
      {"blocks", JWB_OPT_SIZE, &blocks, "live-set slots per thread (default 1000)"},
      {"thread-ops", JWB_OPT_U64, &thread_ops, "allocator calls before a thread hands over and exits (default 20000)"},
      {"dist", JWB_OPT_STR, &dist, "size distribution: log or uniform (default log)"},
      {0},
  };
  jwb_init(argc, argv, "larson-like: server threads replaced by successors that inherit their blocks", opts);
  if (strcmp(dist, "uniform") == 0) uniform = 1;
  else if (strcmp(dist, "log") != 0) {
    fprintf(stderr, "%s: unknown --dist '%s' (log or uniform)\n", jwb.name, dist);
    return 2;
  }
  if (min_size < 1 || max_size < min_size || blocks < 1 || thread_ops < 2) {
    fprintf(stderr, "%s: need 1 <= min <= max, blocks >= 1, thread-ops >= 2\n", jwb.name);
    return 2;
  }
  unsigned T = jwb.threads;
  jwb_thread *m = jwb_main_ctx();
  sets = jwb_meta_alloc(T * sizeof(jwb_item *));
  for (unsigned i = 0; i < T; i++) {
    sets[i] = jwb_meta_alloc(blocks * sizeof(jwb_item));
    for (size_t j = 0; j < blocks; j++)
      jwb_item_alloc(m, &sets[i][j], draw(&m->rng));
  }
  jwb_run(T, worker, 0);
  jwb_region_end();
  for (unsigned i = 0; i < T; i++)
    for (size_t j = 0; j < blocks; j++) jwb_item_free(m, &sets[i][j]);
  char extra[160];
  snprintf(extra, sizeof extra, "min=%zu max=%zu blocks=%zu thread_ops=%llu thread_generations=%llu dist=%s",
           min_size, max_size, blocks, (unsigned long long)thread_ops, (unsigned long long)atomic_load(&generations),
           dist);
  return jwb_report(extra);
}
