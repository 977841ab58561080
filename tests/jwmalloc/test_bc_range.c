/* The block cache's ranges of 80 KiB-1 MiB (docs/design/frontend.md, "Ranges
 * of 80 KiB-1 MiB: a second budget that scales with recent reuse"): kept per
 * thread between a free and the thread's next malloc of the class, within a
 * budget the aging pass sets from what the thread reused.
 *
 *   reuse    a freed 600 KiB range is handed out again to its thread, with no
 *            backend call; malloc_trim gives what is cached back.
 *   aging    an idle thread's cached ranges (its budget grew past the least
 *            one while it freed into a full cache): the first aging pass
 *            keeps them (marked stale) and sets the budget to what it holds,
 *            the second gives them back (one to two intervals) and the budget
 *            falls back to the least one. Aging passes
 *            are run by the test (JWMALLOC_RECLAIM=0), so that "one to two
 *            passes" is exact.
 *   reclaimer  the same with the reclaim thread running (2 ms interval): the
 *            idle thread's cache is emptied without the test's help.
 *   bound    a random churn of 16 KiB-1 MiB ranges with aging passes between
 *            bursts: after every call both budgets hold, group 1's budget
 *            stays within its least and greatest values and grows to the
 *            greatest while the thread churns, fewer range mallocs than
 *            there are reach the backend, every block's contents survive.
 *   exit     a thread that exits with ranges cached gives them back: the
 *            backend's live bytes return to where they were before it ran.
 *   api_mix  one thread, a random mix of malloc, calloc, realloc (growing,
 *            shrinking, in place or moved), posix_memalign, aligned_alloc,
 *            memalign and free over 2 KiB-1.2 MiB (every cached class and its
 *            neighbours, alignments 16 B-1 MiB): every block has the usable
 *            size it asked for, no two live blocks overlap, calloc memory is
 *            zero, contents survive realloc and the cache; after everything
 *            is freed and trimmed the live bytes are where they started.
 *   exit_handover  16 threads (oversubscribed) allocate ranges of every
 *            cached class, free half themselves (their caches fill and their
 *            budgets grow) and hand the other half to the next thread, then
 *            exit while that thread frees them; rounds of it: contents intact,
 *            live bytes back, range mallocs equal range frees.
 * Usage: test_bc_range CASE [SCALE] (SCALE: percent of the full size).
 *
 * White-box (the thread's jw_tcache): linked to libjwmalloc_api.a, the jw_ API
 * beside the system allocator. Waits are bounded for hangs, never timing
 * checks. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/runtime.h"
#include "frontend/thread_cache.h"
#include "jwmalloc.h"

#include "range_blocks.h"
#include "thread_test.h"

static jw_bcache *my_cache(void) {
  jw_tcache *tc = jw_tls_state.tc;
  return tc ? &tc->bc : NULL;
}

static int case_reuse(void) {
  void *warm = jw_malloc(48); /* the thread cache */
  jw_bcache *bc = my_cache();
  CHECK(bc != NULL, "no thread cache");
  if (!bc) return 1;
  void *p = jw_malloc(600000);
  memset(p, 7, 600000);
  jw_stats s0 = st();
  jw_free(p);
  CHECK(bc->used[1] >= 600000, "a freed 600 KiB range is not cached (%u bytes in group 1)", bc->used[1]);
  void *q = jw_malloc(590000); /* the same class (152 granules -> 160) */
  jw_stats s1 = st();
  CHECK(q == p, "the cached range was not handed out again (%p, then %p)", p, q);
  CHECK(s1.backend_allocs == s0.backend_allocs && s1.backend_frees == s0.backend_frees,
        "the backend was called (%llu allocations, %llu frees)",
        (unsigned long long)(s1.backend_allocs - s0.backend_allocs),
        (unsigned long long)(s1.backend_frees - s0.backend_frees));
  CHECK(bc->used[1] == 0, "group 1 still holds %u bytes", bc->used[1]);
  /* calloc from the cache: zeroed although the range was written. */
  memset(q, 9, 590000);
  jw_free(q);
  unsigned char *z = jw_calloc(1, 590000);
  CHECK(z == q, "calloc did not take the cached range");
  int zero = 1;
  for (size_t i = 0; i < 590000; i += 512) zero &= z[i] == 0;
  CHECK(zero && z[589999] == 0, "calloc from the block cache is not zeroed");
  jw_free(z);
  /* malloc_trim gives it back. */
  uint64_t live = st().page_source_live_bytes;
  CHECK(bc->used[1] != 0, "nothing cached before trim");
  jw_malloc_trim(0);
  CHECK(bc->used[0] == 0 && bc->used[1] == 0, "trim left %u + %u bytes cached", bc->used[0], bc->used[1]);
  CHECK(st().page_source_live_bytes + 600000 <= live, "trim gave no range back to the backend");
  jw_free(warm);
  printf("reuse: a freed 600 KiB range came back to its thread with no backend call; trim gave it back\n");
  return test_failures() != 0;
}

/* ---- an idle thread's cache ages ---- */

static jw_bcache *idle_bc;

/* Recycles a few large classes (the budget grows), frees one of each into
 * its cache, then idles until told to exit. */
static void *idle_owner(void *arg) {
  (void)arg;
  static const size_t sizes[] = {90000, 200000, 300000, 700000, 1000000};
  void *keep = jw_malloc(48);
  for (int round = 0; round < 50; round++)
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) jw_free(jw_malloc(sizes[i]));
  idle_bc = my_cache();
  set_step(1);
  wait_step(2);
  jw_free(keep);
  return NULL;
}

static int case_aging(void) {
  set_step(0);
  pthread_t t;
  pthread_create(&t, NULL, idle_owner, NULL);
  wait_step(1);
  jw_bcache *bc = idle_bc;
  uint32_t cached = bc->used[1];
  CHECK(cached >= 1000000, "the thread cached only %u bytes of large ranges", cached);
  uint64_t live0 = st().page_source_live_bytes;
  jw_tc_age_pools(); /* first pass: the budget from the reuse, the entries marked stale */
  uint32_t after1 = bc->used[1], limit1 = bc->limit[1];
  uint32_t want = cached > JW_BC_BIG_MIN_BYTES ? cached : JW_BC_BIG_MIN_BYTES;
  CHECK(limit1 == want, "budget after the interval %u, want %u (what stayed cached)", limit1, want);
  CHECK(cached > JW_BC_BIG_MIN_BYTES, "the budget never grew (%u bytes cached)", cached);
  CHECK(after1 == cached, "the first pass gave back entries used in its interval (%u -> %u bytes)", cached, after1);
  jw_tc_age_pools(); /* second pass: they stayed unused */
  uint32_t after2 = bc->used[1];
  uint64_t live2 = st().page_source_live_bytes;
  CHECK(after2 == 0 && bc->used[0] == 0, "an idle thread still caches %u + %u bytes after two passes", bc->used[0],
        after2);
  CHECK(bc->limit[1] == JW_BC_BIG_MIN_BYTES, "an idle thread's budget is %u, want %u", bc->limit[1],
        (unsigned)JW_BC_BIG_MIN_BYTES);
  CHECK(live2 + cached <= live0, "aged ranges did not go back to the backend (%llu -> %llu live)",
        (unsigned long long)live0, (unsigned long long)live2);
  printf("aging: an idle thread cached %u KiB of large ranges: kept by the first pass, given back by the second; "
         "budget %u KiB after the busy interval, %u KiB idle\n",
         cached >> 10, limit1 >> 10, bc->limit[1] >> 10);
  set_step(2);
  pthread_join(t, NULL);
  return test_failures() != 0;
}

static int case_reclaimer(void) {
  long on = 0;
  jw_option_get("RECLAIM", &on);
  if (!on) {
    printf("reclaimer: JWMALLOC_RECLAIM=0, nothing to show\n");
    return 0;
  }
  set_step(0);
  pthread_t t;
  pthread_create(&t, NULL, idle_owner, NULL);
  wait_step(1);
  jw_bcache *bc = idle_bc;
  double t0 = test_now_s();
  /* Read without the owner's lock: the owner is idle, the reclaimer changes
   * the field under the pool lock; a torn read only delays the loop. */
  while (__atomic_load_n(&bc->used[1], __ATOMIC_RELAXED) != 0 && test_now_s() - t0 < HANG) {
    struct timespec ts = {0, 1000000};
    nanosleep(&ts, NULL);
  }
  CHECK(__atomic_load_n(&bc->used[1], __ATOMIC_RELAXED) == 0, "the reclaim thread left %u bytes cached",
        bc->used[1]);
  printf("reclaimer: the reclaim thread emptied an idle thread's large ranges\n");
  set_step(2);
  pthread_join(t, NULL);
  return test_failures() != 0;
}

/* ---- the budgets hold under churn ---- */

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) { return rnd(&rng); }
/* Log-uniform in 16 KiB..1 MiB, a few above it and a few midend blocks. */
static size_t draw(void) {
  unsigned r = (unsigned)(next() % 100);
  if (r < 5) return 2048 + (size_t)(next() % 14000);
  if (r < 8) return (1 << 20) + (size_t)(next() % 100000);
  double e = 14.0 + 6.0 * (double)(next() % 10000) / 10000.0;
  return (size_t)(1ull << (unsigned)e) + (size_t)(next() % (1ull << (unsigned)e));
}

static int case_bound(int ops) {
  enum { SLOTS = 48 };
  void *slot[SLOTS] = {0};
  void *warm = jw_malloc(48);
  jw_bcache *bc = my_cache();
  uint32_t max_used = 0, max_limit = 0;
  uint64_t hits0 = st().large_mallocs, back0 = st().backend_allocs;
  for (int i = 0; i < ops; i++) {
    unsigned k = (unsigned)(next() % SLOTS);
    if (slot[k]) check_and_free(slot[k]); /* its contents checked */
    slot[k] = make(draw(), (uint64_t)i);
    CHECK(bc->used[0] <= JW_BC_MAX_BYTES, "group 0 holds %u bytes", bc->used[0]);
    CHECK(bc->used[1] <= bc->limit[1], "group 1 holds %u bytes over its budget %u", bc->used[1], bc->limit[1]);
    CHECK(bc->limit[1] >= JW_BC_BIG_MIN_BYTES && bc->limit[1] <= JW_BC_BIG_MAX_BYTES, "budget %u out of range",
          bc->limit[1]);
    if (bc->used[1] > max_used) max_used = bc->used[1];
    if (bc->limit[1] > max_limit) max_limit = bc->limit[1];
    if (i % 500 == 499) {
      jw_tc_age_pools(); /* the owner's own pass: single-threaded, the fields read above stay exact */
      CHECK(bc->used[1] <= bc->limit[1], "after a pass, group 1 holds %u bytes over its budget %u", bc->used[1],
            bc->limit[1]);
    }
    if (test_failures()) break;
  }
  CHECK(max_limit == JW_BC_BIG_MAX_BYTES, "the budget never grew while the thread recycled (%u)", max_limit);
  CHECK(max_used > JW_BC_BIG_MIN_BYTES, "the cache never used more than its least budget (%u)", max_used);
  uint64_t hits = st().large_mallocs - hits0, back = st().backend_allocs - back0;
  CHECK(back < hits, "every range came from the backend (%llu of %llu)", (unsigned long long)back,
        (unsigned long long)hits);
  for (int k = 0; k < SLOTS; k++)
    if (slot[k]) check_and_free(slot[k]);
  jw_free(warm);
  printf("bound: %d random 16 KiB-1 MiB calls: group 1 held at most %u KiB (budget up to %u KiB), group 0 within "
         "%u KiB; %llu of %llu range mallocs reached the backend\n",
         ops, max_used >> 10, max_limit >> 10, (unsigned)(JW_BC_MAX_BYTES >> 10), (unsigned long long)back,
         (unsigned long long)hits);
  return test_failures() != 0;
}

/* ---- thread exit ---- */

static uint32_t exit_cached;
static void *exiter(void *arg) {
  (void)arg;
  static const size_t sizes[] = {30000, 90000, 200000, 500000, 1000000};
  for (int round = 0; round < 3; round++)
    for (unsigned i = 0; i < sizeof sizes / sizeof *sizes; i++) jw_free(jw_malloc(sizes[i]));
  jw_bcache *bc = my_cache();
  exit_cached = bc ? bc->used[0] + bc->used[1] : 0;
  return NULL;
}

static int case_exit(void) {
  void *warm = jw_malloc(48);
  jw_malloc_trim(0);
  uint64_t live0 = st().page_source_live_bytes;
  pthread_t t;
  pthread_create(&t, NULL, exiter, NULL);
  pthread_join(t, NULL);
  uint64_t live1 = st().page_source_live_bytes;
  CHECK(exit_cached >= 1000000, "the thread cached only %u bytes", exit_cached);
  CHECK(live1 == live0, "after the thread's exit the backend has %llu live bytes, %llu before it ran",
        (unsigned long long)live1, (unsigned long long)live0);
  printf("exit: a thread exited with %u KiB cached; the backend's live bytes are back to %llu KiB\n",
         exit_cached >> 10, (unsigned long long)(live1 >> 10));
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- api_mix: every allocation call over the cached classes ---- */

#define NLIVE 48
static uint64_t mix_rng = 0x243f6a8885a308d3ull;

static size_t draw_size(void) {
  static const size_t g[] = {5, 8, 16, 19, 20, 21, 24, 64, 79, 80, 81, 96, 128, 160, 200, 255, 256, 257, 300};
  uint64_t r = rnd(&mix_rng);
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
  return a[rnd(&mix_rng) % (sizeof a / sizeof *a)];
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

static int case_api_mix(void) {
  int ops = (int)scaled(40000);
  blk live[NLIVE] = {{0}};
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  for (int op = 0; op < ops && test_failures() == 0; op++) {
    int k = (int)(rnd(&mix_rng) % NLIVE);
    blk *b = &live[k];
    if (b->p) {
      if (!intact(b)) FAIL("op %d: block %p of %zu bytes corrupted", op, b->p, b->n);
      unsigned what = rnd(&mix_rng) % 4;
      if (what == 0) { /* realloc: grow or shrink */
        size_t n = rnd(&mix_rng) & 1 ? draw_size() : b->n / 2 + 1 + rnd(&mix_rng) % (b->n / 2 + 1);
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
    unsigned what = rnd(&mix_rng) % 6;
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
    b->seed = (uint8_t)rnd(&mix_rng);
    fill(b);
    overlaps(live, NLIVE, k);
  }
  for (int k = 0; k < NLIVE; k++)
    if (live[k].p) {
      if (!intact(&live[k])) FAIL("block %p corrupted at the end", live[k].p);
      jw_free(live[k].p);
    }
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "api_mix: %ld live bytes after everything was freed, %ld before", live1, live0);
  jw_stats s = st();
  CHECK(s.invalid_frees == 0, "api_mix: %llu valid frees reported", (unsigned long long)s.invalid_frees);
  printf("api_mix: %d ops, live bytes back to %ld, %llu large mallocs\n", ops, live1,
         (unsigned long long)s.large_mallocs);
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- exit_handover: threads exit while the next frees their ranges ---- */

#define XT 16       /* threads: oversubscribed on 2 cores */
#define XN 24       /* ranges each allocates per round */
static blk handed[XT][XN];
static atomic_int handed_ready[XT];


static void *xexit_thread(void *arg) {
  int id = (int)(intptr_t)arg;
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(id + 1);
  blk own[XN];
  for (int i = 0; i < XN; i++) {
    size_t n = cached_class(rnd(&s));
    blk b = {jw_malloc(n), n, (uint8_t)rnd(&s)};
    if (b.p == NULL) {
      FAIL("exit_handover: malloc failed");
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
    if (!intact(&handed[nb][i])) FAIL("exit_handover: a handed range corrupted");
    jw_free(handed[nb][i].p);
  }
  /* Then our own, into our cache, and a few more mallocs/frees of them. */
  for (int i = 0; i < XN; i += 2) {
    if (!intact(&own[i])) FAIL("exit_handover: an own range corrupted");
    jw_free(own[i].p);
  }
  for (int i = 0; i < XN; i++) jw_free(jw_malloc(cached_class(rnd(&s))));
  return NULL;
}

static int case_exit_handover(void) {
  int rounds = (int)scaled(20);
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
  CHECK(live1 == live0, "exit_handover: %ld live bytes after every thread exited, %ld before", live1, live0);
  jw_stats b = st();
  CHECK(b.invalid_frees == 0, "exit_handover: valid frees reported");
  /* Served from the block cache or not, every range malloc has its free. */
  CHECK(b.large_mallocs - a.large_mallocs == b.large_frees - a.large_frees,
        "exit_handover: %llu range mallocs, %llu frees", (unsigned long long)(b.large_mallocs - a.large_mallocs),
        (unsigned long long)(b.large_frees - a.large_frees));
  printf("exit_handover: %d rounds of %d threads, live bytes back to %ld\n", rounds, XT, live1);
  jw_free(warm);
  return test_failures() != 0;
}

static int case_bound_default(void) { return case_bound((int)scaled(20000)); }

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"reuse", case_reuse},     {"aging", case_aging},     {"reclaimer", case_reclaimer},
      {"bound", case_bound_default}, {"exit", case_exit},   {"api_mix", case_api_mix},
      {"exit_handover", case_exit_handover},
  };
  return TEST_MAIN(cases);
}
