/* Peak-trough swing (brief, "Why mobile allocation differs", mismatch 2).
 *
 * All threads together keep --steady live bytes (mixed sizes from 16 B to
 * 128 KiB), churning (replace a random live block) for a hold period; then grow
 * to --factor times that, churn, fall back to the steady level by freeing the
 * blocks beyond the steady population (the burst's blocks), churn again; --cycles
 * times. Phases are marked for the launcher: "steady" (first hold), "ramp-up",
 * "peak", "ramp-down", "trough", "end". A hold lasts --hold-ms when given, else --hold-ops allocator
 * calls per thread. docs/design/bench.md, "Footprint".
 *
 * At the end of every hold (all threads at the barrier, nothing in flight)
 * the allocator's own figures are read (harness.h, "Allocator figures") and
 * reported as as_steady_* (end of the first steady hold), as_peak_* (the
 * largest value at the end of a peak hold) and as_trough_* (the mean over the
 * ends of the trough holds; as_trough_last_* the last one).
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

static size_t steady_total = 32 << 20;
static uint64_t factor = 5, cycles = 3, hold_ms = 0, hold_ops = 20000;
static const char *sizes = "mixed";
static size_t size_lo, size_hi; /* --sizes other than mixed: log-uniform in [lo, hi] */
static pthread_barrier_t gate;
static atomic_ullong deadline_ns;

/* The allocator's figures at the end of each hold; written by the thread that
 * passes the barrier alone, read after the threads joined. */
static const char *phase = "";
static jwb_astats at_steady, at_peak, trough_sum, at_trough_last;
static unsigned n_steady, n_peak, n_trough;

static void phase_ended(void) {
  jwb_astats a;
  if (jwb_astats_read(&a) != 0) return;
  /* Levels only: the cumulative counters mean nothing per phase. */
  a.splits = a.merges = a.range_allocs = a.range_frees = JWB_UNKNOWN;
  const uint64_t *v = (const uint64_t *)&a;
  size_t nf = sizeof a / sizeof(uint64_t);
  if (strcmp(phase, "steady") == 0 && n_steady++ == 0) {
    at_steady = a;
  } else if (strcmp(phase, "peak") == 0) {
    uint64_t *p = (uint64_t *)&at_peak; /* the largest of each figure (unknown stays unknown) */
    for (size_t i = 0; i < nf; i++)
      if (n_peak == 0 || (v[i] != JWB_UNKNOWN && v[i] > p[i])) p[i] = v[i];
    n_peak++;
  } else if (strcmp(phase, "trough") == 0) {
    uint64_t *s = (uint64_t *)&trough_sum; /* summed, divided by n_trough at the end */
    for (size_t i = 0; i < nf; i++)
      s[i] = n_trough == 0 || v[i] == JWB_UNKNOWN || s[i] == JWB_UNKNOWN ? (n_trough ? JWB_UNKNOWN : v[i])
                                                                       : s[i] + v[i];
    at_trough_last = a;
    n_trough++;
  }
}

typedef struct set {
  jwb_item *slot;
  size_t n, cap, bytes;
} set;

/* Allocates into slot i (i == S->n appends). */
static void put(jwb_thread *t, set *S, size_t i) {
  jwb_item_alloc(t, &S->slot[i], size_hi ? jwb_size_log_uniform(&t->rng, size_lo, size_hi) : jwb_size_mixed(&t->rng));
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
    phase_ended();
    phase = name;
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
      {"sizes", JWB_OPT_STR, &sizes,
       "mixed (default: 70% 16-512 B, 25% 513 B-8 KiB, 5% 16-128 KiB), or one part of it: small, mid, large"},
      {0},
  };
  jwb_init(argc, argv, "peak-trough: steady, burst to 5x, back to steady, with churn; phases marked", opts);
  static const struct {
    const char *name;
    size_t lo, hi;
  } parts[] = {{"mixed", 0, 0}, {"small", 16, 512}, {"mid", 513, 8192}, {"large", 16384, 131072}};
  size_t np = sizeof parts / sizeof parts[0], k = 0;
  while (k < np && strcmp(parts[k].name, sizes) != 0) k++;
  if (k == np) {
    fprintf(stderr, "%s: --sizes must be mixed, small, mid or large, not '%s'\n", jwb.name, sizes);
    return 2;
  }
  size_lo = parts[k].lo, size_hi = parts[k].hi;
  if (factor < 1 || cycles < 1 || steady_total < 4096 * (size_t)jwb.threads) {
    fprintf(stderr, "%s: need factor >= 1, cycles >= 1 and steady >= 4 KiB per thread\n", jwb.name);
    return 2;
  }
  pthread_barrier_init(&gate, NULL, jwb.threads);
  jwb_run(jwb.threads, worker, -1);
  jwb_region_end();
  char extra[2048];
  size_t len = (size_t)snprintf(extra, sizeof extra, "steady=%zu factor=%llu cycles=%llu hold_ms=%llu sizes=%s",
                                steady_total, (unsigned long long)factor, (unsigned long long)cycles,
                                (unsigned long long)hold_ms, sizes);
  if (n_steady && n_peak && n_trough) {
    jwb_astats mean = trough_sum;
    uint64_t *m = (uint64_t *)&mean;
    for (size_t i = 0; i < sizeof mean / sizeof(uint64_t); i++)
      if (m[i] != JWB_UNKNOWN) m[i] /= n_trough;
    const struct {
      const char *prefix;
      const jwb_astats *a;
    } at[] = {{"as_steady", &at_steady}, {"as_peak", &at_peak}, {"as_trough", &mean},
              {"as_trough_last", &at_trough_last}};
    for (size_t i = 0; i < 4 && len + 2 < sizeof extra; i++) {
      extra[len++] = ' ';
      size_t n = jwb_astats_format(extra + len, sizeof extra - len, at[i].prefix, at[i].a);
      if (n == 0) len--;
      else len += n;
    }
    extra[len] = 0;
  }
  return jwb_report(extra);
}
