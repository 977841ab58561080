/* Placement on demand's contention guard (docs/design/reclamation.md 6a,
 * JWMALLOC_PLACEMENT=auto, set by CTest): when lock holders are preempted,
 * allocations map roots without the backend lock (backend.md 7a, step 5),
 * and placement's extra locked work would make that worse. So a full reclaim
 * cycle that saw more than 8 such roots holds placement off for 8 cycles.
 *
 * The test makes the contention on purpose: at the peak, a thread is frozen
 * while holding the backend lock (test hook) and the main thread allocates
 * 3 MiB blocks, each from a root mapped without the lock. Then the load falls
 * back to its steady level (a trough the detector switches on for, as in
 * jwmalloc.placement.auto). Asserted: the guard saw the contention; placement
 * stayed off for the cycles it holds it off; and it still switched on once
 * the cooldown was over (the guard delays, it does not disable). The test
 * runs the reclaim cycles itself (the reclaim thread off, set by CTest;
 * churn_population.h says why); every wait is bounded by a count of cycles.
 *
 * Usage: test_placement_guard [CASE]
 *   cooldown  (the default) the above
 *   boundary  the guard's threshold, cycles run by the test: 10 roots mapped
 *             without the lock of 15 mapped (exactly two thirds) must not
 *             trip it, 10 of 14 must, 8 of 9 must not, 9 of 13 must
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/lock.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"
#include "lock_freezer.h"

#define STEADY ((size_t)16 << 20)
#include "churn_population.h"
#define NBIG 24

static int case_cooldown(void) {
  long mode = -1;
  CHECK(jw_option_get("PLACEMENT", &mode) == 0 && mode == 2, "PLACEMENT %ld, want 2 (auto)", mode);
  alarm(120); /* a hang bound */
  while (bytes < STEADY) put(n++);
  size_t steady_n = n;
  churn_cycles(200000, 40000);
  while (bytes < 5 * STEADY && n < POP_CAP) put(n++);
  churn_cycles(200000, 40000);
  /* Contention at the peak: the backend lock frozen, big blocks from roots
   * mapped without it. */
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  pthread_t h;
  CHECK(pthread_create(&h, NULL, freeze_backend_holder, NULL) == 0, "pthread_create");
  while (!atomic_load(&frozen)) usleep(1000);
  jw_stats a, b;
  jw_stats_get(&a, sizeof a);
  void *big[NBIG];
  for (int i = 0; i < NBIG; i++) {
    big[i] = jw_malloc((size_t)3 << 20);
    CHECK(big[i] != NULL, "3 MiB block with the lock frozen");
  }
  jw_stats_get(&b, sizeof b);
  atomic_store(&release_holder, 1);
  pthread_join(h, NULL);
  jw_test_set_lock_hook(NULL);
  uint64_t lf = b.backend_lf_roots - a.backend_lf_roots;
  CHECK(lf > 8, "only %llu roots mapped without the lock: the case does not make contention", (unsigned long long)lf);
  for (int i = 0; i < NBIG; i++) jw_free(big[i]);
  jw_reclaim_stats r;
  jw_reclaim_get_stats(&r);
  for (int i = 0; i < 50 && r.placement_contended == 0; i++) {
    jw_reclaim_cycle();
    jw_reclaim_get_stats(&r);
  }
  CHECK(r.placement_contended >= 1, "the guard did not see %llu roots mapped without the lock", (unsigned long long)lf);
  uint64_t c1 = r.cycles, on0 = r.placement_on;
  /* The trough: the detector's condition holds, but the guard holds
   * placement off for its cooldown. */
  while (n > steady_n) drop(--n);
  int seen_off = 0;
  for (int i = 0; i < 2000; i++) {
    churn_cycles(500, 500);
    jw_reclaim_get_stats(&r);
    if (r.cycles > c1 + 6) break;
    CHECK(!r.placement_active && r.placement_on == on0, "placement switched on %llu cycles after the contention",
          (unsigned long long)(r.cycles - c1));
    seen_off = 1;
  }
  CHECK(seen_off, "no check made within the cooldown");
  /* After the cooldown, the trough switches it on. */
  for (int i = 0; i < 1000 && !r.placement_active; i++) {
    churn_cycles(2000, 2000);
    jw_reclaim_get_stats(&r);
  }
  printf("placement guard: %llu roots mapped without the lock; contended cycles %llu; switched on %llu cycles "
         "after the contention (on %llu, off %llu)\n",
         (unsigned long long)lf, (unsigned long long)r.placement_contended, (unsigned long long)(r.cycles - c1),
         (unsigned long long)r.placement_on, (unsigned long long)r.placement_off);
  CHECK(r.placement_active, "placement never switched on after the cooldown");
  while (n) drop(--n);
  return test_failures() ? 1 : 0;
}

/* ---- boundary: the guard's threshold, cycles run by the test ---- */

#define BIG ((size_t)3 << 20) /* one per 4 MiB root */

static jw_stats stats_now(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

static void *guard_blocks[256];
static int nguard;

/* nlf roots mapped without the lock (a holder frozen on it), then locked
 * roots until the cycle has mapped `total`. */
static void map_roots(int nlf, uint64_t total, uint64_t since) {
  if (nlf > 0) {
    atomic_store(&frozen, 0);
    atomic_store(&release_holder, 0);
    pthread_t h;
    CHECK(pthread_create(&h, NULL, freeze_backend_holder, NULL) == 0, "pthread_create");
    while (!atomic_load(&frozen)) usleep(1000);
    for (int i = 0; i < nlf; i++) CHECK((guard_blocks[nguard++] = jw_malloc(BIG)) != NULL, "3 MiB, lock frozen");
    atomic_store(&release_holder, 1);
    pthread_join(h, NULL);
  }
  while (stats_now().backend_roots_mapped - since < total)
    CHECK((guard_blocks[nguard++] = jw_malloc(BIG)) != NULL, "3 MiB");
}

static int guard_step(int nlf, uint64_t total, int want_trip) {
  jw_stats a = stats_now();
  jw_reclaim_stats r0, r1;
  jw_reclaim_get_stats(&r0);
  map_roots(nlf, total, a.backend_roots_mapped);
  jw_stats b = stats_now();
  uint64_t n = b.backend_lf_roots - a.backend_lf_roots, m = b.backend_roots_mapped - a.backend_roots_mapped;
  CHECK(n == (uint64_t)nlf && m == total, "setup: %llu of %llu roots without the lock, want %d of %llu",
        (unsigned long long)n, (unsigned long long)m, nlf, (unsigned long long)total);
  jw_reclaim_cycle();
  jw_reclaim_get_stats(&r1);
  int tripped = r1.placement_contended != r0.placement_contended;
  CHECK(tripped == want_trip, "%llu of %llu roots without the lock: guard %s, want %s", (unsigned long long)n,
        (unsigned long long)m, tripped ? "tripped" : "not tripped", want_trip ? "tripped" : "not tripped");
  printf("guard: %llu of %llu roots without the lock: %s\n", (unsigned long long)n, (unsigned long long)m,
         tripped ? "tripped" : "not tripped");
  return tripped;
}

static int case_boundary(void) {
  alarm(240); /* a hang bound */
  long mode = -1;
  CHECK(jw_option_get("PLACEMENT", &mode) == 0 && mode == 2, "PLACEMENT %ld, want 2 (auto)", mode);
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  jw_reclaim_cycle(); /* the guard's counts start here */
  guard_step(10, 15, 0); /* exactly two thirds: not more */
  guard_step(10, 14, 1);
  guard_step(8, 9, 0); /* not more than 8 (the holder maps one under the lock) */
  guard_step(9, 13, 1);
  jw_test_set_lock_hook(NULL);
  for (int i = 0; i < nguard; i++) jw_free(guard_blocks[i]);
  return test_failures() ? 1 : 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "cooldown";
  if (!strcmp(c, "cooldown")) return case_cooldown();
  if (!strcmp(c, "boundary")) return case_boundary();
  fprintf(stderr, "usage: test_placement_guard [cooldown|boundary]\n");
  return 2;
}
