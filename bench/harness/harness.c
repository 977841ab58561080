/* Options, threads, the measured region and the result line of the benchmark
 * harness (harness.h; docs/design/bench.md). */
#define _GNU_SOURCE /* RUSAGE_THREAD */
#include "harness.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__has_include)
#if __has_include(<valgrind/callgrind.h>)
#include <valgrind/callgrind.h>
#define JWB_HAVE_CALLGRIND 1
#endif
#endif
#ifndef JWB_HAVE_CALLGRIND
#define CALLGRIND_ZERO_STATS
#define CALLGRIND_DUMP_STATS_AT(x)
#endif

jwb_config jwb = {.threads = 1, .ops = 100000, .seed = 1, .lat_every = 32, .check = 1, .pause_every_us = 500,
                  .pause_ms = 2.0};
atomic_int jwb_stop_flag;

#define MAX_CTX 8192

static const char *summary_text;
static int mark_fd = -1;
static uint64_t timer_median_ns, timer_p99_ns;
static jwb_thread *ctxs[MAX_CTX];
static unsigned nctx;
static atomic_uint nctx_pub; /* nctx, for other threads (jwb_ctx_peek) */
static jwb_thread *main_ctx;
static int region_open, region_closed;
static jwb_astats region_start, region_stop; /* the allocator's figures at the region's two ends */
static uint64_t measured_ns;
int jwb_phase_timed;
static atomic_int have_failure;
static char first_failure[200];

/* ------------------------------------------------------------------ random */

jwb_rng jwb_rng_for(uint64_t seed, uint64_t index, uint64_t purpose) {
  jwb_rng r = {seed * 0x9e3779b97f4a7c15ULL ^ (index + 1) * 0xd1b54a32d192ed03ULL ^ purpose << 56};
  jwb_next(&r);
  return r;
}

size_t jwb_size_mixed(jwb_rng *r) {
  uint64_t u = jwb_below(r, 100);
  if (u < 70) return jwb_size_log_uniform(r, 16, 512);
  if (u < 95) return jwb_size_log_uniform(r, 513, 8192);
  return jwb_size_log_uniform(r, 16384, 131072);
}

/* ----------------------------------------------------------------- options */

static void usage(const jwb_opt *extra, FILE *f) {
  fprintf(f, "usage: %s [options]\n%s\n\ncommon options:\n", jwb.name, summary_text ? summary_text : "");
  fprintf(f,
          "  --threads N       worker threads (default %u)\n"
          "  --duration S      duration mode: run about S seconds (workloads with rounds repeat\n"
          "                    them until S; default: a fixed amount of work)\n"
          "  --ops N           allocator calls per thread in the fixed-work mode, for workloads\n"
          "                    without their own unit of work (default %" PRIu64 ")\n"
          "  --seed N          random seed (default %" PRIu64 ")\n"
          "  --lat-every K     time one allocator call in about K (0: none; default %u)\n"
          "  --lat-slow NS     count the timed calls longer than NS ns (0: off, the default)\n"
          "  --lat-attrib NS   as --lat-slow, and count those of them that took a page fault,\n"
          "                    and those switched out without one (costs a getrusage call per\n"
          "                    timed call, two per slow one)\n"
          "  --pause MODE      inject pauses: none (default), random (a signal to a random\n"
          "                    worker, whose handler sleeps), section (the next thread to enter\n"
          "                    an allocator lock section sleeps there; needs a section hook:\n"
          "                    libjwmalloc_hooks.so, or libjwb_pause.so before a peer)\n"
          "  --pause-every US  microseconds between pauses (default %" PRIu64 ")\n"
          "  --pause-ms MS     length of one pause in ms (default %g)\n"
          "  --pause-kinds K,. section mode: only these kinds of section get pauses\n"
          "                    (default all; the kinds are listed below)\n"
          "  --no-check        do not verify block patterns\n",
          jwb.threads, jwb.ops, jwb.seed, jwb.lat_every, jwb.pause_every_us, jwb.pause_ms);
  fprintf(f, "section kinds: %s\n", jwb_pause_kind_list());
  if (extra && extra[0].name) {
    fprintf(f, "workload options:\n");
    for (const jwb_opt *o = extra; o->name; o++) fprintf(f, "  --%-16s %s\n", o->name, o->help);
  }
}

static void bad(const char *what, const char *arg) {
  fprintf(stderr, "%s: %s '%s' (see --help)\n", jwb.name, what, arg ? arg : "");
  exit(2);
}

static uint64_t parse_u64(const char *s, int allow_suffix) {
  char *end;
  errno = 0;
  if (!s || !*s || *s == '-') bad("not a non-negative integer:", s);
  unsigned long long v = strtoull(s, &end, 0);
  if (errno) bad("out of range:", s);
  uint64_t mul = 1;
  if (allow_suffix && *end) {
    if ((*end == 'k' || *end == 'K') && !end[1]) mul = 1024;
    else if ((*end == 'm' || *end == 'M') && !end[1]) mul = 1024 * 1024;
    else if ((*end == 'g' || *end == 'G') && !end[1]) mul = 1024ull * 1024 * 1024;
    else bad("bad size (use N, NK, NM or NG):", s);
  } else if (*end) {
    bad("not an integer:", s);
  }
  if (v > UINT64_MAX / mul) bad("out of range:", s);
  return v * mul;
}

static double parse_double(const char *s) {
  char *end;
  errno = 0;
  if (!s || !*s) bad("not a number:", s);
  double v = strtod(s, &end);
  if (errno || *end || v < 0) bad("not a non-negative number:", s);
  return v;
}

static void measure_timer(void) {
  static jwb_hist h;
  for (int i = 0; i < 100000; i++) {
    uint64_t a = jwb_now_ns();
    uint64_t b = jwb_now_ns();
    jwb_hist_add(&h, b - a);
  }
  timer_median_ns = jwb_hist_quantile(&h, 0.5);
  timer_p99_ns = jwb_hist_quantile(&h, 0.99);
}

/* The common options that take a value, looked up by name before the value. */
enum {
  OPT_THREADS, OPT_DURATION, OPT_OPS, OPT_SEED, OPT_LAT_ATTRIB, OPT_LAT_SLOW, OPT_PAUSE, OPT_PAUSE_EVERY,
  OPT_PAUSE_KINDS, OPT_PAUSE_MS, OPT_LAT_EVERY, NCOMMON
};
static const char *const common_names[NCOMMON] = {
    [OPT_THREADS] = "threads", [OPT_DURATION] = "duration", [OPT_OPS] = "ops", [OPT_SEED] = "seed",
    [OPT_LAT_ATTRIB] = "lat-attrib", [OPT_LAT_SLOW] = "lat-slow", [OPT_PAUSE] = "pause",
    [OPT_PAUSE_EVERY] = "pause-every", [OPT_PAUSE_KINDS] = "pause-kinds", [OPT_PAUSE_MS] = "pause-ms",
    [OPT_LAT_EVERY] = "lat-every",
};

static int common_index(const char *name) {
  for (int k = 0; k < NCOMMON; k++)
    if (strcmp(name, common_names[k]) == 0) return k;
  return -1;
}

static const jwb_opt *extra_opt(const jwb_opt *extra, const char *name) {
  for (const jwb_opt *o = extra; o && o->name; o++)
    if (strcmp(o->name, name) == 0) return o;
  return NULL;
}

void jwb_init(int argc, char **argv, const char *summary, const jwb_opt *extra) {
  const char *slash = strrchr(argv[0], '/');
  jwb.name = slash ? slash + 1 : argv[0];
  summary_text = summary;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage(extra, stdout);
      exit(0);
    }
    if (strncmp(a, "--", 2) != 0) bad("unexpected argument", a);
    const char *name = a + 2;
    if (strcmp(name, "no-check") == 0) {
      jwb.check = 0;
      continue;
    }
    /* Known before its value is looked for: a trailing unknown option is
     * called unknown, not short of a value. */
    int k = common_index(name);
    const jwb_opt *o = k < 0 ? extra_opt(extra, name) : NULL;
    if (k < 0 && !o) bad("unknown option", a);
    if (i + 1 >= argc) bad("missing value for", a);
    const char *v = argv[++i];
    if (o) {
      switch (o->kind) {
        case JWB_OPT_U64: *(uint64_t *)o->ptr = parse_u64(v, 0); break;
        case JWB_OPT_SIZE: *(size_t *)o->ptr = (size_t)parse_u64(v, 1); break;
        case JWB_OPT_DOUBLE: *(double *)o->ptr = parse_double(v); break;
        case JWB_OPT_STR: *(const char **)o->ptr = v; break;
      }
      continue;
    }
    switch (k) {
      case OPT_THREADS: {
        uint64_t n = parse_u64(v, 0);
        if (n < 1 || n > MAX_CTX) bad("threads must be 1..8192:", v);
        jwb.threads = (unsigned)n;
        break;
      }
      case OPT_DURATION: jwb.duration_s = parse_double(v); break;
      case OPT_OPS: jwb.ops = parse_u64(v, 1); break;
      case OPT_SEED: jwb.seed = parse_u64(v, 0); break;
      case OPT_LAT_ATTRIB:
      case OPT_LAT_SLOW:
        jwb.lat_slow_ns = parse_u64(v, 0);
        jwb.lat_attrib = k == OPT_LAT_ATTRIB && jwb.lat_slow_ns > 0;
        break;
      case OPT_PAUSE:
        if (strcmp(v, "none") == 0) jwb.pause_mode = JWB_PAUSE_NONE;
        else if (strcmp(v, "random") == 0) jwb.pause_mode = JWB_PAUSE_RANDOM;
        else if (strcmp(v, "section") == 0) jwb.pause_mode = JWB_PAUSE_SECTION;
        else bad("--pause must be none, random or section:", v);
        break;
      case OPT_PAUSE_EVERY:
        jwb.pause_every_us = parse_u64(v, 0);
        if (jwb.pause_every_us < 10 || jwb.pause_every_us > 60000000) bad("pause-every must be 10..60000000 us:", v);
        break;
      case OPT_PAUSE_KINDS: jwb.pause_kinds = v; break;
      case OPT_PAUSE_MS:
        jwb.pause_ms = parse_double(v);
        if (jwb.pause_ms <= 0 || jwb.pause_ms > 10000) bad("pause-ms must be above 0 and at most 10000:", v);
        break;
      case OPT_LAT_EVERY: {
        uint64_t n = parse_u64(v, 0);
        if (n > 1u << 30) bad("lat-every too large:", v);
        jwb.lat_every = (unsigned)n;
        break;
      }
    }
  }
  const char *fd = getenv("JWBENCH_MARK_FD");
  if (fd && *fd) mark_fd = atoi(fd);
  jwb_pause_setup();
  measure_timer();
  /* The allocator's one-time initialisation happens here, outside the region. */
  jwb_call_free(jwb_call_malloc(16));
  main_ctx = jwb_meta_alloc(sizeof(jwb_thread) + 2 * sizeof(jwb_hist));
  main_ctx->hist = (jwb_hist *)(main_ctx + 1);
  main_ctx->floor_hist = main_ctx->hist + 1;
  main_ctx->index = MAX_CTX;
  main_ctx->rng = jwb_rng_for(jwb.seed, MAX_CTX, 0);
  main_ctx->lat_countdown = UINT32_MAX;
}

/* ----------------------------------------------------------------- threads */

jwb_thread *jwb_main_ctx(void) { return main_ctx; }

jwb_thread *jwb_ctx_peek(unsigned index) {
  /* acquire: pairs with the release that publishes a new context */
  return index < atomic_load_explicit(&nctx_pub, memory_order_acquire) ? ctxs[index] : NULL;
}

jwb_thread *jwb_ctx(unsigned index) {
  if (index >= MAX_CTX) {
    fprintf(stderr, "%s: more than %d thread contexts\n", jwb.name, MAX_CTX);
    exit(2);
  }
  while (nctx <= index) {
    jwb_thread *t = jwb_meta_alloc(sizeof(jwb_thread) + 2 * sizeof(jwb_hist));
    t->hist = (jwb_hist *)(t + 1);
    t->floor_hist = t->hist + 1;
    t->index = nctx;
    t->rng = jwb_rng_for(jwb.seed, nctx, 0);
    t->lat_rng = jwb_rng_for(jwb.seed, nctx, 1);
    t->lat_countdown = jwb.lat_every ? 1 + (uint32_t)jwb_below(&t->lat_rng, 2ull * jwb.lat_every - 1) : UINT32_MAX;
    ctxs[nctx++] = t;
    atomic_store_explicit(&nctx_pub, nctx, memory_order_release); /* see jwb_ctx_peek */
  }
  return ctxs[index];
}

uint64_t jwb_attrib_read(void) {
  struct rusage r;
  if (getrusage(RUSAGE_THREAD, &r) != 0) return 0;
  return (uint64_t)(r.ru_minflt + r.ru_majflt) << 32 | (uint32_t)(r.ru_nvcsw + r.ru_nivcsw);
}

/* A call that took a fault or was switched out is the kernel's time, not
 * the allocator's code; the rest of the slow calls are the allocator's slow
 * paths or what the machine adds (docs/design/bench.md, "Latency"). */
static void attrib_slow(jwb_thread *t, uint64_t before) {
  uint64_t after = jwb_attrib_read();
  t->slow++;
  if ((after >> 32) != (before >> 32)) t->slow_fault++;
  else if ((uint32_t)after != (uint32_t)before) t->slow_cs++; /* switched out, no fault */
}

void jwb_lat_sample(jwb_thread *t, uint64_t t0, uint64_t ns, uint64_t before) {
  if (jwb.lat_slow_ns && ns > jwb.lat_slow_ns) {
    /* A call that this thread's own injected pause made slow is not a cost the
     * allocator put on other threads (docs/design/bench.md, "Preemption
     * injection"). */
    if (jwb_pause_own(t, t0, t0 + ns)) {
      t->slow_own++;
    } else {
      if (jwb.lat_attrib) attrib_slow(t, before);
      else t->slow++;
      jwb_pause_slow_other(t0, t0 + ns);
    }
  }
  if (!jwb.lat_every) {
    t->lat_countdown = UINT32_MAX;
    return;
  }
  jwb_hist_add(t->hist, ns);
  /* The floor: an empty call timed the same way, at once, by the same thread
   * (docs/design/bench.md, "Latency"). Its tail is what the machine adds to any
   * short call (interrupts, preemption, timer reads): an allocator's percentile
   * at its floor says nothing more about the allocator. */
  uint64_t f0 = jwb_now_ns();
  jwb_null_call();
  uint64_t floor_ns = jwb_now_ns() - f0;
  jwb_hist_add(t->floor_hist, floor_ns);
  if (jwb.lat_slow_ns && floor_ns > jwb.lat_slow_ns) {
    if (jwb_pause_own(t, f0, f0 + floor_ns)) t->floor_slow_own++;
    else t->floor_slow++;
  }
  t->lat_countdown = 1 + (uint32_t)jwb_below(&t->lat_rng, 2ull * jwb.lat_every - 1);
  if (jwb.pause_mode) jwb_pause_tick(f0 + floor_ns);
}

void jwb_oom(jwb_thread *t, size_t n) {
  (void)t;
  fprintf(stderr, "%s: the allocator returned NULL for %zu bytes\n", jwb.name, n);
  exit(4);
}

void jwb_fail(jwb_thread *t, const char *what) {
  t->check_failures++;
  if (atomic_exchange(&have_failure, 1) == 0) snprintf(first_failure, sizeof first_failure, "%s", what);
}

/* One record per thread started: a thread that hands over writes its
 * successor's record and id into its own record, and the main thread reads
 * them only after joining it (the join orders them). A record shared by the
 * generations of a lineage would not do: a successor that hands over before
 * its creator's pthread_create has returned overwrites the creator's `next`,
 * and the main thread then stops following the lineage while a thread of it
 * still runs (and frees the live set under it). */
typedef struct start_arg {
  jwb_thread *t;
  jwb_thread_fn fn;
  pthread_barrier_t *gate;
  struct start_arg *succ;    /* set by jwb_hand_over: the successor's record (NULL: none) */
  pthread_t next;            /* set by jwb_hand_over: the successor's id */
} start_arg;
/* Records, a bump pool reset by each jwb_run (its threads are all joined by
 * the next): mmap'd once, so that a hand-over makes no system call of its own. */
#define START_POOL 65536
static start_arg *start_pool;
static atomic_uint start_used;
static atomic_uint finished;
static __thread start_arg *my_start; /* the running thread's record */

static start_arg *start_new(jwb_thread *t, jwb_thread_fn fn, pthread_barrier_t *gate) {
  unsigned i = atomic_fetch_add_explicit(&start_used, 1, memory_order_relaxed);
  start_arg *a = i < START_POOL ? &start_pool[i] : jwb_meta_alloc(sizeof *a); /* beyond: kept to the end */
  *a = (start_arg){.t = t, .fn = fn, .gate = gate};
  return a;
}

/* Every workload thread starts here: callgrind attribution recognises the
 * workload's own threads by this symbol on their stack. */
__attribute__((noinline, used)) void *jwb_thread_entry(void *p) {
  start_arg *a = p;
  jwb_thread *t = a->t;
  my_start = a;
  jwb_pause_thread_begin(t);
  if (a->gate) pthread_barrier_wait(a->gate);
  a->fn(t);
  jwb_pause_thread_end(t);
  if (!a->succ) atomic_fetch_add_explicit(&finished, 1, memory_order_release);
  return NULL;
}

static void start_thread(pthread_t *th, start_arg *a) {
  int e = pthread_create(th, NULL, jwb_thread_entry, a);
  if (e) {
    fprintf(stderr, "%s: cannot create a thread: %s\n", jwb.name, strerror(e));
    exit(2);
  }
}

void jwb_hand_over(jwb_thread *t, jwb_thread_fn fn) {
  start_arg *a = my_start;
  a->succ = start_new(t, fn, NULL);
  start_thread(&a->next, a->succ); /* read by the main thread after it joins this one */
}

void jwb_run(unsigned n, jwb_thread_fn fn, double duration_s) {
  if (!start_pool) start_pool = jwb_meta_alloc(START_POOL * sizeof(start_arg));
  atomic_store_explicit(&start_used, 0, memory_order_relaxed); /* the last run's threads are all joined */
  if (n == 0) n = 1;
  double dur = duration_s > 0 ? duration_s : duration_s == 0 ? jwb.duration_s : 0;
  jwb_phase_timed = dur > 0;
  atomic_store(&jwb_stop_flag, 0);
  atomic_store(&finished, 0);
  pthread_barrier_t gate;
  pthread_barrier_init(&gate, NULL, n + 1);
  pthread_t *th = jwb_meta_alloc(n * sizeof(pthread_t));
  start_arg **first = jwb_meta_alloc(n * sizeof(start_arg *));
  for (unsigned i = 0; i < n; i++) {
    jwb_thread *t = jwb_ctx(i);
    t->index = i;
    first[i] = start_new(t, fn, &gate);
    start_thread(&th[i], first[i]);
  }
  if (!region_open) {
    region_open = 1;
    jwb_astats_read(&region_start); /* before the zeroing: not counted as workload instructions */
    CALLGRIND_ZERO_STATS;
  }
  uint64_t t0 = jwb_now_ns();
  pthread_barrier_wait(&gate);
  if (jwb_phase_timed) {
    uint64_t deadline = t0 + (uint64_t)(dur * 1e9);
    while (atomic_load_explicit(&finished, memory_order_acquire) < n) {
      uint64_t now = jwb_now_ns();
      if (now >= deadline) break;
      uint64_t left = deadline - now;
      jwb_sleep_ms(left > 10000000 ? 10.0 : (double)left / 1e6);
    }
    atomic_store_explicit(&jwb_stop_flag, 1, memory_order_relaxed);
  }
  /* Each lineage to its end: join a thread, then read its own record. */
  for (unsigned i = 0; i < n; i++) {
    pthread_t cur = th[i];
    for (start_arg *a = first[i];; a = a->succ) {
      pthread_join(cur, NULL);
      if (!a->succ) break;
      cur = a->next;
    }
  }
  measured_ns += jwb_now_ns() - t0;
  pthread_barrier_destroy(&gate);
  jwb_meta_free(first, n * sizeof(start_arg *));
  jwb_meta_free(th, n * sizeof(pthread_t));
}

double jwb_elapsed(void) { return (double)measured_ns / 1e9; }

void jwb_region_end(void) {
  if (region_closed) return;
  region_closed = 1;
  CALLGRIND_DUMP_STATS_AT("jwb-region");
  jwb_astats_read(&region_stop);
}

void jwb_mark(const char *name) {
  if (mark_fd < 0) return;
  char line[128];
  int len = snprintf(line, sizeof line, "%" PRIu64 " %s\n", jwb_now_ns(), name);
  if (len > 0 && write(mark_fd, line, (size_t)len) < 0) mark_fd = -1;
}

void jwb_sleep_ms(double ms) {
  if (ms <= 0) return;
  struct timespec ts = {(time_t)(ms / 1000), (long)((ms - (double)(time_t)(ms / 1000) * 1000) * 1e6)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ------------------------------------------------------------------ report */

int jwb_report(const char *extra) {
  jwb_region_end();
  static jwb_hist all, floor;
  uint64_t ops = 0, allocs = 0, frees = 0, reallocs = 0, bytes = 0, failures = main_ctx->check_failures;
  uint64_t slow = 0, slow_fault = 0, slow_cs = 0, floor_slow = 0, slow_own = 0, floor_slow_own = 0;
  for (unsigned i = 0; i < nctx; i++) {
    jwb_thread *t = ctxs[i];
    jwb_hist_merge(&all, t->hist);
    jwb_hist_merge(&floor, t->floor_hist);
    ops += t->ops;
    allocs += t->allocs;
    frees += t->frees;
    reallocs += t->reallocs;
    bytes += t->bytes;
    failures += t->check_failures;
    slow += t->slow;
    slow_fault += t->slow_fault;
    slow_cs += t->slow_cs;
    floor_slow += t->floor_slow;
    slow_own += t->slow_own;
    floor_slow_own += t->floor_slow_own;
  }
  double secs = jwb_elapsed();
  printf("jwbench prog=%s threads=%u seed=%" PRIu64 " mode=%s elapsed_s=%.6f ops=%" PRIu64 " allocs=%" PRIu64
         " frees=%" PRIu64 " reallocs=%" PRIu64 " bytes=%" PRIu64 " ops_per_s=%.1f",
         jwb.name, jwb.threads, jwb.seed, jwb.duration_s > 0 ? "duration" : "ops", secs, ops, allocs, frees,
         reallocs, bytes, secs > 0 ? (double)ops / secs : 0.0);
  printf(" lat_every=%u lat_samples=%" PRIu64 " lat_p50_ns=%" PRIu64 " lat_p90_ns=%" PRIu64 " lat_p99_ns=%" PRIu64
         " lat_p999_ns=%" PRIu64 " lat_p9999_ns=%" PRIu64 " lat_max_ns=%" PRIu64 " timer_ns_median=%" PRIu64
         " timer_ns_p99=%" PRIu64,
         jwb.lat_every, all.count, jwb_hist_quantile(&all, 0.5), jwb_hist_quantile(&all, 0.9),
         jwb_hist_quantile(&all, 0.99), jwb_hist_quantile(&all, 0.999), jwb_hist_quantile(&all, 0.9999), all.max,
         timer_median_ns, timer_p99_ns);
  printf(" floor_p50_ns=%" PRIu64 " floor_p99_ns=%" PRIu64 " floor_p999_ns=%" PRIu64 " floor_p9999_ns=%" PRIu64
         " floor_max_ns=%" PRIu64,
         jwb_hist_quantile(&floor, 0.5), jwb_hist_quantile(&floor, 0.99), jwb_hist_quantile(&floor, 0.999),
         jwb_hist_quantile(&floor, 0.9999), floor.max);
  if (jwb.lat_slow_ns)
    printf(" lat_slow_ns=%" PRIu64 " lat_slow=%" PRIu64 " floor_slow=%" PRIu64 " lat_slow_own=%" PRIu64
           " floor_slow_own=%" PRIu64,
           jwb.lat_slow_ns, slow, floor_slow, slow_own, floor_slow_own);
  if (jwb.lat_attrib)
    printf(" lat_attrib_ns=%" PRIu64 " lat_slow_fault=%" PRIu64 " lat_slow_cs=%" PRIu64, jwb.lat_slow_ns,
           slow_fault, slow_cs);
  char pause[768];
  if (jwb_pause_format(pause, sizeof pause) > 0) printf(" %s", pause);
  if (extra && *extra) printf(" %s", extra);
  /* The allocator's own figures: levels at the region's end, counters over
   * the region (docs/design/bench.md, "Allocator figures"). */
  jwb_astats d;
  char as[512];
  jwb_astats_delta(&d, &region_stop, &region_start);
  if (jwb_astats_format(as, sizeof as, "as", &d) > 0) printf(" astats=%s %s", jwb_astats_source(), as);
  printf(" check=%s\n", failures ? "fail" : "ok");
  fflush(stdout);
  if (failures) {
    fprintf(stderr, "%s: %" PRIu64 " block check failure(s); first: %s\n", jwb.name, failures, first_failure);
    return 3;
  }
  return 0;
}
