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

#include "thread_test.h"

#define HANG 60.0 /* seconds: a bound for a hang */

static jw_stats stats(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

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
  jw_stats s0 = stats();
  jw_free(p);
  CHECK(bc->used[1] >= 600000, "a freed 600 KiB range is not cached (%u bytes in group 1)", bc->used[1]);
  void *q = jw_malloc(590000); /* the same class (152 granules -> 160) */
  jw_stats s1 = stats();
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
  uint64_t live = stats().page_source_live_bytes;
  CHECK(bc->used[1] != 0, "nothing cached before trim");
  jw_malloc_trim(0);
  CHECK(bc->used[0] == 0 && bc->used[1] == 0, "trim left %u + %u bytes cached", bc->used[0], bc->used[1]);
  CHECK(stats().page_source_live_bytes + 600000 <= live, "trim gave no range back to the backend");
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
  uint64_t live0 = stats().page_source_live_bytes;
  jw_tc_age_pools(); /* first pass: the budget from the reuse, the entries marked stale */
  uint32_t after1 = bc->used[1], limit1 = bc->limit[1];
  uint32_t want = cached > JW_BC_BIG_MIN_BYTES ? cached : JW_BC_BIG_MIN_BYTES;
  CHECK(limit1 == want, "budget after the interval %u, want %u (what stayed cached)", limit1, want);
  CHECK(cached > JW_BC_BIG_MIN_BYTES, "the budget never grew (%u bytes cached)", cached);
  CHECK(after1 == cached, "the first pass gave back entries used in its interval (%u -> %u bytes)", cached, after1);
  jw_tc_age_pools(); /* second pass: they stayed unused */
  uint32_t after2 = bc->used[1];
  uint64_t live2 = stats().page_source_live_bytes;
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
  uint64_t hits0 = stats().large_mallocs, back0 = stats().backend_allocs;
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
  uint64_t hits = stats().large_mallocs - hits0, back = stats().backend_allocs - back0;
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
  uint64_t live0 = stats().page_source_live_bytes;
  pthread_t t;
  pthread_create(&t, NULL, exiter, NULL);
  pthread_join(t, NULL);
  uint64_t live1 = stats().page_source_live_bytes;
  CHECK(exit_cached >= 1000000, "the thread cached only %u bytes", exit_cached);
  CHECK(live1 == live0, "after the thread's exit the backend has %llu live bytes, %llu before it ran",
        (unsigned long long)live1, (unsigned long long)live0);
  printf("exit: a thread exited with %u KiB cached; the backend's live bytes are back to %llu KiB\n",
         exit_cached >> 10, (unsigned long long)(live1 >> 10));
  jw_free(warm);
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (!strcmp(c, "reuse")) return case_reuse();
  if (!strcmp(c, "aging")) return case_aging();
  if (!strcmp(c, "reclaimer")) return case_reclaimer();
  if (!strcmp(c, "bound")) return case_bound(argc > 2 ? atoi(argv[2]) : 20000);
  if (!strcmp(c, "exit")) return case_exit();
  fprintf(stderr, "usage: test_bc_range reuse|aging|reclaimer|bound [ops]|exit\n");
  return 2;
}
