/* Memory reformatting (brief, "Why mobile allocation differs", mismatch 1).
 *
 * Each thread keeps its live bytes at --live: while above it frees a random
 * live block, otherwise it allocates. Every --phase-ops allocator calls a new
 * dominant size is drawn from the classes 16, 24, 32, 48, ... (2^k and
 * 1.5 x 2^k) up to --max; 90% of allocations take the dominant size, 10% a
 * random class. So the dominant size class changes every few milliseconds
 * while the live bytes stay constant: reusing freed memory for another class is
 * what an allocator must do well here. Reports the mean phase length in ms.
 * docs/design/bench.md, "Workloads".
 */
#include <stdio.h>

#include "harness.h"

static size_t live_target = 1 << 20, max_size = 65536, min_size = 16;
static uint64_t phase_ops = 20000;
static size_t classes[64];
static unsigned nclasses;
static atomic_ullong phases_total;

typedef struct live {
  jwb_item *slot;
  size_t n, cap, bytes;
} live;

static void worker(jwb_thread *t) {
  live L = {.cap = live_target / min_size + 64};
  L.slot = jwb_meta_alloc(L.cap * sizeof(jwb_item));
  size_t dominant = classes[0];
  uint64_t next_phase = t->ops, phases = 0;
  while (!jwb_done(t)) {
    if (t->ops >= next_phase) {
      dominant = classes[jwb_below(&t->rng, nclasses)];
      next_phase = t->ops + phase_ops;
      phases++;
    }
    if (L.bytes > live_target || L.n == L.cap) {
      size_t i = (size_t)jwb_below(&t->rng, L.n);
      jwb_item it = L.slot[i];
      L.slot[i] = L.slot[--L.n];
      L.bytes -= it.size;
      jwb_item_free(t, &it);
    } else {
      jwb_item *it = &L.slot[L.n++];
      jwb_item_alloc(t, it, jwb_chance(&t->rng, 0.9) ? dominant : classes[jwb_below(&t->rng, nclasses)]);
      L.bytes += it->size;
    }
  }
  for (size_t i = 0; i < L.n; i++) jwb_item_free(t, &L.slot[i]);
  atomic_fetch_add_explicit(&phases_total, phases, memory_order_relaxed);
  jwb_meta_free(L.slot, L.cap * sizeof(jwb_item));
}

int main(int argc, char **argv) {
  jwb.ops = 200000;
  const jwb_opt opts[] = {
      {"live", JWB_OPT_SIZE, &live_target, "live bytes per thread (default 1M)"},
      {"phase-ops", JWB_OPT_U64, &phase_ops, "allocator calls per phase (default 20000)"},
      {"min", JWB_OPT_SIZE, &min_size, "smallest class (default 16)"},
      {"max", JWB_OPT_SIZE, &max_size, "largest class (default 64K)"},
      {0},
  };
  jwb_init(argc, argv, "reformatting: the dominant size class changes every phase, live bytes constant", opts);
  if (min_size < 8 || max_size < min_size || phase_ops < 1 || live_target < max_size) {
    fprintf(stderr, "%s: need 8 <= min <= max <= live and phase-ops >= 1\n", jwb.name);
    return 2;
  }
  for (size_t c = 8; c <= max_size && nclasses < 64; c *= 2) {
    if (c >= min_size) classes[nclasses++] = c;
    if (c + c / 2 >= min_size && c + c / 2 <= max_size && nclasses < 64) classes[nclasses++] = c + c / 2;
  }
  jwb_run(jwb.threads, worker, 0);
  jwb_region_end();
  uint64_t phases = atomic_load(&phases_total);
  double phase_ms = phases ? jwb_elapsed() * 1e3 * jwb.threads / (double)phases : 0;
  char extra[128];
  snprintf(extra, sizeof extra, "live=%zu phase_ops=%llu classes=%u phases=%llu phase_ms=%.3f", live_target,
           (unsigned long long)phase_ops, nclasses, (unsigned long long)phases, phase_ms);
  return jwb_report(extra);
}
