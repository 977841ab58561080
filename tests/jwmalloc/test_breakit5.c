/* breakit5: hostile cases for the block cache's 80 KiB-1 MiB ranges
 * (frontend.md, "Ranges of 80 KiB-1 MiB"), the root reserve (backend.md 7c),
 * lazy parking (frontend.md, "Refill") and the deferred hand-over. Each case
 * asserts what a user relies on.
 *
 * Usage: test_breakit5 CASE [SCALE]
 *   apis      one thread, a random mix of malloc, calloc, realloc (growing,
 *             shrinking, in place or moved), posix_memalign, aligned_alloc,
 *             memalign and free over 2 KiB-1.2 MiB (every cached range class
 *             and its neighbours, alignments 16 B-1 MiB): every block has
 *             the usable size it asked for, no two live blocks overlap, calloc
 *             memory is zero, contents survive realloc and the block cache;
 *             after everything is freed and trimmed the backend's live bytes
 *             are where they started (run with JWMALLOC_CHECK=1)
 *   dbl       (abort off) double frees of cached ranges through every path:
 *             free twice, realloc of a freed range, free from another thread
 *             of a range this thread cached, free twice of an aligned_alloc /
 *             posix_memalign range (cached and over-aligned): each reported
 *             once and changing nothing (the next mallocs of the class get
 *             distinct ranges); valid frees of the same shapes never reported
 *   xexit     many threads (oversubscribed) allocate ranges of every cached
 *             class, free half themselves (their caches fill and their
 *             budgets grow) and hand the other half to the next thread, then
 *             exit while that thread frees them; rounds of it: contents
 *             intact, and once everyone is done the backend's live bytes are
 *             where they started and range mallocs equal range frees
 *   trim      many threads churn blocks of every tier across threads while
 *             four others call malloc_trim in a loop (JWMALLOC_CHECK=1): no
 *             hang, contents intact, live bytes back to the start
 *   fork      a thread forks while others churn ranges and hold full range
 *             budgets (4 MiB each) and the root reserve holds emptied roots:
 *             the child allocates and frees whole roots' worth of ranges
 *             many times (the reserve serves it: the roots it maps stay
 *             bounded), a double free of a range the forking thread cached is
 *             reported, malloc_trim works; the parent's threads finish
 *   lazypark  an owner of used-up slabs (queued unparked on its partial
 *             queue) exits, or idles and then trims, while eight threads
 *             free every block: every page comes back (live bytes)
 *   retain    (JWMALLOC_RECLAIM=0) six roots emptied, five rounds: free roots
 *             beyond JWMALLOC_RETAIN_ROOTS=1 are unmapped, root reserve or not
 *   frozen    (the test-hook build) the backend lock held for good by a
 *             frozen thread while eight threads allocate and free whole
 *             roots, 1-3 MiB and cached ranges at every alignment, then
 *             double frees of each size: contents intact, every double free
 *             reported once, and after the holder goes on everything
 *             deferred is filed (live bytes back to the start)
 *   reserve   threads that empty whole roots (3 MiB and 4 MiB ranges) and
 *             others that take ranges at once, with the reclaimer aging
 *             the reserve every 1 ms: no range handed out twice (contents),
 *             live bytes back to the start, and the reclaimer eventually
 *             gives every free root back (mapped roots fall to what the
 *             test holds)
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
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

#include "jwmalloc.h"
#include "thread_test.h"
#ifdef JW_TEST_HOOKS
#include "lock_freezer.h"
#endif

#define HANG 60.0 /* seconds: a bound for a hang, never a timing check */

static long live_bytes(void) { return (long)st().page_source_live_bytes; }

/* Every thread's caches emptied (the calling thread's by trim, exited
 * threads' at their exit): live bytes settle to what is really live. */
static long settled_live(void) {
  jw_malloc_trim(0);
  return live_bytes();
}

/* settled_live() until it is `want`, within HANG seconds: the reclaimer may
 * be giving back blocks it took out of a cache (aging) when the test looks,
 * which is not a leak; a leak never settles. Returns the last figure. */
static long settle_to(long want) {
  double t0 = test_now_s();
  long l;
  while ((l = settled_live()) != want && test_now_s() - t0 < HANG) usleep(2000);
  if (l == want && test_now_s() - t0 > 0.5)
    fprintf(stderr, "note: live bytes took %.1f s to settle (in transit in the reclaimer)\n", test_now_s() - t0);
  return l;
}

/* ---- a checked block: pattern over its whole requested size ---- */

typedef struct blk {
  unsigned char *p;
  size_t n;
  uint8_t seed;
} blk;

static void fill(blk *b) {
  for (size_t i = 0; i + 1 < b->n; i += 64) b->p[i] = (unsigned char)(b->seed + i / 64);
  if (b->n) b->p[b->n - 1] = (unsigned char)(b->seed ^ 0x5a);
}
static int intact_upto(const blk *b, size_t n) {
  for (size_t i = 0; i < n && i + 1 < b->n; i += 64)
    if (b->p[i] != (unsigned char)(b->seed + i / 64)) return 0;
  if (n >= b->n && b->n && b->p[b->n - 1] != (unsigned char)(b->seed ^ 0x5a)) return 0;
  return 1;
}
static int intact(const blk *b) { return intact_upto(b, b->n); }

/* ---- apis ---- */

#define NLIVE 48
static uint64_t rng = 0x243f6a8885a308d3ull;

static size_t draw_size(void) {
  static const size_t g[] = {5, 8, 16, 19, 20, 21, 24, 64, 79, 80, 81, 96, 128, 160, 200, 255, 256, 257, 300};
  uint64_t r = rnd(&rng);
  switch (r % 4) {
    case 0:
      return 2017 + (r >> 8) % (64 << 10);
    case 1:
      return (80 << 10) + (r >> 8) % (944 << 10);
    default: { /* a class boundary, plus or minus a little */
      size_t b = g[(r >> 8) % (sizeof g / sizeof *g)] << 12;
      long d = (long)((r >> 20) % 65) - 32;
      return (size_t)((long)b + d);
    }
  }
}

static size_t draw_align(void) {
  static const size_t a[] = {16, 64, 4096, 4096, 8192, 16384, 65536, 1 << 20};
  return a[rnd(&rng) % (sizeof a / sizeof *a)];
}

static int overlaps(blk *live, int nlive, int k) {
  uintptr_t a = (uintptr_t)live[k].p, e = a + jw_malloc_usable_size(live[k].p);
  for (int j = 0; j < nlive; j++) {
    if (j == k || live[j].p == NULL) continue;
    uintptr_t b = (uintptr_t)live[j].p, f = b + jw_malloc_usable_size(live[j].p);
    if (a < f && b < e) {
      FAIL("blocks %p (+%zu) and %p (+%zu) overlap", live[k].p, live[k].n, live[j].p, live[j].n);
      return 1;
    }
  }
  return 0;
}

static int case_apis(int ops) {
  blk live[NLIVE] = {{0}};
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  for (int op = 0; op < ops && test_failures() == 0; op++) {
    int k = (int)(rnd(&rng) % NLIVE);
    blk *b = &live[k];
    if (b->p) {
      if (!intact(b)) FAIL("op %d: block %p of %zu bytes corrupted", op, b->p, b->n);
      unsigned what = rnd(&rng) % 4;
      if (what == 0) { /* realloc: grow or shrink */
        size_t n = rnd(&rng) & 1 ? draw_size() : b->n / 2 + 1 + rnd(&rng) % (b->n / 2 + 1);
        void *q = jw_realloc(b->p, n);
        if (q == NULL) {
          FAIL("realloc(%p, %zu): %s", b->p, n, strerror(errno));
          continue;
        }
        b->p = q;
        if (!intact_upto(b, n < b->n ? n : b->n)) FAIL("op %d: realloc to %zu lost contents", op, n);
        b->n = n;
        b->seed++;
        fill(b);
        if (jw_malloc_usable_size(q) < n) FAIL("realloc(%zu): usable %zu", n, jw_malloc_usable_size(q));
        overlaps(live, NLIVE, k);
        continue;
      }
      jw_free(b->p);
      b->p = NULL;
      continue;
    }
    size_t n = draw_size();
    unsigned what = rnd(&rng) % 6;
    size_t align = 16;
    int zero = 0;
    void *p = NULL;
    switch (what) {
      case 0:
      case 1:
        p = jw_malloc(n);
        break;
      case 2:
        p = jw_calloc(1, n);
        zero = 1;
        break;
      case 3:
        align = draw_align();
        if (jw_posix_memalign(&p, align, n) != 0) p = NULL;
        break;
      case 4:
        align = draw_align();
        p = jw_aligned_alloc(align, (n + align - 1) & ~(align - 1));
        break;
      default:
        align = draw_align();
        p = jw_memalign(align, n);
        break;
    }
    if (p == NULL) {
      FAIL("op %d: allocation of %zu at %zu failed: %s", op, n, align, strerror(errno));
      continue;
    }
    if ((uintptr_t)p & (align - 1)) FAIL("op %d: %p not %zu-aligned", op, p, align);
    if (jw_malloc_usable_size(p) < n) FAIL("op %d: %zu bytes asked, %zu usable", op, n, jw_malloc_usable_size(p));
    if (zero) {
      const unsigned char *c = p;
      for (size_t i = 0; i < n; i++)
        if (c[i]) {
          FAIL("op %d: calloc(%zu) byte %zu is %u", op, n, i, c[i]);
          break;
        }
    }
    b->p = p;
    b->n = n;
    b->seed = (uint8_t)rnd(&rng);
    fill(b);
    overlaps(live, NLIVE, k);
  }
  for (int k = 0; k < NLIVE; k++)
    if (live[k].p) {
      if (!intact(&live[k])) FAIL("block %p corrupted at the end", live[k].p);
      jw_free(live[k].p);
    }
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "apis: %ld live bytes after everything was freed, %ld before", live1, live0);
  jw_stats s = st();
  CHECK(s.invalid_frees == 0, "apis: %llu valid frees reported", (unsigned long long)s.invalid_frees);
  printf("apis: %d ops, live bytes back to %ld, %llu large mallocs\n", ops, live1,
         (unsigned long long)s.large_mallocs);
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- dbl ---- */

static void *victim;
static void *free_victim(void *arg) {
  (void)arg;
  jw_free(victim);
  return NULL;
}

/* One double free of p through `how`: reported once, nothing else. */
static void expect_reported(const char *what, void (*how)(void *), void *p) {
  uint64_t inv0 = st().invalid_frees;
  how(p);
  uint64_t inv1 = st().invalid_frees;
  CHECK(inv1 == inv0 + 1, "dbl: %s: %llu reports", what, (unsigned long long)(inv1 - inv0));
}
static void do_free(void *p) { jw_free(p); }
static void do_realloc(void *p) {
  errno = 0;
  void *q = jw_realloc(p, 300000);
  CHECK(q == NULL && errno == EINVAL, "dbl: realloc of a freed range returned %p (errno %d)", q, errno);
}
static void do_realloc0(void *p) { jw_realloc(p, 0); }
static void do_remote_free(void *p) {
  victim = p;
  pthread_t t;
  pthread_create(&t, NULL, free_victim, NULL);
  pthread_join(t, NULL);
}

/* After a reported double free of a range of n bytes, three mallocs of its
 * class get distinct ranges (the cached one at most once). */
static void distinct_after(const char *what, size_t n) {
  void *a = jw_malloc(n), *b = jw_malloc(n), *c = jw_malloc(n);
  CHECK(a && b && c && a != b && b != c && a != c, "dbl: %s: the same range handed out twice (%p %p %p)", what, a,
        b, c);
  jw_free(a);
  jw_free(b);
  jw_free(c);
}

static void *alloc_plain(size_t n) { return jw_malloc(n); }
static void *alloc_aligned(size_t n) { return jw_aligned_alloc(4096, n); }
static void *alloc_memalign64k(size_t n) { /* over-aligned: interior records unless the start is aligned */
  void *q = NULL;
  return jw_posix_memalign(&q, 65536, n - 65536) == 0 ? q : NULL;
}

/* A range allocated one way, freed, then released again another way. */
static const struct {
  const char *what;
  void *(*alloc)(size_t);
  void (*again)(void *);
} dbl_ways[] = {
    {"free twice", alloc_plain, do_free},
    {"realloc after free", alloc_plain, do_realloc},
    {"realloc(p, 0) after free", alloc_plain, do_realloc0},
    {"another thread frees a cached range", alloc_plain, do_remote_free},
    {"aligned_alloc(4096) freed twice", alloc_aligned, do_free},
    {"posix_memalign(64 KiB) freed twice", alloc_memalign64k, do_free},
};

static int case_dbl(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  static const size_t sizes[] = {81920, 200000, 500000, 1 << 20};
  for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t n = sizes[s];
    for (unsigned k = 0; k < sizeof dbl_ways / sizeof *dbl_ways; k++) {
      void *p = dbl_ways[k].alloc(n);
      CHECK(p != NULL, "dbl: %s: allocation of %zu failed", dbl_ways[k].what, n);
      jw_free(p);
      expect_reported(dbl_ways[k].what, dbl_ways[k].again, p);
      distinct_after(dbl_ways[k].what, n);
    }
    /* realloc moving a cached-class range, then the old pointer freed. */
    void *p = jw_malloc(n), *q = jw_realloc(p, n * 3);
    CHECK(q != NULL, "realloc grow failed");
    if (q != p) expect_reported("free of a range realloc moved", do_free, p);
    jw_free(q);
    distinct_after("free of a range realloc moved", n);
  }
  /* Valid frees of the same shapes: none reported. */
  uint64_t inv0 = st().invalid_frees;
  for (int r = 0; r < 200; r++) {
    size_t n = sizes[r % 4];
    void *p = jw_malloc(n), *q = jw_aligned_alloc(4096, n), *m = NULL;
    jw_posix_memalign(&m, 8192, n);
    p = jw_realloc(p, n / 2 + 4096);
    victim = q;
    pthread_t t;
    pthread_create(&t, NULL, free_victim, NULL);
    pthread_join(t, NULL);
    jw_free(m);
    jw_free(p);
  }
  uint64_t inv1 = st().invalid_frees;
  CHECK(inv1 == inv0, "dbl: %llu valid frees reported", (unsigned long long)(inv1 - inv0));
  printf("dbl: every double free of a cached range reported once\n");
  return test_failures() != 0;
}

/* ---- xexit ---- */

#define XT 16       /* threads: oversubscribed on 2 cores */
#define XN 24       /* ranges each allocates per round */
static blk handed[XT][XN];
static atomic_int handed_ready[XT];

static size_t cached_class(uint64_t r) {
  static const size_t g[] = {20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256};
  return (g[r % 16] << 12) - (size_t)((r >> 8) % 4000);
}

static void *xexit_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
  blk own[XN];
  for (int i = 0; i < XN; i++) {
    size_t n = cached_class(rnd(&s));
    blk b = {jw_malloc(n), n, (uint8_t)rnd(&s)};
    if (b.p == NULL) {
      FAIL("xexit: malloc failed");
      return NULL;
    }
    fill(&b);
    if (i & 1) handed[id][i] = b;
    else own[i] = b;
  }
  atomic_store(&handed_ready[id], 1);
  /* Free the neighbour's half (it may be exiting right now). */
  int nb = (id + 1) % XT;
  TEST_WAIT_UNTIL(atomic_load(&handed_ready[nb]));
  for (int i = 1; i < XN; i += 2) {
    if (!intact(&handed[nb][i])) FAIL("xexit: a handed range corrupted");
    jw_free(handed[nb][i].p);
  }
  /* Then our own, into our cache, and a few more mallocs/frees of them. */
  for (int i = 0; i < XN; i += 2) {
    if (!intact(&own[i])) FAIL("xexit: an own range corrupted");
    jw_free(own[i].p);
  }
  for (int i = 0; i < XN; i++) jw_free(jw_malloc(cached_class(rnd(&s))));
  return NULL;
}

static int case_xexit(int rounds) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  jw_stats a = st();
  for (int r = 0; r < rounds; r++) {
    pthread_t t[XT];
    for (int i = 0; i < XT; i++) atomic_store(&handed_ready[i], 0);
    for (int i = 0; i < XT; i++) pthread_create(&t[i], NULL, xexit_thread, (void *)(intptr_t)i);
    for (int i = 0; i < XT; i++) pthread_join(t[i], NULL);
  }
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "xexit: %ld live bytes after every thread exited, %ld before", live1, live0);
  jw_stats b = st();
  CHECK(b.invalid_frees == 0, "xexit: valid frees reported");
  /* Served from the block cache or not, every range malloc has its free. */
  CHECK(b.large_mallocs - a.large_mallocs == b.large_frees - a.large_frees,
        "xexit: %llu range mallocs, %llu frees", (unsigned long long)(b.large_mallocs - a.large_mallocs),
        (unsigned long long)(b.large_frees - a.large_frees));
  printf("xexit: %d rounds of %d threads, live bytes back to %ld\n", rounds, XT, live1);
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- trim ---- */

#define TT 12
#define TSLOTS 256
static _Atomic(blk *) shared_slot[TSLOTS];
static atomic_int trim_stop;

static void *trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&trim_stop)) {
    jw_malloc_trim(0);
    sched_yield();
  }
  return NULL;
}

static size_t any_size(uint64_t r) {
  switch (r % 5) {
    case 0:
      return 16 + (r >> 8) % 2000;
    case 1:
      return 2048 + (r >> 8) % 14000;
    case 2:
      return 16384 + (r >> 8) % 65536;
    default:
      return cached_class(r >> 8);
  }
}

static void *churner(void *arg) {
  uint64_t s = 0xabcdef12345ull * (uint64_t)((intptr_t)arg + 1);
  long ops = (long)arg >= 0 ? scaled(6000) : 0;
  for (long op = 0; op < ops; op++) {
    uint64_t r = rnd(&s);
    size_t n = any_size(r);
    blk *b = jw_malloc(sizeof *b);
    b->n = n;
    b->p = jw_malloc(n);
    b->seed = (uint8_t)r;
    if (b->p == NULL) {
      FAIL("trim: malloc(%zu) failed", n);
      return NULL;
    }
    fill(b);
    /* Swap with a shared slot: the old one (another thread's, usually) is freed here. */
    blk *old = atomic_exchange(&shared_slot[(r >> 40) % TSLOTS], b);
    if (old) {
      if (!intact(old)) FAIL("trim: block %p of %zu bytes corrupted", old->p, old->n);
      jw_free(old->p);
      jw_free(old);
    }
    if ((op & 255) == 0) jw_malloc_trim(0);
  }
  return NULL;
}

static int case_trim(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  pthread_t t[TT], tr[4];
  for (int i = 0; i < 4; i++) pthread_create(&tr[i], NULL, trimmer, NULL);
  for (int i = 0; i < TT; i++) pthread_create(&t[i], NULL, churner, (void *)(intptr_t)i);
  for (int i = 0; i < TT; i++) pthread_join(t[i], NULL);
  atomic_store(&trim_stop, 1);
  for (int i = 0; i < 4; i++) pthread_join(tr[i], NULL);
  for (int i = 0; i < TSLOTS; i++) {
    blk *b = atomic_exchange(&shared_slot[i], NULL);
    if (!b) continue;
    if (!intact(b)) FAIL("trim: block corrupted at the end");
    jw_free(b->p);
    jw_free(b);
  }
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "trim: %ld live bytes after everything was freed and trimmed, %ld before", live1, live0);
  CHECK(st().invalid_frees == 0, "trim: valid frees reported");
  printf("trim: %d churners, 4 trimmers; live bytes back to %ld\n", TT, live1);
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- fork ---- */

static atomic_int fork_stop;
static void *range_churner(void *arg) {
  uint64_t s = 0x5151ull * (uint64_t)((intptr_t)arg + 7);
  blk keep[6] = {{0}};
  while (!atomic_load(&fork_stop)) {
    /* Fill the cache: 1 MiB ranges freed while it is full grow its budget to 4 MiB. */
    void *m[6];
    for (int i = 0; i < 6; i++) m[i] = jw_malloc(1 << 20);
    for (int i = 0; i < 6; i++) jw_free(m[i]);
    int k = (int)(rnd(&s) % 6);
    if (keep[k].p) {
      if (!intact(&keep[k])) FAIL("fork: parent range corrupted");
      jw_free(keep[k].p);
    }
    keep[k].n = cached_class(rnd(&s));
    keep[k].p = jw_malloc(keep[k].n);
    keep[k].seed = (uint8_t)rnd(&s);
    fill(&keep[k]);
    /* Empty a whole root now and then: the reserve. */
    void *big = jw_malloc(4u << 20);
    jw_free(big);
  }
  for (int k = 0; k < 6; k++) jw_free(keep[k].p);
  return NULL;
}

static int child_main(void) {
  /* A range this (the forking) thread caches in the child: freeing it again
   * is a double free. (The parent's cached ranges may have been aged and
   * handed to another thread before the fork: not a case to assert.) */
  jw_option_set("ABORT_ON_ERROR", 0);
  void *cached = jw_malloc(600000);
  jw_free(cached);
  uint64_t inv0 = st().invalid_frees;
  jw_free(cached);
  if (st().invalid_frees != inv0 + 1) {
    fprintf(stderr, "child: a double free of a cached range not reported\n");
    return 1;
  }
  jw_stats a = st();
  uint64_t roots0 = a.backend_root_bytes;
  for (int r = 0; r < 200; r++) {
    void *m[8];
    for (int i = 0; i < 8; i++) {
      m[i] = jw_malloc(i & 1 ? 1 << 20 : 3u << 20);
      if (!m[i]) {
        fprintf(stderr, "child: malloc failed\n");
        return 1;
      }
      memset(m[i], i, 4096);
    }
    for (int i = 0; i < 8; i++) jw_free(m[i]);
    if (r % 50 == 0) jw_malloc_trim(0);
  }
  jw_stats b = st();
  /* 200 rounds of 16 MiB: without reuse, 800+ roots mapped. */
  if (b.backend_roots_mapped - a.backend_roots_mapped > 64) {
    fprintf(stderr, "child: %llu roots mapped for 200 rounds of 16 MiB (emptied roots not reused)\n",
            (unsigned long long)(b.backend_roots_mapped - a.backend_roots_mapped));
    return 1;
  }
  /* Every root the child emptied (reserve included) is given back by its
   * reclaimer (restarted in the child) in time: none stuck. */
  double t0 = test_now_s();
  uint64_t roots = 0;
  while (test_now_s() - t0 < HANG) {
    jw_malloc_trim(0);
    if ((roots = st().backend_root_bytes) <= roots0) break;
    usleep(5000);
  }
  if (roots > roots0) {
    fprintf(stderr, "child: %llu MiB of roots mapped with everything freed, %llu MiB at the fork\n",
            (unsigned long long)(roots >> 20), (unsigned long long)(roots0 >> 20));
    return 1;
  }
  return 0;
}

static int case_fork(void) {
  pthread_t t[6];
  for (int i = 0; i < 6; i++) pthread_create(&t[i], NULL, range_churner, (void *)(intptr_t)i);
  for (int f = 0; f < scaled(20); f++) {
    void *m[4];
    for (int i = 0; i < 4; i++) m[i] = jw_malloc(600000);
    for (int i = 0; i < 4; i++) jw_free(m[i]);
    pid_t pid = fork();
    if (pid == 0) _exit(child_main());
    int status = 0;
    double t0 = test_now_s();
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (test_now_s() - t0 > HANG) {
        FAIL("fork: child %d hangs", (int)pid);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        break;
      }
      usleep(1000);
    }
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) FAIL("fork: child %d failed (status %#x)", f, status);
  }
  atomic_store(&fork_stop, 1);
  for (int i = 0; i < 6; i++) pthread_join(t[i], NULL);
  CHECK(st().invalid_frees == 0, "fork: valid frees reported in the parent");
  printf("fork: %ld children forked from a churning parent, each reused emptied roots\n", scaled(20));
  return test_failures() != 0;
}

/* ---- reserve ---- */

#define RT 10
static void *root_emptier(void *arg) {
  uint64_t s = 0x7777ull * (uint64_t)((intptr_t)arg + 3);
  long ops = scaled(600);
  for (long op = 0; op < ops; op++) {
    uint64_t r = rnd(&s);
    blk b = {NULL, r & 1 ? 4u << 20 : 3u << 20, (uint8_t)r};
    b.p = jw_malloc(b.n);
    if (!b.p) {
      FAIL("reserve: malloc failed");
      return NULL;
    }
    fill(&b);
    blk c = {jw_malloc(cached_class(r >> 8)), cached_class(r >> 8), (uint8_t)(r >> 16)};
    fill(&c);
    sched_yield();
    if (!intact(&b) || !intact(&c)) FAIL("reserve: a range handed out twice (contents changed)");
    jw_free(b.p);
    jw_free(c.p);
  }
  return NULL;
}

static int case_reserve(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  pthread_t t[RT];
  for (int i = 0; i < RT; i++) pthread_create(&t[i], NULL, root_emptier, (void *)(intptr_t)i);
  for (int i = 0; i < RT; i++) pthread_join(t[i], NULL);
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "reserve: %ld live bytes after everything was freed, %ld before", live1, live0);
  /* The reclaimer gives the emptied roots back (reserve included) in time. */
  double t0 = test_now_s();
  uint64_t roots = 0;
  while (test_now_s() - t0 < HANG) {
    jw_malloc_trim(0);
    roots = st().backend_root_bytes;
    if (roots <= (4u << 20) * 2) break;
    usleep(20000);
  }
  CHECK(roots <= (4u << 20) * 2, "reserve: %llu MiB of roots still mapped with nothing live",
        (unsigned long long)(roots >> 20));
  printf("reserve: %d threads emptied roots; %llu roots reused from the reserve, %llu MiB mapped at the end\n", RT,
         (unsigned long long)st().backend_roots_reused, (unsigned long long)(roots >> 20));
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- lazypark ---- */

#define LP_BLOCKS 2000 /* 32-byte blocks: about 16 slabs, most used up and queued unparked */
static void *lp_blocks[LP_BLOCKS];
static atomic_int lp_freed;

static void *lp_owner(void *arg) {
  int stay = (int)(intptr_t)arg;
  for (int i = 0; i < LP_BLOCKS; i++) {
    lp_blocks[i] = jw_malloc(32);
    memset(lp_blocks[i], 0x33, 32);
  }
  set_step(1);
  if (stay) { /* idle until the others freed everything, then trim: collects the queued slabs */
    TEST_WAIT_UNTIL(atomic_load(&lp_freed) >= LP_BLOCKS);
    jw_malloc_trim(0);
  }
  return NULL;
}

static void *lp_freer(void *arg) {
  int id = (int)(intptr_t)arg;
  wait_step(1);
  for (int i = id; i < LP_BLOCKS; i += 8) {
    const unsigned char *c = lp_blocks[i];
    if (c[0] != 0x33 || c[31] != 0x33) FAIL("lazypark: block %d corrupted", i);
    jw_free(lp_blocks[i]);
    atomic_fetch_add(&lp_freed, 1);
    if ((i & 63) == 0) sched_yield();
  }
  jw_malloc_trim(0); /* pushes this thread's pending chains */
  return NULL;
}

/* The owner of used-up slabs (queued unparked) exits, or idles and trims,
 * while eight threads free every block: every page comes back. */
static int case_lazypark(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  for (int round = 0; round < scaled(20); round++) {
    int stay = round & 1;
    set_step(0);
    atomic_store(&lp_freed, 0);
    pthread_t o, f[8];
    pthread_create(&o, NULL, lp_owner, (void *)(intptr_t)stay);
    for (int i = 0; i < 8; i++) pthread_create(&f[i], NULL, lp_freer, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++) pthread_join(f[i], NULL);
    pthread_join(o, NULL);
    long live1 = settle_to(live0);
    CHECK(live1 == live0, "lazypark round %d (owner %s): %ld live bytes after every block was freed, %ld before",
          round, stay ? "idles and trims" : "exits", live1, live0);
    if (test_failures()) break;
  }
  printf("lazypark: %ld rounds, every slab page came back\n", scaled(20));
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- retain ---- */

/* JWMALLOC_RECLAIM=0: "an entirely free root beyond JWMALLOC_RETAIN_ROOTS is
 * unmapped at once" (README), root reserve or not. */
static int case_retain(void) {
  void *warm = jw_malloc(48);
  jw_malloc_trim(0);
  uint64_t r0 = st().backend_root_bytes;
  for (int round = 0; round < 5; round++) {
    void *m[6];
    for (int i = 0; i < 6; i++) m[i] = jw_malloc((3u << 20) + 4096);
    for (int i = 0; i < 6; i++) jw_free(m[i]);
    jw_malloc_trim(0);
    uint64_t r1 = st().backend_root_bytes;
    CHECK(r1 <= r0 + (4u << 20), "retain: %llu MiB of roots mapped after freeing 6 roots' ranges, %llu before",
          (unsigned long long)(r1 >> 20), (unsigned long long)(r0 >> 20));
  }
  printf("retain: free roots beyond JWMALLOC_RETAIN_ROOTS=1 unmapped\n");
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- frozen ---- */

#ifdef JW_TEST_HOOKS
#define FT 8
static void *frozen_holder(void *arg) {
  (void)arg;
  may_freeze = 1;
  jw_free(jw_malloc((size_t)2 << 20)); /* frozen in the allocation, holding the backend lock */
  return NULL;
}

/* With the backend lock held for good: whole roots, 1-3 MiB ranges and
 * cached ranges allocated (the reserve, bitmaps, lock-free splits, deferred
 * reuse, roots mapped without the lock) and freed (bitmaps, the reserve,
 * the deferred list). */
static void *frozen_worker(void *arg) {
  uint64_t s = 0x1234567ull * (uint64_t)((intptr_t)arg + 11);
  static const size_t sz[] = {4u << 20, 3u << 20, 2u << 20, 1u << 20, 300000, (4u << 20) - 4096};
  blk keep[4] = {{0}};
  for (long op = 0; op < scaled(300); op++) {
    uint64_t r = rnd(&s);
    int k = (int)(r % 4);
    if (keep[k].p) {
      if (!intact(&keep[k])) FAIL("frozen: range %p of %zu bytes corrupted", keep[k].p, keep[k].n);
      jw_free(keep[k].p);
    }
    keep[k].n = sz[(r >> 8) % 6];
    keep[k].p = (r >> 16) & 1 ? jw_malloc(keep[k].n) : jw_memalign((size_t)1 << (12 + (r >> 20) % 11), keep[k].n);
    keep[k].seed = (uint8_t)(r >> 32);
    if (keep[k].p == NULL) {
      FAIL("frozen: allocation of %zu failed", keep[k].n);
      continue;
    }
    fill(&keep[k]);
  }
  for (int k = 0; k < 4; k++) {
    if (keep[k].p && !intact(&keep[k])) FAIL("frozen: range corrupted at the end");
    jw_free(keep[k].p);
  }
  return NULL;
}

static int case_frozen(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  /* Emptied roots into the reserve. */
  void *r[4];
  for (int i = 0; i < 4; i++) r[i] = jw_malloc(4u << 20);
  for (int i = 0; i < 4; i++) jw_free(r[i]);
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  pthread_t h, w[FT];
  pthread_create(&h, NULL, frozen_holder, NULL);
  double t0 = test_now_s();
  while (!atomic_load(&frozen) && test_now_s() - t0 < HANG) usleep(1000);
  CHECK(atomic_load(&frozen), "frozen: the holder never took the backend lock");
  jw_stats a = st();
  for (int i = 0; i < FT; i++) pthread_create(&w[i], NULL, frozen_worker, (void *)(intptr_t)i);
  for (int i = 0; i < FT; i++) pthread_join(w[i], NULL);
  /* Double frees, the lock still held (after the workers: a range freed
   * into a bitmap may be taken again at once by another thread, and its
   * second free would then be that thread's valid one). */
  static const size_t dsz[] = {4u << 20, 3u << 20, 2u << 20, 1u << 20, 300000, 90000};
  int ndbl = 0;
  for (unsigned i = 0; i < sizeof dsz / sizeof *dsz; i++, ndbl++) {
    void *d = jw_malloc(dsz[i]);
    jw_free(d);
    jw_free(d);
  }
  jw_stats b = st();
  atomic_store(&release_holder, 1);
  pthread_join(h, NULL);
  jw_test_set_lock_hook(NULL);
  long live1 = settle_to(live0);
  CHECK(b.invalid_frees - a.invalid_frees == (uint64_t)ndbl, "frozen: %llu double frees reported, %d made",
        (unsigned long long)(b.invalid_frees - a.invalid_frees), ndbl);
  CHECK(live1 == live0, "frozen: %ld live bytes after everything was freed, %ld before", live1, live0);
  printf("frozen: lock held for good; %llu roots reused from the reserve, %llu mapped without the lock, %llu "
         "deferred frees reused\n",
         (unsigned long long)(b.backend_roots_reused - a.backend_roots_reused),
         (unsigned long long)(b.backend_lf_roots - a.backend_lf_roots),
         (unsigned long long)(b.backend_lf_recycled - a.backend_lf_recycled));
  jw_free(warm);
  return test_failures() != 0;
}
#endif

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_breakit5 apis|dbl|xexit|trim|fork|reserve|lazypark|retain [SCALE]\n");
    return 2;
  }
  (void)make; /* checked_blocks.h's helpers: this test checks whole requested sizes itself */
  (void)check_and_free;
  if (argc > 2) scale = atoi(argv[2]);
  const char *c = argv[1];
  if (!strcmp(c, "apis")) return case_apis((int)scaled(40000));
  if (!strcmp(c, "dbl")) return case_dbl();
  if (!strcmp(c, "xexit")) return case_xexit((int)scaled(20));
  if (!strcmp(c, "trim")) return case_trim();
  if (!strcmp(c, "fork")) return case_fork();
  if (!strcmp(c, "reserve")) return case_reserve();
  if (!strcmp(c, "lazypark")) return case_lazypark();
  if (!strcmp(c, "retain")) return case_retain();
#ifdef JW_TEST_HOOKS
  if (!strcmp(c, "frozen")) return case_frozen();
#endif
  fprintf(stderr, "unknown case %s\n", c);
  return 2;
}
