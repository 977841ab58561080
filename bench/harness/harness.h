/* Benchmark harness shared by every workload of the evaluation suite
 * (docs/design/bench.md; brief "Results the paper reports").
 *
 * A workload sets its defaults in `jwb`, calls jwb_init() with its own options,
 * runs its threads with jwb_run() (one or more phases), closes the measured
 * region with jwb_region_end(), tears down, and returns jwb_report().
 *
 * Every allocator call goes through jwb_malloc()/jwb_free()/... below, which
 * count operations, time a random sample of them and call the allocator through
 * the noinline jwb_call_* functions (calls.c) that callgrind attribution keys on.
 * Bookkeeping memory comes from jwb_meta_alloc() (mmap), never from the
 * allocator under test. Thread-safety: a jwb_thread is used by one thread at a
 * time; everything else is set up by the main thread before jwb_run().
 */
#ifndef JWB_HARNESS_H
#define JWB_HARNESS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* ---------------------------------------------------------------- random */

/* wyrand: one 64-bit state word per stream, a Weyl step and one 64x64->128
 * multiply (six instructions: the harness draws several numbers per
 * allocator call, docs/design/bench.md, "Harness cost"); streams of
 * different seeds are independent enough for workload generation. */
typedef struct jwb_rng {
  uint64_t s;
} jwb_rng;

static inline uint64_t jwb_next(jwb_rng *r) {
  uint64_t z = (r->s += 0xa0761d6478bd642fULL);
  unsigned __int128 m = (unsigned __int128)z * (z ^ 0xe7037ed1a0b428dbULL);
  return (uint64_t)(m >> 64) ^ (uint64_t)m;
}
/* Uniform in [0, n) (n > 0), by multiply-shift. */
static inline uint64_t jwb_below(jwb_rng *r, uint64_t n) {
  return (uint64_t)(((unsigned __int128)jwb_next(r) * n) >> 64);
}
/* Uniform in [0, 1). */
static inline double jwb_unit(jwb_rng *r) { return (double)(jwb_next(r) >> 11) * 0x1p-53; }
static inline int jwb_chance(jwb_rng *r, double p) { return jwb_unit(r) < p; }
/* A stream seeded from (seed, index): used per thread and per purpose. */
jwb_rng jwb_rng_for(uint64_t seed, uint64_t index, uint64_t purpose);
/* Log-uniform size in [min, max] bytes: the power of two is uniform, then the
 * size is uniform inside it. Small sizes dominate by count, as in programs.
 * One draw for both: its high half picks the power of two, its low half the
 * size inside it. Inline: called for nearly every block. */
static inline size_t jwb_size_log_uniform(jwb_rng *r, size_t min, size_t max) {
  if (min < 1) min = 1;
  if (max <= min) return min;
  unsigned lo = 63u - (unsigned)__builtin_clzll(min);
  unsigned hi = 63u - (unsigned)__builtin_clzll(max);
  uint64_t x = jwb_next(r);
  unsigned e = lo + (unsigned)(((x >> 32) * (uint64_t)(hi - lo + 1)) >> 32);
  size_t base = (size_t)1 << e;
  size_t s = base + (size_t)(((unsigned __int128)(uint32_t)x * base) >> 32);
  return s < min ? min : s > max ? max : s;
}
/* Mixture used by the footprint workloads: 70% 16 B-512 B, 25% 512 B-8 KiB,
 * 5% 16 KiB-128 KiB (all log-uniform), so every tier of an allocator is used. */
size_t jwb_size_mixed(jwb_rng *r);
/* A 64-bit tag for (thread, counter): an odd multiplier is a bijection, so
 * tags of distinct pairs (thread < 2^24, counter < 2^40) differ except, at
 * most, in the lowest bit; four instructions, since every block gets one
 * (docs/design/bench.md, "Harness cost"). */
static inline uint64_t jwb_tag(uint64_t thread, uint64_t counter) {
  return (((thread << 40) ^ counter) * 0x9e3779b97f4a7c15ULL) | 1;
}

/* ---------------------------------------------------------------- latency */

/* Log-linear histogram of nanoseconds: exact below 64, then 32 sub-buckets per
 * power of two up to 2^40 ns (3% relative error). */
#define JWB_HIST_LINEAR 64
#define JWB_HIST_SUB 32
#define JWB_HIST_BUCKETS (JWB_HIST_LINEAR + (40 - 6) * JWB_HIST_SUB)
typedef struct jwb_hist {
  uint64_t count, max;
  uint64_t b[JWB_HIST_BUCKETS];
} jwb_hist;
void jwb_hist_add(jwb_hist *h, uint64_t ns);
void jwb_hist_merge(jwb_hist *into, const jwb_hist *from);
/* The value at quantile q (0..1) of h: the upper edge of its bucket. */
uint64_t jwb_hist_quantile(const jwb_hist *h, double q);

static inline uint64_t jwb_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* ---------------------------------------------------------------- threads */

typedef struct jwb_thread {
  unsigned index;              /* 0..threads-1 in the phase that runs it */
  jwb_rng rng;                 /* the workload's stream */
  jwb_rng lat_rng;             /* sampling stream, separate so sampling never changes requests */
  uint32_t lat_countdown;      /* calls until the next timed one */
  uint64_t ops;                /* allocator calls made by this thread */
  uint64_t allocs, frees, reallocs;
  uint64_t bytes;              /* bytes requested: with the counts, the fingerprint of the requests */
  uint64_t check_failures;
  /* --lat-slow / --lat-attrib: timed calls above the threshold; of them
   * (--lat-attrib), those that took a page fault of this thread, and those
   * switched out without one (jwb_lat_sample). slow_own: those that overlapped
   * this thread's own injected pause, not counted in slow (--pause) */
  uint64_t slow, slow_fault, slow_cs, floor_slow, slow_own, floor_slow_own;
  uint64_t counter;            /* for tags */
  jwb_hist *hist;
  jwb_hist *floor_hist;        /* an empty call timed right after each timed call (jwb_lat_sample) */
  void *user;                  /* the workload's per-thread state */
  /* --pause (pause.c): the kernel id of the thread running this context (0:
   * none), and its last pause's window, written by that thread only */
  atomic_int tid;
  _Atomic uint64_t pause_t0, pause_t1;
  uint64_t pauses;
} jwb_thread;

typedef void (*jwb_thread_fn)(jwb_thread *t);

/* Common options; a workload may change the defaults before jwb_init(). */
typedef struct jwb_config {
  const char *name;            /* program name, set by jwb_init */
  unsigned threads;            /* --threads */
  double duration_s;           /* --duration: > 0 selects duration mode */
  uint64_t ops;                /* --ops: allocator calls per thread in ops mode */
  uint64_t seed;               /* --seed */
  unsigned lat_every;          /* --lat-every: mean gap between timed calls, 0 = none */
  uint64_t lat_slow_ns;        /* --lat-slow or --lat-attrib: slow-call threshold in ns, 0 = off */
  int lat_attrib;              /* --lat-attrib: slow calls are also attributed (faults, switches) */
  int check;                   /* 0 with --no-check */
  int pause_mode;              /* --pause: JWB_PAUSE_* */
  uint64_t pause_every_us;     /* --pause-every: microseconds between injected pauses */
  double pause_ms;             /* --pause-ms: length of one pause */
  const char *pause_kinds;     /* --pause-kinds: kinds of section that get pauses (NULL: all) */
} jwb_config;
enum { JWB_PAUSE_NONE, JWB_PAUSE_RANDOM, JWB_PAUSE_SECTION };
extern jwb_config jwb;

typedef enum { JWB_OPT_U64, JWB_OPT_SIZE, JWB_OPT_DOUBLE, JWB_OPT_STR } jwb_opt_kind;
typedef struct jwb_opt {
  const char *name;            /* without the leading "--" */
  jwb_opt_kind kind;
  void *ptr;                   /* uint64_t*, size_t*, double* or const char** */
  const char *help;
} jwb_opt;

/* Parses argv (common options plus `extra`, terminated by a {0} entry); on bad
 * input prints one line and exits 2; --help prints the options and exits 0. */
void jwb_init(int argc, char **argv, const char *summary, const jwb_opt *extra);

/* Contexts 0..n-1 (created on first use, kept across phases so counters and
 * histograms accumulate). */
jwb_thread *jwb_ctx(unsigned index);
/* Context index if it exists, else NULL; from any thread (pause.c). */
jwb_thread *jwb_ctx_peek(unsigned index);
/* The main thread's context, for set-up and tear-down calls (not timed). */
jwb_thread *jwb_main_ctx(void);

/* Runs fn on n threads: all are created, then released together; in duration
 * mode the main thread sets the stop flag after --duration seconds (or
 * `duration_s` if > 0); returns when all have finished. The first call opens
 * the measured region (callgrind statistics are zeroed). Wall time of each
 * phase is added to the measured time. */
void jwb_run(unsigned n, jwb_thread_fn fn, double duration_s);
/* True when the thread should stop: stop flag (duration mode) or its op budget
 * (ops mode). Inline: workloads ask once per step. */
extern atomic_int jwb_stop_flag;
extern int jwb_phase_timed;      /* harness-private: the phase runs for a duration */
static inline int jwb_done(jwb_thread *t) {
  if (jwb_phase_timed) return atomic_load_explicit(&jwb_stop_flag, memory_order_relaxed);
  return t->ops >= jwb.ops;
}
/* Ends the calling thread's turn: fn continues on a new thread with the same
 * context, and the caller must return at once (larson's thread replacement). */
void jwb_hand_over(jwb_thread *t, jwb_thread_fn fn);
/* Closes the measured region: dumps callgrind statistics. Call once, after the
 * last phase and before tear-down. */
void jwb_region_end(void);
/* Prints the one result line (plus `extra`, "key=value ..." or NULL) and
 * returns the exit status: 0, or 3 when a block check failed. */
int jwb_report(const char *extra);
/* Measured time so far (sum of phases), seconds. */
double jwb_elapsed(void);

/* Writes "<monotonic ns> <name>" to the launcher's phase pipe, if any. */
void jwb_mark(const char *name);
void jwb_sleep_ms(double ms);

/* ---------------------------------------------------------------- allocator figures */

/* The allocator's own figures, read through its introspection interface
 * (allocstats.c; docs/design/bench.md, "Allocator figures"). Bytes, or
 * counts; JWB_UNKNOWN where the allocator does not say. Each allocator's own
 * definitions:
 *   jwmalloc: mapped = every byte it has mapped; metadata = the backend's
 *     per-granule records and root map leaves; backed = mapped minus free
 *     ranges whose pages were released; kept = entirely free roots it keeps
 *     on purpose (kept_metadata: their records); live = granules of live
 *     backend ranges (slabs whole) and direct mappings; splits, merges,
 *     range_allocs, range_frees = backend operations.
 *   jemalloc: mapped = stats.mapped (active extents), metadata =
 *     stats.metadata, backed = stats.resident, retained = stats.retained,
 *     live = stats.active.
 *   mimalloc: backed = committed bytes (mi_process_info).
 * Not thread-safe against itself: call from one thread (the main thread, or
 * the one thread that passes a barrier). Calls the allocator's statistics
 * function, which may take its locks. */
#define JWB_UNKNOWN UINT64_MAX
typedef struct jwb_astats {
  uint64_t mapped, metadata, backed, retained, kept, kept_metadata, live;
  uint64_t splits, merges, range_allocs, range_frees; /* counters: keep last, in this order */
} jwb_astats;
/* "jwmalloc", "jemalloc", "mimalloc", or "none". */
const char *jwb_astats_source(void);
/* 0, or -1 when the allocator offers no figures (all JWB_UNKNOWN). */
int jwb_astats_read(jwb_astats *a);
/* "PREFIX_mapped=N PREFIX_meta=N ..." for the known fields; returns the length. */
size_t jwb_astats_format(char *buf, size_t cap, const char *prefix, const jwb_astats *a);
/* end's levels, and the counters as end - start. */
void jwb_astats_delta(jwb_astats *out, const jwb_astats *end, const jwb_astats *start);

/* ---------------------------------------------------------------- pauses */

/* Preemption injection (pause.c; docs/design/bench.md, "Preemption
 * injection"). --pause random: every --pause-every us one running worker,
 * chosen at random, gets a signal whose handler sleeps --pause-ms; --pause
 * section: the next thread that enters one of the allocator's lock-holding
 * sections (a section hook: jwmalloc's test-hooks library, or the pause shim
 * before a peer) sleeps there instead. Hooks found are installed in every
 * mode, so the sections reached are counted without pauses too. */
/* From jwb_init, after the options: installs the hooks and the handler;
 * exits 2 with a message when --pause section finds no hook. */
void jwb_pause_setup(void);
/* The calling thread starts / stops running context t. */
void jwb_pause_thread_begin(jwb_thread *t);
void jwb_pause_thread_end(jwb_thread *t);
/* 1 when t's last pause overlapped [t0, t1] (ns, monotonic): t's own pause. */
int jwb_pause_own(jwb_thread *t, uint64_t t0, uint64_t t1);
/* After every timed call (its end, ns): the thread that finds the next
 * tick's time passed takes the tick (a pause signal, or an arm). */
void jwb_pause_tick(uint64_t now);
/* A slow call [t0, t1] of a thread other than the paused ones: counted under
 * the kind of the section pause it overlapped (or none), in section mode. */
void jwb_pause_slow_other(uint64_t t0, uint64_t t1);
/* The "pause=... hooks=..." fields of the result line; returns the length,
 * 0 (nothing written) without --pause and without hooks. */
size_t jwb_pause_format(char *buf, size_t cap);
/* The kinds of section --pause-kinds accepts, comma-separated (static). */
const char *jwb_pause_kind_list(void);

/* ---------------------------------------------------------------- memory */

/* Zeroed bookkeeping memory from mmap (never the allocator under test); exits
 * with a message when the system refuses it. */
void *jwb_meta_alloc(size_t bytes);
void jwb_meta_free(void *p, size_t bytes);
/* Bookkeeping memory p of old_bytes (NULL: none yet) grown to new_bytes: a
 * new zeroed block holding p's first used_bytes; p is freed. */
void *jwb_meta_grow(void *p, size_t used_bytes, size_t old_bytes, size_t new_bytes);

/* Writes tag into the first and last 8 bytes of the block (only the first
 * below 16 bytes, fewer below 8) and one byte into every 4 KiB page beyond
 * the first, so the block is resident. Inline with fixed-size loads and
 * stores: it runs for every block (docs/design/bench.md, "Harness cost"). */
#define JWB_PAGE 4096
static inline void jwb_put8(unsigned char *b, uint64_t v) { __builtin_memcpy(b, &v, 8); }
static inline uint64_t jwb_get8(const unsigned char *b) {
  uint64_t v;
  __builtin_memcpy(&v, b, 8);
  return v;
}
void jwb_fill_small(unsigned char *b, size_t n, uint64_t tag);
static inline void jwb_fill(void *p, size_t n, uint64_t tag) {
  unsigned char *b = (unsigned char *)p;
  if (__builtin_expect(n < 8, 0)) {
    jwb_fill_small(b, n, tag);
    return;
  }
  jwb_put8(b, tag);
  if (n >= 16) jwb_put8(b + n - 8, tag);
  for (size_t off = JWB_PAGE; off + 8 < n; off += JWB_PAGE) b[off] = (unsigned char)(tag >> 8);
}
/* Verifies what jwb_fill wrote; on mismatch counts a failure and keeps the
 * first one's description for the report. skip_head: bytes at the start not to
 * check (a workload keeps a header there). Returns 1 when intact. */
int jwb_check_slow(jwb_thread *t, const void *p, size_t n, uint64_t tag, size_t skip_head);
static inline int jwb_check(jwb_thread *t, const void *p, size_t n, uint64_t tag, size_t skip_head) {
  if (!jwb.check) return 1;
  const unsigned char *b = (const unsigned char *)p;
  if (__builtin_expect(n < 8 || skip_head != 0 || n > JWB_PAGE + 8, 0))
    return jwb_check_slow(t, p, n, tag, skip_head); /* tiny, with a header, or more than one page */
  uint64_t bad = jwb_get8(b) ^ tag;
  if (n >= 16) bad |= jwb_get8(b + n - 8) ^ tag;
  if (__builtin_expect(bad != 0, 0)) return jwb_check_slow(t, p, n, tag, skip_head); /* describes the failure */
  return 1;
}
void jwb_fail(jwb_thread *t, const char *what);

/* ---------------------------------------------------------------- allocator calls */

/* The only places the workloads call the allocator (calls.c, noinline). */
void *jwb_call_malloc(size_t n);
void *jwb_call_calloc(size_t n, size_t size);
void *jwb_call_realloc(void *p, size_t n);
void *jwb_call_memalign(size_t align, size_t n);   /* posix_memalign */
void *jwb_call_aligned_alloc(size_t align, size_t n);
void *jwb_call_memalign_legacy(size_t align, size_t n);
void *jwb_call_valloc(size_t n);
void *jwb_call_pvalloc(size_t n);
void jwb_call_free(void *p);
/* An empty noinline call: the latency floor (jwb_lat_sample). Not a jwb_call_*,
 * so callgrind's allocator arcs never include it. */
void jwb_null_call(void);

/* A timed call started at t0 and took ns; `before`: jwb_attrib_read() taken
 * just before it (0 without --lat-attrib), for the slow-call counts. */
void jwb_lat_sample(jwb_thread *t, uint64_t t0, uint64_t ns, uint64_t before);
/* --lat-attrib: this thread's page faults and context switches so far, packed
 * (faults << 32 | switches; getrusage RUSAGE_THREAD, read outside the timed
 * window). */
uint64_t jwb_attrib_read(void);
void jwb_oom(jwb_thread *t, size_t n);

#define JWB_TIMED(t, expr)                                         \
  do {                                                             \
    if (__builtin_expect(--(t)->lat_countdown == 0, 0)) {          \
      uint64_t jwb_r0_ = jwb.lat_attrib ? jwb_attrib_read() : 0;   \
      uint64_t jwb_t0_ = jwb_now_ns();                             \
      expr;                                                        \
      jwb_lat_sample((t), jwb_t0_, jwb_now_ns() - jwb_t0_, jwb_r0_); \
    } else {                                                       \
      expr;                                                        \
    }                                                              \
  } while (0)

static inline void *jwb_malloc(jwb_thread *t, size_t n) {
  void *p;
  JWB_TIMED(t, p = jwb_call_malloc(n));
  t->ops++;
  t->allocs++;
  t->bytes += n;
  if (__builtin_expect(p == NULL && n != 0, 0)) jwb_oom(t, n);
  return p;
}
static inline void *jwb_calloc(jwb_thread *t, size_t n, size_t size) {
  void *p;
  JWB_TIMED(t, p = jwb_call_calloc(n, size));
  t->ops++;
  t->allocs++;
  t->bytes += n * size;
  if (__builtin_expect(p == NULL && n * size != 0, 0)) jwb_oom(t, n * size);
  return p;
}
static inline void *jwb_realloc(jwb_thread *t, void *old, size_t n) {
  void *p;
  JWB_TIMED(t, p = jwb_call_realloc(old, n));
  t->ops++;
  t->reallocs++;
  t->bytes += n;
  if (__builtin_expect(p == NULL && n != 0, 0)) jwb_oom(t, n);
  return p;
}
static inline void jwb_free(jwb_thread *t, void *p) {
  JWB_TIMED(t, jwb_call_free(p));
  t->ops++;
  t->frees++;
}

/* ---------------------------------------------------------------- hand-off ring */

/* Single-producer single-consumer ring of blocks handed from one thread to
 * another (cross-thread frees). Lock-free; capacity a power of two. */
typedef struct jwb_item {
  void *p;
  uint64_t size;
  uint64_t tag;
} jwb_item;
typedef struct jwb_ring {
  _Alignas(64) atomic_size_t head;   /* written by the consumer */
  _Alignas(64) atomic_size_t tail;   /* written by the producer */
  _Alignas(64) size_t mask;
  jwb_item *items;
} jwb_ring;
jwb_ring *jwb_ring_new(size_t capacity);

/* A block owned by the workload: allocates n bytes into *it under a fresh tag
 * and fills it (jwb_fill). */
static inline void jwb_item_alloc(jwb_thread *t, jwb_item *it, size_t n) {
  it->size = n;
  it->tag = jwb_tag(t->index, t->counter++);
  it->p = jwb_malloc(t, n);
  jwb_fill(it->p, n, it->tag);
}
/* Checks and frees it->p when there is one, and empties *it. */
static inline void jwb_item_free(jwb_thread *t, jwb_item *it) {
  if (!it->p) return;
  jwb_check(t, it->p, it->size, it->tag, 0);
  jwb_free(t, it->p);
  it->p = NULL;
}
/* 0 when full. */
int jwb_ring_push(jwb_ring *r, jwb_item it);
/* 0 when empty. */
int jwb_ring_pop(jwb_ring *r, jwb_item *out);

#endif
