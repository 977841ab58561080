/* No live memory is ever released: threads keep a pattern in every page of
 * every live range (its first and last word: MADV_DONTNEED zeroes a whole
 * page, so a released live page cannot keep them) and check all their live
 * ranges after every reclaim cycle and synchronous release they observe,
 * while the reclaim thread cycles every 2 ms and a 1 MiB watermark makes the
 * freeing threads release too. Ranges handed out as zeroed must read zero;
 * half the frees cross threads (deferred when the lock is busy). Built also
 * with AddressSanitizer and ThreadSanitizer.
 *
 * Usage: test_reclaim_stress [ops per thread] [lifetime|fixed-delay] */
#include <inttypes.h>
#include <pthread.h>
#include <stdlib.h>

#include "common/atomic.h"
#include "rt.h"

enum { THREADS = 4, SLOTS = 96, SHARED = 64 };

typedef struct block {
  uint64_t *p;
  uint32_t granules, id;
} block;

static jw_atomic_ptr shared[SHARED]; /* ranges in flight between threads */
static jw_atomic_u64 total_checks, total_zero_checks, max_seen_cycles;
static uint64_t ops_per_thread = 60000;

static inline uint64_t word(uint32_t id, uint32_t page, int last) {
  return ((uint64_t)id << 32 | page) * 0x9e3779b97f4a7c15ull ^ (uint64_t)last;
}

#define WORDS_PER_PAGE (JW_GRANULE / sizeof(uint64_t))

static void fill(block *b) {
  for (uint32_t g = 0; g < b->granules; g++) {
    b->p[g * WORDS_PER_PAGE] = word(b->id, g, 0);
    b->p[(g + 1) * WORDS_PER_PAGE - 1] = word(b->id, g, 1);
  }
}

static void verify(const block *b, const char *when) {
  for (uint32_t g = 0; g < b->granules; g++) {
    REQUIRE(b->p[g * WORDS_PER_PAGE] == word(b->id, g, 0) &&
                b->p[(g + 1) * WORDS_PER_PAGE - 1] == word(b->id, g, 1),
            "live range %p (%u granules) page %u lost its pattern %s", (void *)b->p, b->granules, g, when);
  }
}

static void verify_zero(const block *b) {
  for (uint32_t g = 0; g < b->granules; g++)
    REQUIRE(b->p[g * WORDS_PER_PAGE] == 0 && b->p[(g + 1) * WORDS_PER_PAGE - 1] == 0,
            "range %p handed out as zeroed reads non-zero at page %u", (void *)b->p, g);
}

/* Releases observed: cycles and releases past the watermark (by a freeing
 * thread, or by the reclaim thread at a grace's end). */
static uint64_t release_events(void) {
  jw_reclaim_stats s = rt_stats();
  return s.cycles + s.sync_releases + s.grace_releases;
}

static void *worker(void *arg) {
  unsigned t = (unsigned)(uintptr_t)arg;
  tb_rng r = {0x1234 + t};
  block live[SLOTS] = {{0}};
  uint32_t next_id = t << 24;
  uint64_t seen = release_events(), checks = 0, zero_checks = 0;
  for (uint64_t op = 0; op < ops_per_thread; op++) {
    unsigned i = tb_below(&r, SLOTS);
    if (live[i].p) {
      verify(&live[i], "at its free");
      if (tb_below(&r, 2)) { /* hand it to another thread to free */
        void *old = jw_xchg(&shared[tb_below(&r, SHARED)], live[i].p, JW_ACQ_REL);
        if (old) jw_pages_free(old);
      } else {
        jw_pages_free(live[i].p);
      }
      live[i].p = NULL;
    }
    /* Mostly small ranges (the reformatting mix), some up to 256 granules. */
    uint32_t n = tb_below(&r, 8) ? 1 + tb_below(&r, 16) : 1 + tb_below(&r, 256);
    jw_range_kind kind = n == 1 ? JW_KIND_SMALL_SLAB : n <= 4 ? JW_KIND_MID_SLAB : JW_KIND_LARGE;
    uint32_t got;
    bool zeroed;
    uint64_t *p = jw_pages_alloc(n, kind, &got, &zeroed);
    REQUIRE(p != NULL, "alloc(%u)", n);
    live[i] = (block){p, got, ++next_id};
    if (zeroed) {
      verify_zero(&live[i]);
      zero_checks++;
    }
    fill(&live[i]);
    if ((op & 15) == 0) {
      uint64_t now = release_events();
      if (now != seen) { /* something was released since our last look */
        for (unsigned k = 0; k < SLOTS; k++)
          if (live[k].p) verify(&live[k], "after a reclaim cycle");
        seen = now;
        checks++;
      }
    }
  }
  for (unsigned k = 0; k < SLOTS; k++)
    if (live[k].p) {
      verify(&live[k], "at the end");
      jw_pages_free(live[k].p);
    }
  jw_fetch_add(&total_checks, checks, JW_RELAXED);
  jw_fetch_add(&total_zero_checks, zero_checks, JW_RELAXED);
  uint64_t m = jw_load(&max_seen_cycles, JW_RELAXED);
  while (seen > m && !jw_cas_weak(&max_seen_cycles, &m, seen, JW_RELAXED, JW_RELAXED)) {
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) ops_per_thread = strtoull(argv[1], NULL, 10);
  unsigned policy = argc > 2 && strcmp(argv[2], "fixed-delay") == 0 ? JW_POLICY_FIXED_DELAY : JW_POLICY_LIFETIME;
  jw_backend_set_check(0); /* whole-tree checks after every operation would serialise everything */
  /* A grace of 1 ms: releases past the watermark come from the freeing
   * threads once it has passed and from the reclaim thread at its end. */
  rt_config_grace(1, 2, 1u << 20, policy, 1, 1);
  jw_reclaim_stats s0 = rt_stats();
  pthread_t th[THREADS];
  for (uintptr_t t = 0; t < THREADS; t++) pthread_create(&th[t], NULL, worker, (void *)t);
  /* Meanwhile: whole-backend checks (they quiesce the batch in flight). */
  for (int k = 0; k < 20; k++) {
    usleep(20000);
    rt_check_all("during the stress");
  }
  for (int t = 0; t < THREADS; t++) pthread_join(th[t], NULL);
  for (int k = 0; k < SHARED; k++) {
    void *p = jw_xchg(&shared[k], NULL, JW_ACQ_REL);
    if (p) jw_pages_free(p);
  }
  CHECK(rt_bstats_quiet().pages.live_bytes == 0, "live bytes left");
  rt_config(1, 2, 0, policy, 1);
  CHECK(TEST_WAIT_FOR(!rt_stats().thread_running && rt_bstats().pages.roots == 0, 20.0),
        "memory not all returned after the stress: %llu roots", (unsigned long long)rt_bstats().pages.roots);
  rt_check_all("after the stress");
  jw_reclaim_stats s = rt_stats();
  uint64_t cycles = s.cycles - s0.cycles, syncs = s.sync_releases - s0.sync_releases + s.grace_releases - s0.grace_releases;
  printf("stress (%s): %d threads x %" PRIu64 " ops; %" PRIu64 " cycles, %" PRIu64 " releases past the watermark, %" PRIu64
         " ranges and %" PRIu64 " MiB released in %" PRIu64 " madvise calls; %" PRIu64
         " checks of all live ranges after a release, %" PRIu64 " zeroed ranges checked; merges %" PRIu64
         " (%" PRIu64 " after release), %" PRIu64 " allocations refaulting released ranges\n",
         policy ? "fixed-delay" : "lifetime", THREADS, ops_per_thread, cycles, syncs, s.ranges_released - s0.ranges_released,
         (s.bytes_released - s0.bytes_released) >> 20, s.madvise_calls - s0.madvise_calls,
         jw_load(&total_checks, JW_RELAXED), jw_load(&total_zero_checks, JW_RELAXED), s.merges - s0.merges,
         s.merges_after_release - s0.merges_after_release, s.allocs_refault - s0.allocs_refault);
  /* The property was exercised: many releases happened while ranges were
   * live, and the threads checked their ranges after them. */
  CHECK(cycles + syncs >= 20 && jw_load(&total_checks, JW_RELAXED) >= 20 && s.ranges_released > s0.ranges_released,
        "too few releases to test anything");
  if (test_failures()) return 1;
  puts("reclaim stress: ok");
  return 0;
}
