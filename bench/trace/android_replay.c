/* jwb-android-replay: replays an allocation trace in the text format of
 * Android's memory_replay (`TID: malloc PTR SIZE`, calloc, memalign, realloc,
 * free, thread_done; ../shared/android-traces/FORMAT), plain or zipped, under
 * whatever allocator is preloaded (docs/design/bench.md, "Android's traces").
 *
 *   jwb-android-replay --trace FILE[.zip] [--series FILE] [--decay-time 1]
 *
 * As memory_replay does: each recorded thread's calls run on a thread of
 * their own, in trace order, and the calls of different threads keep the
 * trace's order too (a thread runs its next call once the previous line of
 * the trace is done, then hands over to the thread of the line after); a
 * thread ends at its thread_done. Every new block is made resident, one byte
 * written in each 64-byte line, and filled with its object's tag; a free
 * checks the tag (replay_exec.c). Before the first call the replayer calls
 * mallopt(M_DECAY_TIME, 1), as memory_replay does.
 *
 * Reports one result line (the harness's, plus what is below) and, with
 * --series, the process's RSS and virtual size every 100,000 calls:
 *   ns_per_call        the allocator calls alone (timer floor subtracted)
 *   ns_per_call_touch  the calls plus making each new block resident, as
 *                      memory_replay times them
 *   rss_peak, rss_final, vsz_peak, vsz_final: bytes above the process at the
 *                      first call (the decoded trace, the replayer's tables);
 *                      the peak RSS is the kernel's VmHWM, reset at the first
 *                      call; the peak virtual size is sampled every 1,000 calls
 * Frees and reallocs of pointers the trace never allocated are skipped and
 * counted (unmatched=); the check fails if a block lost its contents.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <malloc.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"
#include "replay_exec.h"

#define JWT_DONE 14 /* thread_done: not a call (format.h's numbers end below it) */
#define NO_NEXT UINT32_MAX

/* One line of the trace: the call and the replay thread that runs it. */
typedef struct line {
  jwr_op op;
  uint32_t thread; /* incarnation: a tid again after its thread_done is a new thread */
  uint32_t next;   /* the same thread's next line, or NO_NEXT */
} line;

typedef struct rthread {
  pthread_t th;
  uint32_t first;
  int started;
  _Atomic uint32_t go; /* futex word: the previous line is done */
  jwb_thread *ctx;
} rthread;

static const char *trace_path, *series_path;
static uint64_t decay_time = 1, stats_at_end;
static line *lines;
static size_t nlines, cap_lines;
static rthread *threads;
static uint32_t nthreads;
static jwr_obj *objs;
static uint64_t nobjs, unmatched, dup_ptrs;

static void fatal(const char *what) {
  fprintf(stderr, "jwb-android-replay: %s: %s\n", trace_path, what);
  exit(2);
}

/* ---- decoding: pointer -> live object, tid -> thread ---- */

typedef struct pslot {
  uint64_t key; /* pointer (0: empty; deleted: 1, never a block address) */
  uint32_t val;
} pslot;

typedef struct ptab {
  pslot *s;
  size_t mask, used;
} ptab;

static size_t h64(uint64_t k) { return (size_t)((k * 0x9e3779b97f4a7c15ULL) >> 20); }

static void ptab_init(ptab *t, size_t n) {
  t->mask = n - 1;
  t->used = 0;
  t->s = jwb_meta_alloc(n * sizeof(pslot));
}

static void ptab_put(ptab *t, uint64_t k, uint32_t v);

static void ptab_grow(ptab *t) {
  ptab old = *t;
  ptab_init(t, (old.mask + 1) * 2);
  for (size_t i = 0; i <= old.mask; i++)
    if (old.s[i].key > 1) ptab_put(t, old.s[i].key, old.s[i].val);
  jwb_meta_free(old.s, (old.mask + 1) * sizeof(pslot));
}

/* Returns the slot of k, or the empty one where it would go. */
static pslot *ptab_find(ptab *t, uint64_t k, pslot **free_slot) {
  *free_slot = NULL;
  for (size_t i = h64(k) & t->mask;; i = (i + 1) & t->mask) {
    pslot *s = &t->s[i];
    if (s->key == k) return s;
    if (s->key == 1 && !*free_slot) *free_slot = s;
    if (s->key == 0) {
      if (!*free_slot) *free_slot = s;
      return NULL;
    }
  }
}

static void ptab_put(ptab *t, uint64_t k, uint32_t v) {
  if ((t->used + 1) * 2 > t->mask + 1) ptab_grow(t);
  pslot *f, *s = ptab_find(t, k, &f);
  if (s) {
    s->val = v;
    return;
  }
  if (f->key == 0) t->used++;
  f->key = k;
  f->val = v;
}

/* Removes k; returns its value, 0 when absent. */
static uint32_t ptab_take(ptab *t, uint64_t k) {
  pslot *f, *s = ptab_find(t, k, &f);
  if (!s) return 0;
  s->key = 1;
  return s->val;
}

static ptab live, tids;
static uint32_t *last_line; /* per thread: its latest line, to link the next one */

static uint32_t thread_of(uint64_t tid) {
  pslot *f, *s = ptab_find(&tids, tid + 2, &f);
  if (s) return s->val;
  uint32_t n = nthreads++;
  threads = jwb_meta_grow(threads, n * sizeof(rthread), n * sizeof(rthread), nthreads * sizeof(rthread));
  last_line = jwb_meta_grow(last_line, n * sizeof(uint32_t), n * sizeof(uint32_t), nthreads * sizeof(uint32_t));
  threads[n].first = NO_NEXT;
  last_line[n] = NO_NEXT;
  ptab_put(&tids, tid + 2, n);
  return n;
}

static void add_line(uint32_t thread, jwr_op op) {
  if (nlines == cap_lines) {
    size_t cap = cap_lines ? cap_lines * 2 : 1 << 16;
    lines = jwb_meta_grow(lines, nlines * sizeof(line), cap_lines * sizeof(line), cap * sizeof(line));
    cap_lines = cap;
  }
  if (nlines >= NO_NEXT) fatal("more than 2^32 lines");
  uint32_t i = (uint32_t)nlines++;
  lines[i] = (line){op, thread, NO_NEXT};
  if (last_line[thread] == NO_NEXT) threads[thread].first = i;
  else lines[last_line[thread]].next = i;
  last_line[thread] = i;
}

static uint32_t new_object(uint64_t ptr) {
  if (nobjs >= UINT32_MAX - 1) fatal("more than 2^32 objects");
  uint32_t id = (uint32_t)++nobjs;
  if (ptr) {
    if (ptab_take(&live, ptr)) dup_ptrs++; /* allocated twice without a free: the old one stays live */
    ptab_put(&live, ptr, id);
  }
  return id;
}

/* One line of text; returns 0 for a malformed one. */
static int decode(char *s) {
  char *end;
  uint64_t tid = strtoull(s, &end, 10);
  if (end == s || *end != ':') return 0;
  char name[16];
  int used = 0;
  if (sscanf(end + 1, " %15s %n", name, &used) != 1) return 0;
  const char *args = end + 1 + used;
  /* Pointers are hexadecimal (0x...), sizes and counts decimal (FORMAT). */
  unsigned long long a = 0, b = 0, c = 0;
  int n = 1 + sscanf(args, "%llx %llu %llu", &a, &b, &c);
  if (n < 2) return 0;
  uint32_t th = thread_of(tid);
  jwr_op op = {0};
  const unsigned long long too_big = 1ULL << 48; /* jwr_op's size field */
  if (strcmp(name, "malloc") == 0 && n >= 3) {
    if (b >= too_big) return 0;
    op.op = JWT_MALLOC;
    op.size = b;
    op.id = new_object(a);
  } else if (strcmp(name, "calloc") == 0 && n >= 4) {
    if (b > UINT32_MAX || (b && c > (1ULL << 40) / b)) return 0;
    op.op = JWT_CALLOC;
    op.old = (uint32_t)b;
    op.size = b * c;
    op.id = new_object(a);
  } else if (strcmp(name, "memalign") == 0 && n >= 4) {
    if (b == 0 || (b & (b - 1)) || c >= too_big) return 0;
    op.op = JWT_MEMALIGN;
    op.align_log2 = (uint64_t)__builtin_ctzll(b);
    op.size = c;
    op.id = new_object(a);
  } else if (strcmp(name, "realloc") == 0) {
    /* realloc NEW OLD SIZE: two pointers, then the size */
    unsigned long long nw, old, size;
    if (sscanf(args, "%llx %llx %llu", &nw, &old, &size) != 3 || size >= too_big) return 0;
    uint32_t o = old ? ptab_take(&live, old) : 0;
    if (old && o == 0) unmatched++; /* a block from before the recording: replayed as realloc(NULL) */
    op.op = JWT_REALLOC;
    op.old = o;
    op.size = size;
    op.id = new_object(nw);
  } else if (strcmp(name, "free") == 0) {
    op.op = JWT_FREE;
    op.id = a ? ptab_take(&live, a) : 0;
    if (a && op.id == 0) {
      unmatched++;
      return 1; /* a pointer the trace never allocated: not replayed */
    }
  } else if (strcmp(name, "thread_done") == 0) {
    op.op = JWT_DONE;
  } else {
    return 0;
  }
  add_line(th, op);
  if (op.op == JWT_DONE) { /* the tid may come back: as a new thread */
    pslot *f, *s = ptab_find(&tids, tid + 2, &f);
    if (s) s->key = 1;
  }
  return 1;
}

static void load(void) {
  size_t len = strlen(trace_path);
  FILE *f;
  int zipped = len > 4 && strcmp(trace_path + len - 4, ".zip") == 0;
  if (access(trace_path, R_OK) != 0) fatal("cannot read");
  if (zipped) {
    char cmd[4200];
    if (len > 4000) fatal("path too long");
    snprintf(cmd, sizeof cmd, "unzip -p '%s'", trace_path); /* Debian's unzip: the archive's one text file */
    f = popen(cmd, "r");
  } else {
    f = fopen(trace_path, "r");
  }
  if (!f) fatal("cannot open");
  ptab_init(&live, 1 << 16);
  ptab_init(&tids, 1 << 10);
  char buf[512];
  uint64_t lineno = 0, bad = 0;
  while (fgets(buf, sizeof buf, f)) {
    lineno++;
    if (buf[0] == '\n' || buf[0] == '#') continue;
    if (!decode(buf) && bad++ == 0) fprintf(stderr, "jwb-android-replay: %s:%" PRIu64 ": malformed line skipped\n",
                                            trace_path, lineno);
  }
  int rc = zipped ? pclose(f) : fclose(f);
  if (zipped && rc != 0) fatal("unzip -p failed (is it a zip archive? is unzip installed?)");
  if (nlines == 0) fatal("no calls in the trace");
  if (bad) fprintf(stderr, "jwb-android-replay: %" PRIu64 " malformed lines skipped\n", bad);
  objs = jwb_meta_alloc((nobjs + 1) * sizeof(jwr_obj));
  /* Resident before the first call, so that the figures above the start
   * count the allocator's memory, not the replayer's table filling in. */
  memset(objs, 0, (nobjs + 1) * sizeof(jwr_obj));
  jwb_meta_free(live.s, (live.mask + 1) * sizeof(pslot));
  jwb_meta_free(tids.s, (tids.mask + 1) * sizeof(pslot));
}

/* ---- memory figures ---- */

static uint64_t page_size;

static void statm(uint64_t *vsz, uint64_t *rss) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  unsigned long long v = 0, r = 0;
  if (n > 0) {
    buf[n] = 0;
    sscanf(buf, "%llu %llu", &v, &r);
  }
  *vsz = v * page_size;
  *rss = r * page_size;
}

static uint64_t hwm(void) { /* VmHWM, bytes */
  char buf[4096];
  int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  const char *p = strstr(buf, "VmHWM:");
  return p ? strtoull(p + 6, NULL, 10) << 10 : 0;
}

typedef struct sample {
  uint64_t calls, rss, vsz;
} sample;

/* Written only by the thread running the current line (the hand-over's
 * release/acquire orders them). */
static sample *series;
static size_t nseries;
static uint64_t calls, base_rss, base_vsz, vsz_peak, final_rss, final_vsz;
static uint64_t sum_call_ns, sum_touch_ns, timer_floor;
static uint64_t counts[16];

static uint64_t noted; /* calls at the last sample */

static void note_memory(int force) {
  if ((calls % 1000 != 0 || calls == noted) && !force) return;
  noted = calls;
  uint64_t v, r;
  statm(&v, &r);
  if (v > vsz_peak) vsz_peak = v;
  if (calls % 100000 == 0 || force) series[nseries++] = (sample){calls, r, v};
}

/* ---- the threads ---- */

static _Atomic uint64_t turn; /* the line to run next */

static void futex_wait(_Atomic uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0); }
static void futex_wake(_Atomic uint32_t *w) { syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void *run_thread(void *arg);

/* Line i is done: the next line's thread runs (started first if new).
 * Sequentially consistent, with wait_turn: of the waker's store of `go`
 * and the sleeper's exchange of it, whichever comes second sees the other's
 * turn, so no wake is lost. */
static void hand_over(uint32_t i) {
  uint32_t n = i + 1; /* i = UINT32_MAX: the first line */
  if (n == nlines) {
    atomic_store(&turn, n);
    return;
  }
  rthread *r = &threads[lines[n].thread];
  if (!r->started) {
    r->started = 1;
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 64 << 10); /* hundreds of threads: small stacks, as a phone's */
    atomic_store(&turn, n);
    if (pthread_create(&r->th, &a, run_thread, r) != 0) fatal("cannot create a thread");
    pthread_attr_destroy(&a);
    return;
  }
  atomic_store(&turn, n); /* this thread's work (objects, figures) before the next line */
  if (i == UINT32_MAX || &threads[lines[i].thread] != r) {
    atomic_store(&r->go, 1);
    futex_wake(&r->go);
  }
}

static void wait_turn(rthread *me, uint32_t i) {
  for (unsigned spins = 0; atomic_load(&turn) != i; spins++) {
    if (spins < 100) continue;
    atomic_exchange(&me->go, 0);
    if (atomic_load(&turn) == i) break;
    futex_wait(&me->go);
  }
}

/* The figures after line i (the last line: the final ones). */
static void line_done(uint32_t i) {
  note_memory(0);
  if (i + 1 == nlines) {
    note_memory(1);
    statm(&final_vsz, &final_rss);
  }
}

static void *run_thread(void *arg) {
  rthread *me = arg;
  for (uint32_t i = me->first; i != NO_NEXT; i = lines[i].next) {
    wait_turn(me, i);
    line *l = &lines[i];
    if (l->op.op == JWT_DONE) {
      line_done(i);
      hand_over(i);
      return NULL;
    }
    jwr_times tm;
    jwr_exec(me->ctx, &l->op, objs, JWR_TOUCH_LINES | JWR_TIME, &tm, NULL);
    counts[l->op.op]++;
    sum_call_ns += tm.call_ns;
    sum_touch_ns += tm.touch_ns;
    calls++;
    line_done(i);
    hand_over(i);
  }
  return NULL;
}

static void measure_floor(void) {
  uint64_t best = UINT64_MAX;
  for (int k = 0; k < 11; k++) { /* the least of 11 means of 10,000 back-to-back reads */
    uint64_t s = 0;
    for (int i = 0; i < 10000; i++) {
      uint64_t a = jwb_now_ns();
      s += jwb_now_ns() - a;
    }
    uint64_t m = s / 10000;
    if (m < best) best = m;
  }
  timer_floor = best;
}

int main(int argc, char **argv) {
  const jwb_opt opts[] = {
      {"trace", JWB_OPT_STR, &trace_path, "memory_replay text trace, or a zip archive holding one (required)"},
      {"series", JWB_OPT_STR, &series_path, "file for 'calls rss_bytes vsz_bytes' every 100,000 calls"},
      {"decay-time", JWB_OPT_U64, &decay_time, "value of mallopt(M_DECAY_TIME) before the replay (default 1)"},
      {"malloc-stats", JWB_OPT_U64, &stats_at_end, "1: malloc_stats() after the last line, before the leftovers are freed"},
      {0},
  };
  jwb.lat_every = 0; /* every call is timed here; no sampled latencies (--lat-every N for them) */
  jwb_init(argc, argv, "replays an Android memory_replay trace under the preloaded allocator", opts);
  if (!trace_path) {
    fprintf(stderr, "jwb-android-replay: --trace FILE is required\n");
    return 2;
  }
  page_size = (uint64_t)sysconf(_SC_PAGESIZE);
  load();
  for (uint32_t t = 0; t < nthreads; t++) threads[t].ctx = jwb_ctx(t);
  series = jwb_meta_alloc((nlines / 100000 + 4) * sizeof(sample));
  measure_floor();
  mallopt(-100 /* M_DECAY_TIME, bionic's value */, (int)decay_time);
  statm(&base_vsz, &base_rss);
  int fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "5", 1) != 1) fprintf(stderr, "jwb-android-replay: cannot reset VmHWM: peak RSS includes the load\n");
  if (fd >= 0) close(fd);
  vsz_peak = base_vsz;
  series[nseries++] = (sample){0, base_rss, base_vsz};
  uint64_t t0 = jwb_now_ns();
  hand_over(UINT32_MAX); /* line 0's thread starts */
  for (uint32_t t = 0; t < nthreads; t++)
    if (threads[t].started) pthread_join(threads[t].th, NULL);
  double wall = (double)(jwb_now_ns() - t0) / 1e9;
  uint64_t peak = hwm();
  jwb_region_end();
  if (stats_at_end) malloc_stats(); /* the allocator's own account of the end state (on stderr) */
  /* Objects the trace never freed. */
  uint64_t left = 0;
  jwb_thread *m = jwb_main_ctx();
  for (uint64_t id = 1; id <= nobjs; id++) {
    void *p = atomic_load(&objs[id].p);
    if (p && p != JWR_FREED) {
      left++;
      if (p != JWR_NULL_BLOCK) {
        jwb_check(m, p, objs[id].size, jwb_tag(0, (uint32_t)id), 0);
        jwb_free(m, p);
      }
    }
  }
  if (series_path) {
    FILE *f = fopen(series_path, "w");
    if (!f) fatal("cannot write the series file");
    fprintf(f, "# calls rss_bytes vsz_bytes (above the start: rss %" PRIu64 " vsz %" PRIu64 ")\n", base_rss, base_vsz);
    for (size_t i = 0; i < nseries; i++)
      fprintf(f, "%" PRIu64 " %" PRIu64 " %" PRIu64 "\n", series[i].calls, series[i].rss - base_rss,
              series[i].vsz > base_vsz ? series[i].vsz - base_vsz : 0);
    fclose(f);
  }
  double fl = (double)timer_floor, per = calls ? (double)sum_call_ns / (double)calls : 0;
  char extra[1024];
  const char *slash = strrchr(trace_path, '/');
  snprintf(extra, sizeof extra,
           "trace=%s lines=%zu calls=%" PRIu64 " trace_threads=%u n_malloc=%" PRIu64 " n_calloc=%" PRIu64
           " n_memalign=%" PRIu64 " n_realloc=%" PRIu64 " n_free=%" PRIu64 " unmatched=%" PRIu64 " dup_ptrs=%" PRIu64
           " live_at_end=%" PRIu64 " wall_s=%.3f timer_floor_ns=%.0f ns_per_call=%.2f ns_per_call_touch=%.2f"
           " rss_peak=%" PRIu64 " rss_final=%" PRIu64 " vsz_peak=%" PRIu64 " vsz_final=%" PRIu64,
           slash ? slash + 1 : trace_path, nlines, calls, nthreads, counts[JWT_MALLOC], counts[JWT_CALLOC],
           counts[JWT_MEMALIGN], counts[JWT_REALLOC], counts[JWT_FREE], unmatched, dup_ptrs, left, wall, fl,
           per > fl ? per - fl : 0, calls ? (double)sum_touch_ns / (double)calls - fl : 0,
           peak > base_rss ? peak - base_rss : 0, final_rss > base_rss ? final_rss - base_rss : 0,
           vsz_peak - base_vsz, final_vsz > base_vsz ? final_vsz - base_vsz : 0);
  return jwb_report(extra);
}
