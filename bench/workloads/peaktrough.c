/* Peak-trough swing (brief, "Why mobile allocation differs", mismatch 2).
 *
 * All threads together keep --steady live bytes (mixed sizes from 16 B to
 * 128 KiB), churning (replace a random live block) for a hold period; then grow
 * to --factor times that, churn, fall back to the steady level by freeing the
 * blocks beyond the steady population (the burst's blocks), churn again; --cycles
 * times. Phases are marked for the launcher: "steady" (first hold), "ramp-up",
 * "peak", "ramp-down", "trough", "end". A hold lasts --hold-ms when given, else --hold-ops allocator
 * calls per thread. docs/design/bench.md, "Footprint".
 */
#include <stdio.h>

#include "harness.h"

static size_t steady_total = 32 << 20;
static uint64_t factor = 5, cycles = 3, hold_ms = 0, hold_ops = 20000;
static pthread_barrier_t gate;
static atomic_ullong deadline_ns;

typedef struct set {
  jwb_item *slot;
  size_t n, cap, bytes;
} set;

/* Allocates into slot i (i == S->n appends). */
static void put(jwb_thread *t, set *S, size_t i) {
  jwb_item_alloc(t, &S->slot[i], jwb_size_mixed(&t->rng));
  S->bytes += S->slot[i].size;
  if (i == S->n) S->n++;
}

static void drop(jwb_thread *t, set *S, size_t i) {
  S->bytes -= S->slot[i].size;
  jwb_item_free(t, &S->slot[i]);
}

/* Every thread reaches the phase, one marks it and sets the hold deadline. */
static void enter(const char *name) {
  if (pthread_barrier_wait(&gate) == PTHREAD_BARRIER_SERIAL_THREAD) {
    jwb_mark(name);
    atomic_store(&deadline_ns, jwb_now_ns() + hold_ms * 1000000ull);
  }
  pthread_barrier_wait(&gate);
}

static void hold(jwb_thread *t, set *S) {
  uint64_t until = t->ops + hold_ops, deadline = atomic_load(&deadline_ns);
  uint64_t k = 0;
  while (hold_ms ? ((k++ & 63) || jwb_now_ns() < deadline) : t->ops < until) {
    if (S->n == 0) break;
    size_t i = (size_t)jwb_below(&t->rng, S->n);
    drop(t, S, i);
    put(t, S, i);
  }
}

static void worker(jwb_thread *t) {
  size_t target = steady_total / jwb.threads;
  set S = {.cap = (target * factor) / 16 + 1024};
  S.slot = jwb_meta_alloc(S.cap * sizeof(jwb_item));
  while (S.bytes < target && S.n < S.cap) put(t, &S, S.n);
  size_t steady_n = S.n;
  enter("steady");
  hold(t, &S);
  for (uint64_t c = 0; c < cycles; c++) {
    enter("ramp-up");   /* every thread has ended its hold: the mark is exact */
    while (S.bytes < target * factor && S.n < S.cap) put(t, &S, S.n);
    enter("peak");
    hold(t, &S);
    enter("ramp-down");
    while (S.n > steady_n) drop(t, &S, --S.n);
    enter("trough");
    hold(t, &S);
  }
  enter("end");
  for (size_t i = 0; i < S.n; i++) drop(t, &S, i);
  jwb_meta_free(S.slot, S.cap * sizeof(jwb_item));
}

int main(int argc, char **argv) {
  const jwb_opt opts[] = {
      {"steady", JWB_OPT_SIZE, &steady_total, "steady live bytes, all threads together (default 32M)"},
      {"factor", JWB_OPT_U64, &factor, "peak as a multiple of steady (default 5)"},
      {"cycles", JWB_OPT_U64, &cycles, "peak-trough cycles (default 3)"},
      {"hold-ms", JWB_OPT_U64, &hold_ms, "hold time per phase, ms (default 0: use --hold-ops)"},
      {"hold-ops", JWB_OPT_U64, &hold_ops, "allocator calls per thread per hold when --hold-ms is 0 (default 20000)"},
      {0},
  };
  jwb_init(argc, argv, "peak-trough: steady, burst to 5x, back to steady, with churn; phases marked", opts);
  if (factor < 1 || cycles < 1 || steady_total < 4096 * (size_t)jwb.threads) {
    fprintf(stderr, "%s: need factor >= 1, cycles >= 1 and steady >= 4 KiB per thread\n", jwb.name);
    return 2;
  }
  pthread_barrier_init(&gate, NULL, jwb.threads);
  jwb_run(jwb.threads, worker, -1);
  jwb_region_end();
  char extra[128];
  snprintf(extra, sizeof extra, "steady=%zu factor=%llu cycles=%llu hold_ms=%llu", steady_total,
           (unsigned long long)factor, (unsigned long long)cycles,
           (unsigned long long)hold_ms);
  return jwb_report(extra);
}
