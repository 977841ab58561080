/* Lowest-root-first placement switched on and off by itself
 * (JWMALLOC_PLACEMENT=auto, the default: the reclaimer's trough detector,
 * reclamation.md 6a; every tier converting its structures at a switch,
 * backend.md 7b). Every block carries a pattern (its serial at every 64th
 * byte up to its usable size, and its last usable byte) checked before it is
 * freed: a block handed out twice, or memory a tier wrote into while the
 * block was live, shows as a changed pattern.
 *
 * Usage: test_placement_switching CASE [SCALE [THREADS]]
 *   swing     generations of many threads (oversubscribed) swing between
 *             peaks of every tier and troughs that keep scattered survivors
 *             (the detector switches placement on and off), freeing a third
 *             of their blocks through another thread, and exit holding
 *             survivors that the next generation frees (abandoned slabs,
 *             flushed block caches) while the switches convert queues:
 *             contents intact, backend trees whole, and once everything is
 *             freed the backend's live bytes are back where they started
 *   apis      realloc (grow, shrink, in place or moved), posix_memalign,
 *             aligned_alloc, memalign, calloc and malloc_usable_size on
 *             blocks freed and reused across switches (a flipper sets
 *             PLACEMENT 1, 0 and auto between troughs): usable size at
 *             least what was asked and writable to its end, alignment kept,
 *             calloc memory zero, contents survive realloc; live bytes back
 *   trim      threads swing between peaks and troughs while four others call
 *             malloc_trim in a loop: no hang, contents intact, live bytes
 *             back
 *   fork      a thread forks in a trough with placement on while others
 *             churn: the child (single-threaded, its own reclaimer) swings
 *             between peaks and troughs itself, frees everything it made and
 *             its live bytes come back to where they were after the fork;
 *             the parent's threads finish intact
 * SCALE: percent of the full size (sanitizer builds). THREADS: swing and
 * trim's threads per generation (32). TROUGH_US and ROUNDS in the
 * environment: a trough's length and the rounds of each generation.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "pages/page_source.h"
#include "jwmalloc.h"
#include "thread_test.h"

#define HANG 60.0 /* seconds: a bound for a hang, never a timing check */

static long settled_live(void) {
  jw_malloc_trim(0);
  return (long)st().page_source_live_bytes;
}

/* Live bytes until they are `want` (the reclaimer may hold blocks it took out
 * of a cache to age them when the test looks: in transit, not a leak). */
static long settle_to(long want) {
  double t0 = test_now_s();
  long l;
  while ((l = settled_live()) != want && test_now_s() - t0 < HANG) usleep(2000);
  return l;
}

static void check_backend(const char *when) {
  char err[256];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "backend check %s: %s", when, err);
}

/* ---- a checked block ---- */

typedef struct blk {
  unsigned char *p;
  size_t n;   /* usable size, all of it patterned */
  uint64_t s; /* serial */
} blk;

static atomic_ullong serials = 1;
static atomic_ullong checked;

static void fill(blk *b) {
  for (size_t i = 0; i + 8 <= b->n; i += 64) memcpy(b->p + i, &b->s, 8);
  b->p[b->n - 1] = (unsigned char)(b->s * 31 + 7);
}

static int intact(const blk *b) {
  for (size_t i = 0; i + 8 <= b->n; i += 64)
    if (memcmp(b->p + i, &b->s, 8) != 0) return 0;
  return b->p[b->n - 1] == (unsigned char)(b->s * 31 + 7);
}

static size_t draw(uint64_t *r) {
  unsigned k = (unsigned)(rnd(r) % 100);
  if (k < 62) return 16 + rnd(r) % 2000;              /* frontend slabs */
  if (k < 94) return 2049 + rnd(r) % (14 * 1024);     /* midend */
  if (k < 99) return 16385 + rnd(r) % (100 * 1024);   /* ranges, block cache */
  return (80 << 10) + rnd(r) % (900 << 10);           /* 80 KiB-1 MiB cached ranges */
}

/* b gets a fresh block of n bytes (malloc); 0 on failure (counted). */
static int get(blk *b, size_t n) {
  b->p = jw_malloc(n);
  CHECK(b->p != NULL, "jw_malloc(%zu): %s", n, strerror(errno));
  if (b->p == NULL) return 0;
  b->n = jw_malloc_usable_size(b->p);
  CHECK(b->n >= n, "usable size %zu of a %zu-byte block", b->n, n);
  b->s = atomic_fetch_add(&serials, 1);
  fill(b);
  return 1;
}

static void put(blk *b) {
  if (b->p == NULL) return;
  CHECK(intact(b), "block %p (%zu bytes, serial %llu) changed while live", (void *)b->p, b->n,
        (unsigned long long)b->s);
  atomic_fetch_add(&checked, 1);
  jw_free(b->p);
  b->p = NULL;
}

/* ---- mailboxes: blocks another thread frees ---- */

#define BOX 512
typedef struct box {
  pthread_mutex_t mu;
  blk b[BOX];
  int n;
} box;

static box *boxes;
static int nboxes;

/* Hands b to thread `to` (freed there); false when its box is full. */
static int post(int to, blk *b) {
  box *x = &boxes[to % nboxes];
  int ok = 0;
  pthread_mutex_lock(&x->mu);
  if (x->n < BOX) x->b[x->n++] = *b, ok = 1;
  pthread_mutex_unlock(&x->mu);
  if (ok) b->p = NULL;
  return ok;
}

static void drain(int me) {
  box *x = &boxes[me % nboxes];
  blk todo[BOX];
  pthread_mutex_lock(&x->mu);
  int n = x->n;
  memcpy(todo, x->b, sizeof(blk) * (size_t)n);
  x->n = 0;
  pthread_mutex_unlock(&x->mu);
  for (int i = 0; i < n; i++) put(&todo[i]);
}

/* ---- survivors one generation leaves to the next ---- */

static pthread_mutex_t left_mu = PTHREAD_MUTEX_INITIALIZER;
static blk *left;
static size_t nleft, capleft;

static void leave(blk *b) {
  pthread_mutex_lock(&left_mu);
  if (nleft < capleft) left[nleft++] = *b, b->p = NULL;
  pthread_mutex_unlock(&left_mu);
  put(b); /* no room: freed here */
}

/* Takes up to `want` of the previous generation's survivors into out. */
static size_t inherit(blk *out, size_t want) {
  pthread_mutex_lock(&left_mu);
  size_t k = nleft < want ? nleft : want;
  nleft -= k;
  memcpy(out, left + nleft, sizeof(blk) * k);
  pthread_mutex_unlock(&left_mu);
  return k;
}

/* ---- swing / trim / fork: peaks and troughs ---- */

static int peak_blocks = 1200, rounds = 6, threads = 32, trough_us = 15000;
static atomic_int stop_trimmers;

/* One thread's peaks and troughs. Survivors of each trough: every 8th block
 * (scattered over the roots the peak filled). A third of what a trough drops
 * goes to another thread. */
static void swing_rounds(int me, blk *slot, uint64_t *r, int nthreads, int exit_holding) {
  size_t n = inherit(slot, (size_t)peak_blocks / 8);
  for (int round = 0; round < rounds; round++) {
    while (n < (size_t)peak_blocks) n += (size_t)get(&slot[n], draw(r));
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
      if (i % 8 == 0) {
        slot[k++] = slot[i];
        continue;
      }
      if (rnd(r) % 3 == 0 && nthreads > 1 && post(me + 1 + (int)(rnd(r) % (unsigned)(nthreads - 1)), &slot[i]))
        continue;
      put(&slot[i]);
    }
    n = k;
    /* The trough lasts a few reclaim intervals: churn at its level. */
    for (int t = 0; t < 6; t++) {
      for (int c = 0; c < 40 && n; c++) {
        size_t i = rnd(r) % n;
        put(&slot[i]);
        get(&slot[i], draw(r));
      }
      drain(me);
      usleep(trough_us);
    }
  }
  drain(me);
  for (size_t i = 0; i < n; i++) {
    if (exit_holding && i % 2 == 0) leave(&slot[i]);
    else put(&slot[i]);
  }
}

typedef struct warg {
  int me, nthreads, exit_holding;
} warg;

static void *swing_worker(void *a) {
  warg *w = a;
  uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(w->me + 1) + (uint64_t)time(NULL);
  blk *slot = calloc((size_t)peak_blocks + 1, sizeof *slot);
  swing_rounds(w->me, slot, &r, w->nthreads, w->exit_holding);
  free(slot);
  return NULL;
}

static void *trimmer(void *a) {
  (void)a;
  long n = 0;
  while (!atomic_load(&stop_trimmers)) {
    jw_malloc_trim(0);
    if (++n % 64 == 0) usleep(500);
  }
  return NULL;
}

static void init_boxes(int n) {
  nboxes = n;
  boxes = calloc((size_t)n, sizeof *boxes);
  for (int i = 0; i < n; i++) pthread_mutex_init(&boxes[i].mu, NULL);
}

static void drain_all(void) {
  for (int i = 0; i < nboxes; i++) drain(i);
}

/* Generations of `nt` threads; survivors of one freed by the next. */
static void generations(int gens, int nt, int ntrim) {
  capleft = (size_t)nt * (size_t)peak_blocks;
  left = calloc(capleft, sizeof *left);
  init_boxes(nt);
  pthread_t tr[8];
  for (int i = 0; i < ntrim; i++) pthread_create(&tr[i], NULL, trimmer, NULL);
  pthread_t *t = calloc((size_t)nt, sizeof *t);
  warg *w = calloc((size_t)nt, sizeof *w);
  for (int g = 0; g < gens; g++) {
    for (int i = 0; i < nt; i++) {
      w[i] = (warg){i, nt, g + 1 < gens};
      pthread_create(&t[i], NULL, swing_worker, &w[i]);
    }
    for (int i = 0; i < nt; i++) pthread_join(t[i], NULL);
    drain_all();
    check_backend("between generations");
  }
  atomic_store(&stop_trimmers, 1);
  for (int i = 0; i < ntrim; i++) pthread_join(tr[i], NULL);
  blk b;
  while (inherit(&b, 1)) put(&b);
  free(t);
  free(w);
}

/* Generations of `threads` (scaled) swinging between peaks and troughs,
 * with ntrim threads calling malloc_trim meanwhile. */
static int swing(int ntrim) {
  if (scale < 100) peak_blocks = (int)scaled(peak_blocks) < 64 ? 64 : (int)scaled(peak_blocks);
  long live0 = settled_live();
  jw_stats s0 = st();
  int nt = (int)scaled(threads) < 2 ? 2 : (int)scaled(threads);
  generations(3, nt, ntrim);
  long l = settle_to(live0);
  jw_stats s1 = st();
  check_backend("at the end");
  CHECK(l == live0, "live bytes %ld after everything was freed, %ld at the start", l, live0);
  printf("%s: %d threads x 3 generations, %llu blocks checked, placement switched on %llu times (guard held it "
         "off %llu cycles), %llu reclaim cycles\n",
         ntrim ? "trim" : "swing", nt, (unsigned long long)atomic_load(&checked),
         (unsigned long long)(s1.placement_on - s0.placement_on),
         (unsigned long long)(s1.placement_contended - s0.placement_contended),
         (unsigned long long)(s1.reclaim_cycles - s0.reclaim_cycles));
  return 0;
}

static int case_swing(void) { return swing(0); }
static int case_trim(void) { return swing(4); }

/* ---- apis ---- */

#define ANL 64
static atomic_int apis_done;

/* A block from one of the allocation calls, with its request and alignment. */
static int get_any(blk *b, uint64_t *r, size_t *align) {
  size_t n = draw(r);
  void *p = NULL;
  *align = 16;
  switch (rnd(r) % 5) {
    case 0:
      p = jw_malloc(n);
      break;
    case 1: {
      *align = (size_t)1 << (4 + rnd(r) % 17); /* 16 B-1 MiB */
      int e = jw_posix_memalign(&p, *align, n);
      CHECK(e == 0, "posix_memalign(%zu, %zu): %d", *align, n, e);
      break;
    }
    case 2:
      *align = (size_t)1 << (4 + rnd(r) % 14);
      n = (n + *align - 1) & ~(*align - 1);
      p = jw_aligned_alloc(*align, n);
      break;
    case 3:
      *align = (size_t)1 << (3 + rnd(r) % 13);
      p = jw_memalign(*align, n);
      break;
    default: {
      p = jw_calloc(1, n);
      if (p) {
        const unsigned char *c = p;
        for (size_t i = 0; i < n; i += 97)
          if (c[i]) {
            FAIL("calloc(%zu) byte %zu is %u", n, i, c[i]);
            break;
          }
      }
    }
  }
  CHECK(p != NULL, "allocation of %zu (align %zu) failed: %s", n, *align, strerror(errno));
  if (p == NULL) return 0;
  CHECK(((uintptr_t)p & (*align - 1)) == 0, "%p not aligned to %zu", p, *align);
  b->p = p;
  b->n = jw_malloc_usable_size(p);
  CHECK(b->n >= n, "usable size %zu of a %zu-byte block", b->n, n);
  b->s = atomic_fetch_add(&serials, 1);
  fill(b);
  return 1;
}

/* realloc to a new size: the old contents up to the smaller size survive. */
static void resize(blk *b, uint64_t *r) {
  size_t n = rnd(r) % 2 ? draw(r) : b->n / 2 + 1 + rnd(r) % (b->n / 2 + 16);
  CHECK(intact(b), "block %p changed while live (before realloc)", (void *)b->p);
  size_t keep = n < b->n ? n : b->n;
  unsigned char *q = jw_realloc(b->p, n);
  CHECK(q != NULL, "realloc(%zu): %s", n, strerror(errno));
  if (q == NULL) return;
  for (size_t i = 0; i + 8 <= keep; i += 64)
    if (memcmp(q + i, &b->s, 8) != 0) {
      FAIL("realloc %zu -> %zu lost byte %zu (moved %d)", b->n, n, i, q != b->p);
      break;
    }
  b->p = q;
  b->n = jw_malloc_usable_size(q);
  CHECK(b->n >= n, "usable size %zu after realloc to %zu", b->n, n);
  fill(b);
}

static void *apis_worker(void *a) {
  uint64_t r = 0x2545f4914f6cdd1dull * (uint64_t)((intptr_t)a + 1);
  blk slot[ANL * 8];
  memset(slot, 0, sizeof slot);
  long ops = scaled(60000);
  for (long op = 0; op < ops; op++) {
    /* Peaks of 8 x ANL blocks and troughs of ANL / 2. */
    size_t cap = (op / 4000) % 2 ? ANL / 2 : ANL * 8;
    size_t i = rnd(&r) % cap;
    size_t align;
    if (slot[i].p == NULL) get_any(&slot[i], &r, &align);
    else if (rnd(&r) % 3 == 0) resize(&slot[i], &r);
    else put(&slot[i]);
    if (cap == ANL / 2)
      for (size_t j = ANL / 2; j < ANL * 8; j++) put(&slot[j]);
  }
  for (size_t i = 0; i < ANL * 8; i++) put(&slot[i]);
  atomic_fetch_add(&apis_done, 1);
  return NULL;
}

static int case_apis(void) {
  long live0 = settled_live();
  enum { NT = 4 };
  pthread_t t[NT];
  for (long i = 0; i < NT; i++) pthread_create(&t[i], NULL, apis_worker, (void *)i);
  static const long modes[] = {1, 2, 0, 2, 1, 0};
  long flips = 0;
  while (atomic_load(&apis_done) < NT) {
    jw_option_set("PLACEMENT", modes[flips++ % 6]);
    usleep(700);
  }
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  jw_option_set("PLACEMENT", 2);
  long l = settle_to(live0);
  check_backend("at the end");
  CHECK(l == live0, "live bytes %ld after everything was freed, %ld at the start", l, live0);
  printf("apis: %ld switches, %llu blocks checked\n", flips, (unsigned long long)atomic_load(&checked));
  return 0;
}

/* ---- fork ---- */

static atomic_int fork_stop;

static void *fork_churn(void *a) {
  uint64_t r = 0x5851f42d4c957f2dull * (uint64_t)((intptr_t)a + 1);
  blk slot[512];
  memset(slot, 0, sizeof slot);
  while (!atomic_load(&fork_stop)) {
    size_t i = rnd(&r) % 512;
    if (slot[i].p) put(&slot[i]);
    else get(&slot[i], draw(&r));
  }
  for (int i = 0; i < 512; i++) put(&slot[i]);
  return NULL;
}

/* The child: single-threaded peaks and troughs of its own, then everything
 * freed. Returns 1 when a check failed. */
static int fork_child(void *arg) {
  (void)arg;
  test_reset_failures(); /* the parent's, counted before the fork */
  long live0 = settled_live();
  uint64_t r = 0x1234567ull ^ (uint64_t)getpid();
  peak_blocks = 3000;
  blk *slot = calloc((size_t)peak_blocks + 1, sizeof *slot);
  init_boxes(1);
  rounds = 3;
  swing_rounds(0, slot, &r, 1, 0);
  free(slot);
  /* At most what it inherited: the parent's other threads' caches are
   * orphaned in the child (runtime.c, fork_child), and the child's aging
   * passes may give their pages back meanwhile, so live bytes can end below
   * the level after the fork; only above it would memory be lost. */
  double t0 = test_now_s();
  long l;
  while ((l = settled_live()) > live0 && test_now_s() - t0 < HANG) usleep(2000);
  check_backend("in the child");
  CHECK(l <= live0, "child: live bytes %ld after everything was freed, %ld after the fork", l, live0);
  /* Its reclaimer runs: cycles go on in the child. The thread stops when it
   * has nothing to do and a free starts it again, so each wait frees a
   * range (a slow machine may have let it go idle above). */
  uint64_t c0 = st().reclaim_cycles;
  t0 = test_now_s();
  while (st().reclaim_cycles == c0 && test_now_s() - t0 < HANG) {
    jw_free(jw_malloc((size_t)64 << 10));
    usleep(1000);
  }
  CHECK(st().reclaim_cycles != c0, "child: no reclaim cycle in %.0f s", HANG);
  return test_failures() != 0;
}

static int case_fork(void) {
  /* A trough with placement on: a peak, most of it freed, survivors left. */
  uint64_t r = 77;
  enum { PEAK = 6000 };
  blk *slot = calloc(PEAK, sizeof *slot);
  for (int i = 0; i < PEAK; i++) get(&slot[i], draw(&r));
  for (int i = 0; i < PEAK; i++)
    if (i % 10) put(&slot[i]);
  jw_option_set("PLACEMENT", 1);
  enum { NT = 4 };
  pthread_t t[NT];
  for (long i = 0; i < NT; i++) pthread_create(&t[i], NULL, fork_churn, (void *)i);
  usleep(20000);
  int forks = 0;
  for (int k = 0; k < 3; k++, forks++) {
    if (k == 1) jw_option_set("PLACEMENT", 2); /* and forked under auto */
    /* Longer than the child's own bounds: a child that reports is never killed. */
    int ws = test_run_child(fork_child, NULL, 3 * HANG);
    if (ws == -1) FAIL("fork child %d hung", k);
    else CHECK(test_exited_ok(ws), "fork child %d: status %#x", k, ws);
  }
  atomic_store(&fork_stop, 1);
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < PEAK; i++) put(&slot[i]);
  free(slot);
  check_backend("in the parent");
  printf("fork: %d children, %llu blocks checked in the parent\n", forks, (unsigned long long)atomic_load(&checked));
  return 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"swing", case_swing},
      {"apis", case_apis},
      {"trim", case_trim},
      {"fork", case_fork},
  };
  if (argc > 3) threads = atoi(argv[3]);
  if (getenv("TROUGH_US")) trough_us = atoi(getenv("TROUGH_US"));
  if (getenv("ROUNDS")) rounds = atoi(getenv("ROUNDS"));
  return TEST_MAIN(cases);
}
