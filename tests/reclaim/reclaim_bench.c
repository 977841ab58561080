/* Generational workload on the backend, in virtual time, under one policy:
 * the brief's streaming figures (90% of blocks freed within about 35 ms, 1%
 * living beyond 3 s) at a steady allocation rate, with a reclaim cycle every
 * interval of virtual time. Everything is deterministic for a seed except
 * the resident memory and page faults, which are the kernel's.
 *
 * Output: one line of figures (key=value) per policy, both from the same
 * seed in separate child processes, and a line of ratios (make
 * bench-reclaim). --check makes the counts a test: lifetime must merge less
 * often with memory already given back, make fewer madvise calls and refault
 * fewer ranges than fixed-delay.
 *
 * Usage: reclaim_bench [--policy lifetime|fixed-delay (one policy only)]
 *                      [--seconds S (30)] [--rate N per ms (20)]
 *                      [--interval-ms MS (500)] [--seed N (1)] [--check]
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "os/os_mem.h"
#include "rt.h"

typedef struct obj {
  char *p;
  uint32_t granules;
  uint32_t dies; /* virtual ms */
} obj;

/* A binary heap of live objects by death time. */
static obj *heap;
static size_t nheap, capheap;

static void push(obj o) {
  if (nheap == capheap) {
    capheap = capheap ? capheap * 2 : 4096;
    heap = realloc(heap, capheap * sizeof *heap);
    if (heap == NULL) abort();
  }
  size_t i = nheap++;
  while (i > 0 && heap[(i - 1) / 2].dies > o.dies) {
    heap[i] = heap[(i - 1) / 2];
    i = (i - 1) / 2;
  }
  heap[i] = o;
}

static obj pop(void) {
  obj top = heap[0], last = heap[--nheap];
  size_t i = 0;
  for (;;) {
    size_t c = 2 * i + 1;
    if (c >= nheap) break;
    if (c + 1 < nheap && heap[c + 1].dies < heap[c].dies) c++;
    if (heap[c].dies >= last.dies) break;
    heap[i] = heap[c];
    i = c;
  }
  if (nheap) heap[i] = last;
  return top;
}

/* Lifetime in virtual ms: 90% within 35 ms, 9% up to 3 s, 1% beyond 3 s
 * (3-30 s), each log-uniform within its band. */
static uint32_t lifetime_ms(tb_rng *r) {
  unsigned u = tb_below(r, 100);
  double lo, hi;
  if (u < 90)
    lo = 1, hi = 35;
  else if (u < 99)
    lo = 35, hi = 3000;
  else
    lo = 3000, hi = 30000;
  double x = (double)tb_below(r, 1u << 30) / (double)(1u << 30);
  return (uint32_t)(lo * __builtin_pow(hi / lo, x));
}

/* Sizes: mostly slab-sized (the frontend's and midend's one-page and small
 * slabs), some larger blocks. */
static uint32_t granules(tb_rng *r) {
  unsigned u = tb_below(r, 100);
  if (u < 60) return 1;
  if (u < 85) return 2 + tb_below(r, 7);
  if (u < 97) return 8 + tb_below(r, 57);
  return 64 + tb_below(r, 193);
}

typedef struct opts {
  uint32_t seconds, rate, interval;
  uint64_t seed;
} opts;

typedef struct result {
  uint64_t allocs, merges, merges_after_release, madvise, ranges_released, bytes_released, refaults;
  long minor_faults;
  double cached_mib_avg, rss_mib_avg, rss_mib_peak;
} result;

static result run(unsigned policy, const opts *o) {
  /* Cycles are run by hand at every interval of virtual time. */
  rt_config(1, 600000, 0, policy, 0);
  tb_rng r = {o->seed};
  struct rusage ru0, ru1;
  getrusage(RUSAGE_SELF, &ru0);
  jw_reclaim_stats s0 = rt_stats();
  uint64_t rss_sum = 0, cached_sum = 0, samples = 0, rss_peak = 0, allocs = 0;
  for (uint32_t t = 0; t < o->seconds * 1000u; t++) {
    while (nheap && heap[0].dies <= t) jw_pages_free(pop().p);
    for (uint32_t k = 0; k < o->rate; k++) {
      uint32_t n = granules(&r);
      char *p = jw_pages_alloc(n, n == 1 ? JW_KIND_SMALL_SLAB : JW_KIND_MID_SLAB, &n, NULL);
      if (p == NULL) {
        fprintf(stderr, "reclaim_bench: out of memory\n");
        exit(1);
      }
      for (uint32_t g = 0; g < n; g++) p[(size_t)g * JW_GRANULE] = 1; /* touch every page */
      push((obj){p, n, t + lifetime_ms(&r)});
      allocs++;
    }
    if (t % o->interval == o->interval - 1) jw_reclaim_cycle();
    if (t % 100 == 99) {
      uint64_t rss = jw_os_resident_bytes();
      rss_sum += rss;
      rss_peak = rss > rss_peak ? rss : rss_peak;
      cached_sum += rt_bstats().pages.cached_bytes;
      samples++;
    }
  }
  getrusage(RUSAGE_SELF, &ru1);
  jw_reclaim_stats s = rt_stats();
  double n = samples ? (double)samples : 1.0;
  return (result){allocs, s.merges - s0.merges, s.merges_after_release - s0.merges_after_release,
                  s.madvise_calls - s0.madvise_calls, s.ranges_released - s0.ranges_released,
                  s.bytes_released - s0.bytes_released, s.allocs_refault - s0.allocs_refault,
                  ru1.ru_minflt - ru0.ru_minflt, (double)cached_sum / n / 1048576.0,
                  (double)rss_sum / n / 1048576.0, (double)rss_peak / 1048576.0};
}

static void print(unsigned policy, const opts *o, const result *x) {
  printf("policy=%s seconds=%u rate=%u/ms interval=%ums seed=%" PRIu64 " allocs=%" PRIu64 " merges=%" PRIu64
         " merges_before_release=%" PRIu64 " merges_after_release=%" PRIu64 " madvise=%" PRIu64
         " ranges_released=%" PRIu64 " mib_released=%.1f refaulting_allocs=%" PRIu64
         " minor_faults=%ld cached_mib_avg=%.1f rss_mib_avg=%.1f rss_mib_peak=%.1f\n",
         policy ? "fixed-delay" : "lifetime", o->seconds, o->rate, o->interval, o->seed, x->allocs, x->merges,
         x->merges - x->merges_after_release, x->merges_after_release, x->madvise, x->ranges_released,
         (double)x->bytes_released / 1048576.0, x->refaults, x->minor_faults, x->cached_mib_avg, x->rss_mib_avg,
         x->rss_mib_peak);
}

/* Each policy in a child of its own (a fresh backend from the same seed). */
static result run_child(unsigned policy, const opts *o) {
  int fds[2];
  if (pipe(fds) != 0) abort();
  pid_t pid = fork();
  if (pid == 0) {
    result x = run(policy, o);
    (void)!write(fds[1], &x, sizeof x);
    _exit(0);
  }
  close(fds[1]);
  result x;
  if (read(fds[0], &x, sizeof x) != (ssize_t)sizeof x) {
    fprintf(stderr, "reclaim_bench: the %s run failed\n", policy ? "fixed-delay" : "lifetime");
    exit(1);
  }
  close(fds[0]);
  waitpid(pid, NULL, 0);
  return x;
}

int main(int argc, char **argv) {
  int policy = -1, check = 0;
  opts o = {30, 20, 500, 1};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : "";
    if (!strcmp(argv[i], "--check"))
      check = 1;
    else if (!strcmp(argv[i], "--policy") && (!strcmp(v, "lifetime") || !strcmp(v, "fixed-delay")))
      policy = !strcmp(argv[++i], "fixed-delay");
    else if (!strcmp(argv[i], "--seconds"))
      o.seconds = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--rate"))
      o.rate = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--interval-ms"))
      o.interval = (uint32_t)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--seed"))
      o.seed = strtoull(argv[++i], NULL, 10);
    else {
      fprintf(stderr, "reclaim_bench: bad option %s (see the comment at the top of reclaim_bench.c)\n", argv[i]);
      return 2;
    }
  }
  if (o.seconds == 0 || o.rate == 0 || o.interval == 0) {
    fprintf(stderr, "reclaim_bench: --seconds, --rate and --interval-ms must be positive\n");
    return 2;
  }
  if (policy >= 0) {
    result x = run((unsigned)policy, &o);
    print((unsigned)policy, &o, &x);
    return 0;
  }
  result l = run_child(JW_POLICY_LIFETIME, &o), f = run_child(JW_POLICY_FIXED_DELAY, &o);
  print(JW_POLICY_LIFETIME, &o, &l);
  print(JW_POLICY_FIXED_DELAY, &o, &f);
  printf("lifetime/fixed-delay: merges before release %" PRIu64 "/%" PRIu64 ", merges after release %" PRIu64
         "/%" PRIu64 ", madvise calls %" PRIu64 "/%" PRIu64 ", refaulting allocations %" PRIu64 "/%" PRIu64
         ", average RSS %.1f/%.1f MiB (x%.3f)\n",
         l.merges - l.merges_after_release, f.merges - f.merges_after_release, l.merges_after_release,
         f.merges_after_release, l.madvise, f.madvise, l.refaults, f.refaults, l.rss_mib_avg, f.rss_mib_avg,
         l.rss_mib_avg / f.rss_mib_avg);
  /* Deterministic counts for a seed: lifetime merges before releasing, so it
   * merges less often with memory already given back, releases with fewer
   * system calls and refaults fewer ranges. */
  if (check && !(l.merges_after_release < f.merges_after_release && l.madvise < f.madvise && l.refaults < f.refaults)) {
    fprintf(stderr, "reclaim_bench: lifetime did not beat fixed-delay on merges after release, madvise calls and "
                    "refaulting allocations\n");
    return 1;
  }
  return 0;
}
