/* mleak-like workload (mimalloc-bench's mleak: terminated threads must not leak).
 *
 * --rounds rounds of --threads short-lived threads. Each thread replaces random
 * slots of a live set (--blocks slots, sizes log-uniform in [--min, --max]) for
 * --steps steps, frees most of its live set, leaves a fraction --keep of it as
 * orphans and exits. Thread i of the next round frees the orphans of thread
 * (i+1) mod T of the previous round: frees of blocks whose allocating thread has
 * exited. A mark "round" after every round lets the launcher read RSS per round;
 * the growth from the second round to the last is memory that exited threads
 * left behind. docs/design/bench.md, "Footprint".
 */
#include <stdio.h>

#include "harness.h"

static uint64_t rounds = 20, steps = 20000;
static size_t blocks = 1000, min_size = 16, max_size = 4096;
static double keep = 0.05;
static jwb_item **orphans;        /* orphans[i]: thread i's leftovers, `blocks` entries */
static jwb_item **next_orphans;

static void worker(jwb_thread *t) {
  unsigned T = jwb.threads;
  jwb_item *prev = orphans[(t->index + 1) % T];
  for (size_t i = 0; i < blocks; i++) jwb_item_free(t, &prev[i]);
  jwb_item *slot = next_orphans[t->index];
  for (uint64_t k = 0; k < steps; k++) {
    jwb_item *s = &slot[jwb_below(&t->rng, blocks)];
    jwb_item_free(t, s);
    jwb_item_alloc(t, s, jwb_size_log_uniform(&t->rng, min_size, max_size));
  }
  for (size_t i = 0; i < blocks; i++)
    if (slot[i].p && !jwb_chance(&t->rng, keep)) jwb_item_free(t, &slot[i]);
}

int main(int argc, char **argv) {
  const jwb_opt opts[] = {
      {"rounds", JWB_OPT_U64, &rounds, "rounds of threads (default 20)"},
      {"steps", JWB_OPT_U64, &steps, "slot replacements per thread per round (default 20000)"},
      {"blocks", JWB_OPT_SIZE, &blocks, "live-set slots per thread (default 1000)"},
      {"min", JWB_OPT_SIZE, &min_size, "smallest block size (default 16)"},
      {"max", JWB_OPT_SIZE, &max_size, "largest block size (default 4K)"},
      {"keep", JWB_OPT_DOUBLE, &keep, "fraction of the live set left to the next round (default 0.05)"},
      {0},
  };
  jwb_init(argc, argv, "mleak-like: rounds of short-lived threads; RSS must not grow", opts);
  if (rounds < 1 || steps < 1 || blocks < 1 || min_size < 1 || max_size < min_size || keep > 1) {
    fprintf(stderr, "%s: need rounds, steps, blocks >= 1, 1 <= min <= max, keep <= 1\n", jwb.name);
    return 2;
  }
  unsigned T = jwb.threads;
  orphans = jwb_meta_alloc(T * sizeof(jwb_item *));
  next_orphans = jwb_meta_alloc(T * sizeof(jwb_item *));
  for (unsigned i = 0; i < T; i++) {
    orphans[i] = jwb_meta_alloc(blocks * sizeof(jwb_item));
    next_orphans[i] = jwb_meta_alloc(blocks * sizeof(jwb_item));
  }
  uint64_t done = 0;
  while (done < rounds || (jwb.duration_s > 0 && jwb_elapsed() < jwb.duration_s)) {
    jwb_run(T, worker, -1);
    jwb_item **swap = orphans;
    orphans = next_orphans;
    next_orphans = swap;
    done++;
    jwb_mark("round");
  }
  jwb_region_end();
  jwb_thread *m = jwb_main_ctx();
  for (unsigned i = 0; i < T; i++)
    for (size_t j = 0; j < blocks; j++) jwb_item_free(m, &orphans[i][j]);
  char extra[96];
  snprintf(extra, sizeof extra, "rounds=%llu steps=%llu blocks=%zu keep=%.3f", (unsigned long long)done,
           (unsigned long long)steps, blocks, keep);
  return jwb_report(extra);
}
