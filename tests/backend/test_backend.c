/* The backend through its page-source interface, case by case: the named edge
 * cases of issue 3, the worked example of the design note, bad input,
 * zeroed ranges, metadata falling after a peak, the reclamation buffers, a
 * free that finds the lock held (deferred, never waits), concurrent use and
 * fork. Invariant checks are on throughout. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/fast.h"
#include "backend/size_class.h"
#include "common/atomic.h"
#include "os/os_mem.h"
#include "reclaim/reclaim.h"
#include "tb.h"

static jw_backend_stats st(void) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  return s;
}

static void check_all(const char *what) {
  char err[300];
  REQUIRE(jw_backend_check_all(err, sizeof err) == 0, "%s: %s", what, err);
}

static char *alloc(uint32_t n, jw_range_kind k, bool *zeroed) {
  uint32_t got;
  bool z;
  char *p = jw_pages_alloc(n, k, &got, &z);
  REQUIRE(p != NULL && got == jw_class_granules[jw_class_index_up(n)], "alloc(%u)", n);
  if (zeroed) *zeroed = z;
  return p;
}

static void release_everything(void) {
  jw_backend_set_retain_roots(0);
  jw_backend_stats s = st();
  CHECK(s.pages.roots == 0 && s.record_bytes == 0, "roots or metadata left: %llu roots",
        (unsigned long long)s.pages.roots);
  jw_backend_set_retain_roots(1);
}

static void t_root_exactly(void) {
  /* A range that fills a root exactly is the root itself: no split. */
  uint64_t splits = st().pages.splits;
  char *p = alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL);
  CHECK(((uintptr_t)p & (JW_ROOT - 1)) == 0, "whole-root range %p not root aligned", (void *)p);
  CHECK(st().pages.splits == splits, "whole-root allocation split something");
  jw_range_info info;
  CHECK(jw_pages_lookup(p, &info) && info.granules == JW_ROOT_GRANULES, "root lookup");
  CHECK(!jw_pages_lookup(p + JW_ROOT - 1, &info), "interior of a large range resolved");
  /* Freed, it has no sibling to merge with: it is a whole free root. */
  uint64_t merges = st().pages.merges;
  jw_pages_free(p);
  CHECK(st().pages.merges == merges, "root merged with a sibling it cannot have");
  CHECK(st().free_roots == 1, "freed root not kept (retain 1)");
  /* Reused as is. */
  char *q = alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL);
  CHECK(q == p && st().pages.roots == 1, "free root not reused");
  jw_pages_free(q);
  check_all("root exactly");
  release_everything();
}

static void t_first_last_child_and_largest(void) {
  char *a = alloc(512, JW_KIND_LARGE, NULL), *b = alloc(512, JW_KIND_LARGE, NULL);
  CHECK(b == a + 512 * JW_GRANULE, "halves of one root");
  uint64_t m = st().pages.merges;
  jw_pages_free(b); /* last child: its only sibling is live */
  CHECK(st().pages.merges == m, "last child merged");
  jw_pages_free(a); /* first child: merges with its right sibling into the root */
  CHECK(st().pages.merges == m + 1 && st().free_roots == 1, "first child did not merge into the root");
  /* The largest class below a root beside the smallest. */
  char *big = alloc(896, JW_KIND_LARGE, NULL), *one = alloc(1, JW_KIND_SMALL_SLAB, NULL);
  CHECK(one == big + 896 * JW_GRANULE, "1 granule not next to 896");
  check_all("largest");
  jw_pages_free(one);
  jw_pages_free(big);
  check_all("first/last child");
  release_everything();
}

static void t_worked_example(void) {
  /* docs/design/backend.md, example 1, through the page source. */
  uint64_t splits = st().pages.splits;
  bool z;
  char *p = alloc(3, JW_KIND_LARGE, &z);
  CHECK(z, "fresh root range not zeroed");
  CHECK(((uintptr_t)p & (JW_ROOT - 1)) == 0 && st().pages.splits == splits + 4, "3 from a root: 4 splits");
  static const struct { uint32_t at, n; } rem[] = {{3, 1}, {4, 12}, {16, 112}, {128, 896}};
  for (unsigned i = 0; i < 4; i++) {
    jw_range_info info;
    jw_ptr_class c = jw_backend_classify(p + rem[i].at * JW_GRANULE, &info);
    CHECK(c == JW_PTR_FREE && info.start == p + rem[i].at * JW_GRANULE && info.granules == rem[i].n,
          "remainder %u+%u: %s %p+%u", rem[i].at, rem[i].n, jw_backend_ptr_class_name(c), info.start,
          info.granules);
  }
  jw_pages_free(p);
  CHECK(st().free_ranges == 1 && st().free_roots == 1, "example did not merge back");
  check_all("worked example");
  release_everything();
}

static void t_bad_input(void) {
  char *big = alloc(64, JW_KIND_LARGE, NULL), *slab = alloc(8, JW_KIND_MID_SLAB, NULL);
  jw_range_info info;
  /* Middle of a large range: not resolvable, not freeable, nothing changes. */
  CHECK(!jw_pages_lookup(big + 5 * JW_GRANULE + 16, &info), "middle of a large range resolved");
  CHECK(jw_backend_classify(big + 5 * JW_GRANULE, &info) == JW_PTR_INTERIOR && info.start == big,
        "middle of a large range not classified");
  errno = 0;
  CHECK(jw_backend_free(big + 5 * JW_GRANULE) == -1 && errno == EINVAL, "free of a middle pointer accepted");
  CHECK(jw_backend_free(big + 8) == -1 && errno == EINVAL, "free of an unaligned pointer accepted");
  /* Slabs resolve from every granule. */
  CHECK(jw_pages_lookup(slab + 7 * JW_GRANULE + 100, &info) && info.start == slab && info.kind == JW_KIND_MID_SLAB,
        "slab interior");
  /* An over-aligned large block registers its interior pointer. */
  jw_pages_mark_interior(big, big + 9 * JW_GRANULE + 64);
  CHECK(jw_pages_lookup(big + 9 * JW_GRANULE, &info) && info.start == big, "marked interior");
  CHECK(!jw_pages_lookup(big + 10 * JW_GRANULE, &info), "unmarked interior resolved");
  /* Free ranges and double frees. */
  CHECK(jw_backend_classify(big + 200 * JW_GRANULE, &info) == JW_PTR_FREE, "free space");
  CHECK(jw_backend_free(big + 200 * JW_GRANULE) == -1, "free of free space accepted");
  CHECK(jw_backend_free(slab) == 0, "slab free");
  CHECK(!jw_pages_lookup(slab, &info) && !jw_pages_lookup(slab + 3 * JW_GRANULE, &info), "freed slab resolves");
  CHECK(jw_backend_free(slab) == -1 && errno == EINVAL, "double free accepted");
  int local;
  CHECK(jw_backend_classify(&local, &info) == JW_PTR_NOT_OURS && jw_backend_free(&local) == -1, "stack pointer");
  CHECK(st().pages.live_bytes == 64 * JW_GRANULE, "bad frees changed live bytes");
  jw_pages_free(big);
  /* The marked granule's record went with the range. */
  CHECK(!jw_pages_lookup(big + 9 * JW_GRANULE, &info), "mark survived the free");
  check_all("bad input");
  release_everything();
}

static void t_metadata_falls(void) {
  /* Peak: 48 roots' worth of 64-granule ranges. */
  enum { N = 48 * 16 };
  static char *p[N];
  for (int i = 0; i < N; i++) p[i] = alloc(64, JW_KIND_LARGE, NULL);
  jw_backend_stats peak = st();
  CHECK(peak.pages.roots == 48 && peak.record_bytes == 48 * JW_META_SLOT_BYTES,
        "peak: %llu roots, %llu record bytes", (unsigned long long)peak.pages.roots,
        (unsigned long long)peak.record_bytes);
  /* Trough: one root's ranges stay live. */
  for (int i = 16; i < N; i++) jw_pages_free(p[i]);
  jw_backend_stats trough = st();
  CHECK(trough.pages.roots == 2 && trough.record_bytes == 2 * JW_META_SLOT_BYTES,
        "trough: %llu roots (1 live + 1 retained), %llu record bytes", (unsigned long long)trough.pages.roots,
        (unsigned long long)trough.record_bytes);
  /* Every record byte of the returned roots leaves the metadata figure; root-map
   * leaves stay (how many the roots needed depends on where the kernel put them). */
  CHECK(peak.pages.metadata_bytes - trough.pages.metadata_bytes >= peak.record_bytes - trough.record_bytes,
        "metadata did not fall by the returned records: %llu -> %llu bytes",
        (unsigned long long)peak.pages.metadata_bytes, (unsigned long long)trough.pages.metadata_bytes);
  for (int i = 0; i < 16; i++) jw_pages_free(p[i]);
  check_all("metadata");
  release_everything();
}

static void t_reclaim_buffers(void) {
  char *a = alloc(20, JW_KIND_LARGE, NULL), *keep = alloc(20, JW_KIND_LARGE, NULL);
  memset(a, 0xab, 20 * JW_GRANULE);
  memset(keep, 0xcd, 20 * JW_GRANULE);
  jw_pages_free(a); /* merges with nothing (keep is live): its countdown starts */
  jw_os_counts c0, c1;
  jw_os_get_counts(&c0);
  uint64_t cached = st().pages.cached_bytes;
  CHECK(jw_backend_reclaim_step() == 0 || st().released_bytes == 0, "first step released an active range");
  CHECK(st().pages.cached_bytes == cached, "active range moved");
  jw_backend_reclaim_step(); /* still in standby: released */
  jw_os_get_counts(&c1);
  CHECK(st().released_bytes >= 20 * JW_GRANULE && c1.madvise_calls > c0.madvise_calls, "standby not released");
  bool z;
  char *b = alloc(20, JW_KIND_LARGE, &z);
  CHECK(b == a && z && b[0] == 0 && b[20 * JW_GRANULE - 1] == 0, "released range not reused zeroed");
  for (size_t i = 0; i < 20 * JW_GRANULE; i += 512) CHECK((unsigned char)keep[i] == 0xcd, "live range released");
  jw_pages_free(b);
  jw_pages_free(keep);
  /* An entirely free root still in standby at a step goes back with its
   * metadata. */
  CHECK(st().free_roots == 1, "root kept");
  jw_backend_reclaim_step();
  jw_backend_reclaim_step();
  CHECK(st().pages.roots == 0 && st().record_bytes == 0, "idle root not returned by reclamation");
  check_all("reclaim");
  release_everything();
}

static void t_zeroed(void) {
  bool z;
  char *a = alloc(4, JW_KIND_LARGE, &z), *guard = alloc(4, JW_KIND_LARGE, NULL);
  CHECK(z, "fresh range not zeroed");
  a[100] = 1;
  jw_pages_free(a);
  char *b = alloc(4, JW_KIND_LARGE, &z);
  CHECK(b == a && !z, "reused dirty range claimed zeroed");
  jw_pages_free(b);
  jw_pages_free(guard);
  release_everything();
}

/* A holder frozen on the backend lock: frees still complete (deferred). */
static jw_atomic_u32 hold_state;
static void *holder(void *arg) {
  (void)arg;
  jw_backend_test_lock();
  jw_store(&hold_state, 1, JW_RELEASE);
  while (jw_load(&hold_state, JW_ACQUIRE) == 1) usleep(1000);
  jw_backend_test_unlock();
  return NULL;
}

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_backend: a free waited for the lock holder (hang)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static void t_deferred_free(void) {
  char *a = alloc(6, JW_KIND_MID_SLAB, NULL), *b = alloc(6, JW_KIND_LARGE, NULL);
  char *aged = alloc(3, JW_KIND_SMALL_SLAB, NULL);
  jw_backend_stats s0 = st();
  pthread_t th;
  pthread_create(&th, NULL, holder, NULL);
  while (jw_load(&hold_state, JW_ACQUIRE) != 1) usleep(1000);
  signal(SIGALRM, on_alarm);
  alarm(60); /* a bound for a hang, not a timing check */
  /* A free: into its class's bitmap or onto the deferred list, never waiting. */
  CHECK(jw_backend_free(a) == 0, "free with the lock held failed");
  jw_range_info info;
  CHECK(!jw_pages_lookup(a, &info) && !jw_pages_lookup(a + JW_GRANULE, &info), "freed range resolves");
  CHECK(jw_backend_free(a) == -1 && errno == EINVAL, "double free of a freed range accepted");
  CHECK(jw_backend_free(a + JW_GRANULE) == -1, "interior free accepted after free");
  jw_backend_stats s1 = st();
  CHECK(s1.deferred_frees + s1.fast_frees == s0.deferred_frees + s0.fast_frees + 1,
        "free neither deferred nor in a bitmap");
  /* An aged free skips the bitmaps: deferred. */
  jw_pages_free_aged(aged);
  CHECK(st().deferred_frees == s1.deferred_frees + 1, "aged free was not deferred");
  /* Allocations with the lock held (docs/design/backend.md, section 7a):
   * every class, slabs and blocks; none waits. A fresh root mapped without
   * the lock feeds the bitmaps, whose ranges are taken or subdivided. */
  static char *q[3 * JW_NCLASSES];
  unsigned nq = 0;
  for (unsigned round = 0; round < 3; round++)
    for (unsigned c = 0; c < JW_NCLASSES; c++) {
      unsigned k = (c + round) % JW_NCLASSES;
      q[nq++] = alloc(jw_class_granules[k], k % 3 == 0 ? JW_KIND_SMALL_SLAB : k % 3 == 1 ? JW_KIND_MID_SLAB
                                                                                       : JW_KIND_LARGE, NULL);
    }
  for (unsigned i = 0; i < nq; i += 2) jw_pages_free(q[i]);
  for (unsigned i = 0; i < 3 * 8; i++) jw_pages_free(alloc(1 + i % 8, JW_KIND_LARGE, NULL));
  jw_backend_stats s2 = st();
  CHECK(s2.lf_roots > s1.lf_roots && s2.lf_splits > s1.lf_splits && s2.fast_allocs > s1.fast_allocs,
        "lock-free paths not taken: %llu roots, %llu splits, %llu bitmap allocations",
        (unsigned long long)(s2.lf_roots - s1.lf_roots), (unsigned long long)(s2.lf_splits - s1.lf_splits),
        (unsigned long long)(s2.fast_allocs - s1.fast_allocs));
  alarm(0);
  jw_store(&hold_state, 2, JW_RELEASE);
  pthread_join(th, NULL);
  for (unsigned i = 1; i < nq; i += 2) jw_pages_free(q[i]);
  jw_pages_free(b);
  CHECK(st().pages.live_bytes == 0, "frees not drained: %llu live bytes", (unsigned long long)st().pages.live_bytes);
  check_all("deferred");
  release_everything();
}

/* The root reserve (docs/design/backend.md, section 7c): frees that empty
 * backed roots put up to JW_FAST_ROOT_SLOTS of them where allocations that
 * find the lock held reach them (reused, not mapped); past that a root is
 * mapped without the lock as before; a flush files the reserve back into the
 * lists, where its roots age and go back. Counts, not times. */
static void t_root_reserve(void) {
  enum { R = 6, SLOTS = 4 };
  static char *r[R + 1];
  /* With reclamation (entirely free roots age; without it the reserve is
   * bounded by the retained count too), cycles run by hand here. */
  jw_reclaim_config saved, on;
  jw_reclaim_get_config(&saved);
  on = saved;
  on.enabled = 1, on.interval_ms = 600000, on.watermark = 0, on.thread = 0;
  REQUIRE(jw_reclaim_set_config(&on) == 0, "reclamation on");
  for (unsigned i = 0; i < R; i++) (r[i] = alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL))[0] = 1;
  jw_backend_stats s0 = st();
  for (unsigned i = 0; i < R; i++) jw_pages_free(r[i]);
  jw_backend_stats s1 = st();
  CHECK(s1.roots_reserved - s0.roots_reserved == SLOTS && s1.free_roots == R && s1.pages.roots == R,
        "reserve: %llu roots reserved of %u emptied, %llu free roots", (unsigned long long)(s1.roots_reserved - s0.roots_reserved),
        R, (unsigned long long)s1.free_roots);
  CHECK(s1.fast_bytes == (uint64_t)SLOTS * JW_ROOT, "reserve holds %llu bytes, bound %llu",
        (unsigned long long)s1.fast_bytes, (unsigned long long)SLOTS * JW_ROOT);
  /* The lock held: whole roots, then 1 MiB ranges, come from the reserve. */
  pthread_t th;
  jw_store(&hold_state, 0, JW_RELEASE);
  pthread_create(&th, NULL, holder, NULL);
  while (jw_load(&hold_state, JW_ACQUIRE) != 1) usleep(1000);
  signal(SIGALRM, on_alarm);
  alarm(60); /* a bound for a hang, not a timing check */
  for (unsigned i = 0; i < SLOTS - 1; i++) r[i] = alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL);
  char *mib = alloc(256, JW_KIND_LARGE, NULL);
  jw_backend_stats s2 = st();
  CHECK(s2.roots_reused - s1.roots_reused == SLOTS && s2.roots_mapped_total == s1.roots_mapped_total &&
            s2.lf_roots == s1.lf_roots,
        "lock held: %llu reserved roots reused, %llu roots mapped (none expected)",
        (unsigned long long)(s2.roots_reused - s1.roots_reused),
        (unsigned long long)(s2.roots_mapped_total - s1.roots_mapped_total));
  /* The reserve is empty: the bounded fallback maps a root without the lock. */
  r[R] = alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL);
  CHECK(st().lf_roots == s2.lf_roots + 1, "empty reserve: no root mapped without the lock");
  alarm(0);
  jw_store(&hold_state, 2, JW_RELEASE);
  pthread_join(th, NULL);
  for (unsigned i = 0; i < SLOTS - 1; i++) jw_pages_free(r[i]);
  jw_pages_free(r[R]);
  jw_pages_free(mib);
  check_all("root reserve");
  /* A flush (here the quiet statistics) files the reserve into the lists;
   * unused, its roots age out with the cycles like any free root. */
  jw_backend_stats q;
  jw_backend_get_stats_quiet(&q);
  CHECK(q.fast_bytes == 0 && q.free_roots == q.pages.roots, "flush left %llu bytes in the bitmaps",
        (unsigned long long)q.fast_bytes);
  for (int i = 0; i < 3; i++) jw_backend_reclaim_step();
  CHECK(st().pages.roots == 0, "%llu reserved roots never aged out", (unsigned long long)st().pages.roots);
  REQUIRE(jw_reclaim_set_config(&saved) == 0, "reclamation restored");
  release_everything();
}

/* Threads allocating and freeing each other's ranges: the lock and the
 * deferred path under contention. */
enum { THREADS = 4, PER = 20000, SLOTS = 256 };
static jw_atomic_ptr shared_slots[SLOTS];
static void *worker(void *arg) {
  tb_rng r = {(uint64_t)(uintptr_t)arg};
  for (int i = 0; i < PER; i++) {
    unsigned s = tb_below(&r, SLOTS);
    uint32_t n = jw_class_granules[tb_below(&r, 20)];
    char *p = jw_pages_alloc(n, n == 1 ? JW_KIND_SMALL_SLAB : JW_KIND_LARGE, NULL, NULL);
    REQUIRE(p != NULL, "alloc in thread");
    p[0] = (char)s;
    /* Lock-free lookups of a live range while other threads split and merge
     * its neighbours (its head's boundary bits change under it). */
    jw_range_info info;
    REQUIRE(jw_pages_lookup(p + n * JW_GRANULE - 1, &info) == (n == 1) && jw_pages_lookup(p, &info) &&
                info.start == p && info.granules == n,
            "lookup in thread");
    char *old = jw_xchg(&shared_slots[s], p, JW_ACQ_REL); /* frees land in other threads */
    if (old) REQUIRE(jw_backend_free(old) == 0, "cross-thread free");
  }
  return NULL;
}

static void t_threads(void) {
  pthread_t th[THREADS];
  for (uintptr_t i = 0; i < THREADS; i++) pthread_create(&th[i], NULL, worker, (void *)(i + 1));
  for (int i = 0; i < THREADS; i++) pthread_join(th[i], NULL);
  for (int s = 0; s < SLOTS; s++) {
    char *p = jw_xchg(&shared_slots[s], NULL, JW_ACQ_REL);
    if (p) jw_pages_free(p);
  }
  CHECK(st().pages.live_bytes == 0, "threads leaked");
  printf("threads: %llu frees deferred while the lock was busy\n", (unsigned long long)st().deferred_frees);
  check_all("threads");
  release_everything();
}

static void t_fork(void) {
  char *a = alloc(10, JW_KIND_LARGE, NULL);
  jw_pages_atfork_prepare();
  pid_t pid = fork();
  if (pid == 0) {
    jw_pages_atfork_child();
    char *b = jw_pages_alloc(10, JW_KIND_LARGE, NULL, NULL);
    int ok = b != NULL && jw_backend_free(b) == 0 && jw_backend_free(a) == 0;
    char err[200];
    ok = ok && jw_backend_check_all(err, sizeof err) == 0;
    _exit(ok ? 0 : 3);
  }
  jw_pages_atfork_parent();
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child after fork: status %d", status);
  jw_pages_free(a);
  check_all("fork");
  release_everything();
}

/* The OS refuses memory: NULL with ENOMEM, nothing lost, state intact. In a
 * child, under an address-space limit (not under ThreadSanitizer, whose
 * shadow memory the limit would break). */
static void t_out_of_memory(void) {
#ifndef __SANITIZE_THREAD__
  pid_t pid = fork();
  if (pid == 0) {
    jw_pages_atfork_child();
    struct rlimit rl;
    getrlimit(RLIMIT_AS, &rl);
    rl.rlim_cur = 256u << 20; /* far below what the loop asks for */
    if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(4);
    static char *p[4096];
    int n = 0, got_enomem = 0;
    while (n < 4096) {
      errno = 0;
      p[n] = jw_pages_alloc(JW_ROOT_GRANULES, JW_KIND_LARGE, NULL, NULL);
      if (p[n] == NULL) {
        got_enomem = errno == ENOMEM;
        break;
      }
      p[n++][0] = 1;
    }
    /* Smaller requests still work from what is mapped (after a free). */
    int ok = got_enomem && n > 0 && jw_backend_free(p[--n]) == 0;
    char *q = ok ? jw_pages_alloc(7, JW_KIND_LARGE, NULL, NULL) : NULL;
    ok = ok && q != NULL && jw_backend_free(q) == 0;
    while (ok && n > 0) ok = jw_backend_free(p[--n]) == 0;
    char err[200];
    ok = ok && jw_backend_check_all(err, sizeof err) == 0;
    _exit(ok ? 0 : 3);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "out of memory child: status %d", status);
#endif
}

/* The bitmaps hand out ranges in placement's root order (backend.md 7b,
 * "Root order"): the oldest root first (the higher root index of a region,
 * the kernel maps top-down), then the lower address. Plain range-id order took
 * the newest root first. Made-up ids in an empty bitmap (jw_fast_take reads
 * only the slots), taken back out before the backend is used. */
static void t_fast_order(void) {
  const jw_rid newer = (1u << 22) | (5u << 10) | 3, older_hi = (1u << 22) | (9u << 10) | 7,
               older_lo = (1u << 22) | (9u << 10) | 2;
  const jw_rid put[3] = {newer, older_hi, older_lo}, want[3] = {older_lo, older_hi, newer};
  for (int i = 0; i < 3; i++) {
    int slot = jw_fast_reserve(0);
    CHECK(slot >= 0, "class 0 bitmap full before the test");
    if (slot < 0) return;
    jw_fast_publish(0, slot, put[i]);
  }
  for (int i = 0; i < 3; i++) {
    jw_rid got = jw_fast_take(0);
    CHECK(got == want[i], "take %d: range id %#x, want %#x", i, got, want[i]);
  }
  CHECK(jw_fast_take(0) == 0, "bitmap not empty after three takes");
}

int main(void) {
  jw_backend_set_check(1);
  jw_backend_set_retain_roots(1);
  t_fast_order();
  t_root_exactly();
  t_first_last_child_and_largest();
  t_worked_example();
  t_bad_input();
  t_metadata_falls();
  t_reclaim_buffers();
  t_zeroed();
  t_deferred_free();
  t_root_reserve();
  t_threads();
  t_fork();
  t_out_of_memory();
  if (test_failures()) return 1;
  puts("backend: ok");
  return 0;
}
