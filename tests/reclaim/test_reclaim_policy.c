/* The countdown and its two policies, deterministically: cycles are run by
 * hand (no thread, an interval no test reaches), and every figure is a count
 * of ranges, bytes or system calls. docs/design/reclamation.md.
 *
 * The scene of most cases: one root cut into three siblings A, B (256
 * granules each) and C (512): A and B merge into a 512 when both are free. */
#include <errno.h>

#include "os/os_mem.h"
#include "rt.h"

#define PAGES(n) ((size_t)(n) * JW_GRANULE)

static uint64_t madvises(void) { return rt_stats().madvise_calls; }

/* No root left from earlier cases, and the policy under test. */
static void fresh(unsigned policy) {
  jw_backend_set_retain_roots(0);
  jw_backend_set_retain_roots(1);
  REQUIRE(rt_bstats().pages.roots == 0, "roots left over");
  rt_config(1, 600000, 0, policy, 0);
}

typedef struct scene {
  char *a, *b, *c;
} scene;

static scene make_scene(void) {
  scene s = {rt_alloc(256), rt_alloc(256), rt_alloc(512)};
  REQUIRE(s.b == s.a + PAGES(256) && s.c == s.a + PAGES(512), "A, B, C not one root's siblings");
  memset(s.a, 1, PAGES(256)); /* dirty: their pages are resident */
  memset(s.b, 2, PAGES(256));
  memset(s.c, 3, PAGES(512));
  return s;
}

static const char *name(unsigned policy) { return policy == JW_POLICY_LIFETIME ? "lifetime" : "fixed-delay"; }

/* A free range with no mergeable sibling: released at the second cycle, not
 * the first, under both policies (the countdown). */
static void t_countdown(unsigned policy) {
  fresh(policy);
  scene s = make_scene();
  jw_pages_free(s.a); /* B is live: nothing to merge with */
  uint64_t m0 = madvises();
  CHECK(rt_bstats().pages.cached_bytes == PAGES(256), "%s: A not cached", name(policy));
  jw_reclaim_cycle();
  CHECK(madvises() == m0 && rt_bstats().pages.cached_bytes == PAGES(256), "%s: A released at the first cycle",
        name(policy));
  jw_reclaim_cycle();
  CHECK(madvises() == m0 + 1 && rt_bstats().pages.cached_bytes == 0, "%s: A not released at the second cycle",
        name(policy));
  bool z;
  char *a = jw_pages_alloc(256, JW_KIND_LARGE, NULL, &z);
  CHECK(a == s.a && z && a[0] == 0 && a[PAGES(256) - 1] == 0, "%s: released A not reused zeroed", name(policy));
  CHECK(s.b[0] == 2 && s.c[PAGES(512) - 1] == 3, "%s: live neighbours changed", name(policy));
  jw_pages_free(a);
  jw_pages_free(s.b);
  jw_pages_free(s.c);
  rt_check_all("countdown");
}

/* The sibling is freed while A waits in standby: they merge. Lifetime
 * restarts the countdown of AB; fixed-delay keeps A's, so AB (B's pages just
 * freed and warm) goes back one cycle earlier. The worked example of the
 * design note. */
static void t_merge(unsigned policy) {
  fresh(policy);
  scene s = make_scene();
  jw_pages_free(s.a);
  jw_reclaim_cycle(); /* A now in standby */
  uint64_t merges = rt_stats().merges, m0 = madvises();
  jw_pages_free(s.b); /* merges with A */
  CHECK(rt_stats().merges == merges + 1, "%s: B did not merge with A", name(policy));
  jw_reclaim_cycle();
  if (policy == JW_POLICY_LIFETIME)
    CHECK(madvises() == m0 && rt_bstats().pages.cached_bytes == PAGES(512),
          "lifetime: the merge did not restart the countdown");
  else
    CHECK(madvises() == m0 + 1 && rt_bstats().pages.cached_bytes == 0 && rt_bstats().released_bytes >= PAGES(512),
          "fixed-delay: AB not released with A's countdown");
  jw_reclaim_cycle();
  CHECK(madvises() == m0 + 1 && rt_bstats().pages.cached_bytes == 0, "%s: AB not released after its countdown",
        name(policy));
  /* A request of AB's class: served from AB either way, zeroed. */
  uint64_t faults = rt_stats().allocs_refault;
  char *ab = jw_pages_alloc(512, JW_KIND_LARGE, NULL, NULL);
  CHECK(ab == s.a && rt_stats().allocs_refault == faults + 1, "%s: AB not reused", name(policy));
  jw_pages_free(ab);
  jw_pages_free(s.c);
  rt_check_all("merge");
}

/* Reuse between the cycles: under lifetime a request for AB's class after
 * the cycle that fixed-delay releases at is served from warm pages. Counted
 * as allocations of released ranges (each faults its pages in again). */
static uint64_t merge_then_reuse(unsigned policy) {
  fresh(policy);
  scene s = make_scene();
  jw_pages_free(s.a);
  jw_reclaim_cycle();
  jw_pages_free(s.b);
  jw_reclaim_cycle();
  uint64_t faults = rt_stats().allocs_refault;
  char *ab = jw_pages_alloc(512, JW_KIND_LARGE, NULL, NULL);
  REQUIRE(ab == s.a, "%s: AB not reused", name(policy));
  faults = rt_stats().allocs_refault - faults;
  jw_pages_free(ab);
  jw_pages_free(s.c);
  return faults;
}

/* A merge with a piece already released is counted as such; the merged
 * range is backed (B's pages), filed by the policy's rule. */
static void t_merge_after_release(unsigned policy) {
  fresh(policy);
  scene s = make_scene();
  jw_pages_free(s.a);
  jw_reclaim_cycle();
  jw_reclaim_cycle(); /* A released */
  uint64_t after = rt_stats().merges_after_release, m0 = madvises();
  jw_pages_free(s.b);
  CHECK(rt_stats().merges_after_release == after + 1, "%s: merge with released A not counted", name(policy));
  CHECK(rt_bstats().pages.cached_bytes == PAGES(512), "%s: merged AB not filed as backed", name(policy));
  jw_reclaim_cycle();
  CHECK(madvises() == m0 + (policy == JW_POLICY_LIFETIME ? 0 : 1), "%s: wrong release of AB", name(policy));
  jw_pages_free(s.c);
  rt_check_all("merge after release");
}

/* Adjacent ranges that cannot merge (cousins in the tree) are given back
 * with one system call. The layout is the design note's example 2: x = 3+1
 * and y = 7+1 (siblings p = 0+3 and q = 4+3 live), z = 8+8 (its siblings are
 * internal nodes); the second cycle releases [3,4) alone and [7,16) as one
 * run. */
static void t_runs(void) {
  fresh(JW_POLICY_LIFETIME);
  char *p = rt_alloc(3), *x = rt_alloc(1), *q = rt_alloc(3), *y = rt_alloc(1), *z = rt_alloc(8);
  REQUIRE(x == p + PAGES(3) && q == p + PAGES(4) && y == p + PAGES(7) && z == p + PAGES(8),
          "unexpected layout %p %p %p %p %p", (void *)p, (void *)x, (void *)q, (void *)y, (void *)z);
  uint64_t merges = rt_stats().merges;
  memset(x, 1, PAGES(1));
  memset(y, 1, PAGES(1));
  memset(z, 1, PAGES(8));
  jw_pages_free(x);
  jw_pages_free(y);
  jw_pages_free(z);
  CHECK(rt_stats().merges == merges, "x, y, z merged (their siblings are live or internal)");
  jw_reclaim_cycle();
  jw_reclaim_stats s0 = rt_stats();
  jw_reclaim_cycle();
  jw_reclaim_stats s1 = rt_stats();
  CHECK(s1.ranges_released - s0.ranges_released == 3 && s1.madvise_calls - s0.madvise_calls == 2,
        "3 ranges in 2 runs: %llu ranges, %llu madvise calls",
        (unsigned long long)(s1.ranges_released - s0.ranges_released),
        (unsigned long long)(s1.madvise_calls - s0.madvise_calls));
  jw_pages_free(p);
  jw_pages_free(q);
  rt_check_all("runs");
}

/* A fresh root's remainders have no pages: nothing to release, nothing
 * cached; an entirely free root ages like any range and goes back with its
 * metadata when released. */
static void t_roots(unsigned policy) {
  fresh(policy);
  jw_os_counts c0, c1;
  jw_os_get_counts(&c0);
  char *p = rt_alloc(3);
  CHECK(rt_bstats().pages.cached_bytes == 0 && rt_bstats().released_bytes == PAGES(1021),
        "%s: fresh remainders counted as cached", name(policy));
  memset(p, 1, PAGES(3));
  jw_pages_free(p); /* merges back into the whole root: it stays mapped */
  CHECK(rt_bstats().pages.roots == 1 && rt_bstats().free_roots == 1, "%s: whole free root not kept", name(policy));
  jw_reclaim_cycle();
  jw_reclaim_cycle();
  jw_os_get_counts(&c1);
  CHECK(rt_bstats().pages.roots == 0 && rt_bstats().record_bytes == 0, "%s: idle root not returned",
        name(policy));
  CHECK(c1.madvise_calls - c0.madvise_calls == 1 && c1.munmap_calls - c0.munmap_calls >= 1,
        "%s: a root returned with %llu madvise (records only expected) and %llu munmap calls", name(policy),
        (unsigned long long)(c1.madvise_calls - c0.madvise_calls),
        (unsigned long long)(c1.munmap_calls - c0.munmap_calls));
  rt_check_all("roots");
}

/* Past the watermark the freeing thread releases synchronously: the cached
 * bytes never stay above it after a free, and each release brings them to
 * three quarters of it. */
static void t_watermark(void) {
  fresh(JW_POLICY_LIFETIME);
  const uint64_t wm = 1u << 20;
  rt_config(1, 600000, wm, JW_POLICY_LIFETIME, 0);
  enum { N = 64 };
  static char *r[N];
  for (int i = 0; i < N; i++) memset(r[i] = rt_alloc(16), 1, PAGES(16));
  uint64_t sync0 = rt_stats().sync_releases, most = 0;
  for (int i = 0; i < N; i += 2) { /* every other one: no merges */
    jw_pages_free(r[i]);
    uint64_t cached = rt_bstats().pages.cached_bytes;
    CHECK(cached <= wm, "cached %llu above the watermark after a free", (unsigned long long)cached);
    if (cached > most) most = cached;
  }
  uint64_t syncs = rt_stats().sync_releases - sync0;
  /* 32 x 64 KiB freed: past 1 MiB at the 17th, then every 4 frees. */
  CHECK(syncs >= 3 && most <= wm, "%llu synchronous releases", (unsigned long long)syncs);
  for (int i = 0; i < N; i++)
    if (i & 1) CHECK(r[i][0] == 1 && r[i][PAGES(16) - 1] == 1, "live range %d released", i);
  for (int i = 1; i < N; i += 2) jw_pages_free(r[i]);
  rt_check_all("watermark");
}

/* The watermark adapts to re-mapping (reclamation.md 4a). An rptest-like
 * churn (32 slots replaced at random by 64 KiB-1 MiB ranges, live bytes
 * steady) whose free working set is above a 1 MiB watermark: with the
 * adaptation off (ceiling = floor) its synchronous releases unmap roots that
 * it maps again; with it on the watermark rises, at most to its ceiling, and
 * the same churn gives back and takes back less. Counts, one thread, cycles
 * by hand. */
typedef struct churn_counts {
  uint64_t released, reobtained, syncs, raises, wm, most_cached;
} churn_counts;

enum { K = 32, STEPS = 6000 };
static char *slot[K];

/* The churn; its slots stay live (churn_end frees them). */
static churn_counts churn(uint64_t floor, uint64_t ceiling) {
  fresh(JW_POLICY_LIFETIME);
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  c.watermark = floor, c.watermark_max = ceiling;
  REQUIRE(jw_reclaim_set_config(&c) == 0, "watermark %llu..%llu", (unsigned long long)floor,
          (unsigned long long)ceiling);
  tb_rng r = {12345};
  static const uint32_t sizes[] = {16, 20, 24, 32, 40, 48, 64, 80, 96, 128, 160, 192, 256};
  jw_reclaim_stats s0 = rt_stats();
  jw_backend_stats b0 = rt_bstats();
  uint64_t most = 0;
  for (unsigned i = 0; i < K; i++) (slot[i] = rt_alloc(sizes[tb_below(&r, 13)]))[0] = 1;
  for (unsigned i = 0; i < STEPS; i++) {
    unsigned k = tb_below(&r, K);
    jw_pages_free(slot[k]);
    uint64_t cached = rt_bstats().pages.cached_bytes;
    if (cached > most) most = cached;
    (slot[k] = rt_alloc(sizes[tb_below(&r, 13)]))[0] = 1;
  }
  jw_reclaim_stats s1 = rt_stats();
  jw_backend_stats b1 = rt_bstats();
  churn_counts o = {s1.bytes_released - s0.bytes_released,
                    (b1.roots_mapped_total - b0.roots_mapped_total) * JW_ROOT + b1.refault_bytes - b0.refault_bytes,
                    s1.sync_releases - s0.sync_releases, s1.watermark_raises - s0.watermark_raises,
                    s1.watermark_now, most};
  rt_check_all("churn");
  return o;
}

static void churn_end(void) {
  for (unsigned i = 0; i < K; i++) jw_pages_free(slot[i]);
}

static void t_watermark_adapts(void) {
  const uint64_t floor = 1u << 20, ceiling = 4u << 20;
  churn_counts fixed = churn(floor, floor);
  churn_end();
  churn_counts adapt = churn(floor, ceiling);
  /* The live bytes it rose for are gone (a ramp-down): back to the floor. */
  churn_end();
  CHECK(rt_stats().watermark_now == floor, "ramp-down left the watermark at %llu",
        (unsigned long long)rt_stats().watermark_now);
  printf("watermark: fixed %llu KiB given back, %llu KiB taken back, %llu sync releases; adaptive %llu KiB, "
         "%llu KiB, %llu sync releases, %llu raises to %llu KiB\n",
         (unsigned long long)fixed.released >> 10, (unsigned long long)fixed.reobtained >> 10,
         (unsigned long long)fixed.syncs, (unsigned long long)adapt.released >> 10,
         (unsigned long long)adapt.reobtained >> 10, (unsigned long long)adapt.syncs,
         (unsigned long long)adapt.raises, (unsigned long long)adapt.wm >> 10);
  CHECK(fixed.raises == 0 && fixed.wm == floor, "ceiling = floor: the watermark moved");
  CHECK(adapt.raises >= 1 && adapt.wm > floor && adapt.wm <= ceiling, "no raise, or past the ceiling: %llu",
        (unsigned long long)adapt.wm);
  /* Bounded: a free that crosses the watermark adds at most one range (up to
   * a root, merged with released pieces filed as backed) before a release. */
  CHECK(adapt.most_cached <= ceiling + JW_ROOT && fixed.most_cached <= floor + JW_ROOT,
        "cached past the bound: %llu (adaptive), %llu (fixed)", (unsigned long long)adapt.most_cached,
        (unsigned long long)fixed.most_cached);
  CHECK(adapt.released < fixed.released && adapt.reobtained < fixed.reobtained,
        "adaptation did not cut the churn");
  /* A burst repeated (live bytes grow as the memory comes back, as in a
   * peak-trough load) does not raise it: its refaults served growth. */
  fresh(JW_POLICY_LIFETIME);
  jw_reclaim_config bc;
  jw_reclaim_get_config(&bc);
  bc.watermark = floor, bc.watermark_max = ceiling;
  REQUIRE(jw_reclaim_set_config(&bc) == 0, "bursts: watermark");
  enum { N = 64 };
  static char *b[N];
  uint64_t raises = rt_stats().watermark_raises;
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) memset(b[i] = rt_alloc(16), 1, PAGES(16));
    for (int i = 0; i < N; i++) jw_pages_free(b[i]);
  }
  CHECK(rt_stats().watermark_raises == raises && rt_stats().watermark_now == floor,
        "bursts raised the watermark to %llu", (unsigned long long)rt_stats().watermark_now);
  /* Back down once releases stop: four quiet intervals, then each due cycle halves it. */
  churn(floor, ceiling);
  uint64_t w = rt_stats().watermark_now, lowers = rt_stats().watermark_lowers;
  REQUIRE(w > floor, "no raise to decay from");
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  c.interval_ms = 1; /* same floor and ceiling: the level in force stays */
  REQUIRE(jw_reclaim_set_config(&c) == 0, "interval 1 ms");
  CHECK(rt_stats().watermark_now == w, "a new interval reset the watermark in force");
  usleep(10000);
  jw_reclaim_cycle();
  CHECK(rt_stats().watermark_now == (w / 2 > floor ? w / 2 : floor) && rt_stats().watermark_lowers == lowers + 1,
        "decay: %llu -> %llu", (unsigned long long)w, (unsigned long long)rt_stats().watermark_now);
  for (int i = 0; i < 4; i++) jw_reclaim_cycle();
  CHECK(rt_stats().watermark_now == floor, "not back at the floor: %llu", (unsigned long long)rt_stats().watermark_now);
  churn_end();
  rt_config(1, 600000, 0, JW_POLICY_LIFETIME, 0);
  /* The default (ceiling 0): fixed, the same churn never moves it. */
  churn(floor, 0);
  CHECK(rt_stats().watermark_now == floor, "default ceiling: the watermark moved");
  churn_end();
}

/* Reclamation off: frees never release, no thread starts, a whole free root
 * beyond the retained count goes back at once (part 2's behaviour). */
static void t_off(void) {
  fresh(JW_POLICY_LIFETIME);
  rt_config(0, 1, 1, JW_POLICY_LIFETIME, 1);
  uint64_t m0 = madvises(), starts = rt_stats().thread_starts;
  enum { N = 16 };
  char *r[N];
  for (int i = 0; i < N; i++) memset(r[i] = rt_alloc(1024), 1, PAGES(1024));
  for (int i = 0; i < N; i++) jw_pages_free(r[i]);
  usleep(20000);
  CHECK(madvises() == m0, "reclamation off released memory");
  CHECK(rt_stats().thread_starts == starts && rt_threads() == 1, "reclamation off started a thread");
  CHECK(rt_bstats().pages.roots == 1, "%llu roots kept (retain 1)", (unsigned long long)rt_bstats().pages.roots);
  rt_config(1, 600000, 0, JW_POLICY_LIFETIME, 0);
  rt_check_all("off");
}

/* Bad options are refused and change nothing. */
static void t_bad_config(void) {
  jw_reclaim_config before, c, after;
  jw_reclaim_get_config(&before);
  c = before;
  c.interval_ms = 0;
  errno = 0;
  CHECK(jw_reclaim_set_config(&c) == -1 && errno == EINVAL, "interval 0 accepted");
  c = before;
  c.policy = 7;
  CHECK(jw_reclaim_set_config(&c) == -1 && errno == EINVAL, "policy 7 accepted");
  jw_reclaim_get_config(&after);
  CHECK(memcmp(&before, &after, sizeof before) == 0, "refused configuration changed something");
}

int main(void) {
  jw_backend_set_check(1);
  t_bad_config();
  for (unsigned policy = 0; policy < 2; policy++) {
    t_countdown(policy);
    t_merge(policy);
    t_merge_after_release(policy);
    t_roots(policy);
  }
  uint64_t lifetime = merge_then_reuse(JW_POLICY_LIFETIME), fixed = merge_then_reuse(JW_POLICY_FIXED_DELAY);
  CHECK(lifetime == 0 && fixed == 1, "reuse after the merge: %llu (lifetime) and %llu (fixed-delay) faulting allocations",
        (unsigned long long)lifetime, (unsigned long long)fixed);
  t_runs();
  t_watermark();
  t_watermark_adapts();
  t_off();
  if (test_failures()) return 1;
  puts("reclaim policy: ok");
  return 0;
}
