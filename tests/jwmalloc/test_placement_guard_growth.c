/* The contention guard's second condition (docs/design/reclamation.md 6a,
 * JWMALLOC_PLACEMENT=auto): roots mapped without the backend lock trip it
 * only when they are more than two thirds of the roots mapped in the cycle.
 * Two threads growing together map some roots without the lock while the
 * other maps under it; that is growth, not a preempted holder, and it must
 * not hold placement off through the trough that follows.
 *
 * The test runs the reclaim cycles itself (no reclaim thread, a 10-minute
 * interval, set by CTest), so which roots fall in which cycle is fixed:
 *   1. 12 roots mapped without the lock (a holder frozen on the lock, test
 *      hook) and 40 under it in one cycle: the guard must not trip;
 *   2. 12 roots mapped without the lock alone in the next cycle: it must.
 * Usage: test_placement_guard_growth
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/lock.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"
#include "lock_freezer.h"

#define BIG ((size_t)3 << 20) /* one per 4 MiB root */
#define NLF 12
#define NGROW 40

static void *big[2 * NLF + NGROW];
static int nbig;

/* NLF blocks while a holder is frozen on the backend lock: each maps a root
 * without it. Returns the roots so mapped. */
static uint64_t lock_free_roots(void) {
  jw_stats a, b;
  atomic_store(&frozen, 0);
  atomic_store(&release_holder, 0);
  pthread_t h;
  CHECK(pthread_create(&h, NULL, freeze_backend_holder, NULL) == 0, "pthread_create");
  while (!atomic_load(&frozen)) usleep(1000);
  jw_stats_get(&a, sizeof a);
  for (int i = 0; i < NLF; i++) {
    big[nbig] = jw_malloc(BIG);
    CHECK(big[nbig] != NULL, "3 MiB block with the lock frozen");
    nbig++;
  }
  jw_stats_get(&b, sizeof b);
  atomic_store(&release_holder, 1);
  pthread_join(h, NULL);
  return b.backend_lf_roots - a.backend_lf_roots;
}

int main(void) {
  long mode = -1;
  CHECK(jw_option_get("PLACEMENT", &mode) == 0 && mode == 2, "PLACEMENT %ld, want 2 (auto)", mode);
  alarm(120); /* a hang bound */
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  jw_reclaim_cycle(); /* the guard's counts start here */
  jw_reclaim_stats r0, r1, r2;
  jw_reclaim_get_stats(&r0);

  /* 1. Growth: a few roots without the lock among many under it. */
  jw_stats a, b;
  jw_stats_get(&a, sizeof a);
  uint64_t lf1 = lock_free_roots();
  for (int i = 0; i < NGROW; i++) {
    big[nbig] = jw_malloc(BIG);
    CHECK(big[nbig] != NULL, "3 MiB block");
    nbig++;
  }
  jw_stats_get(&b, sizeof b);
  uint64_t mapped1 = b.backend_roots_mapped - a.backend_roots_mapped;
  CHECK(lf1 > 8, "only %llu roots mapped without the lock: the case does not reach the guard's count",
        (unsigned long long)lf1);
  CHECK(3 * lf1 <= 2 * mapped1, "%llu of %llu roots without the lock: the case is not growth",
        (unsigned long long)lf1, (unsigned long long)mapped1);
  jw_reclaim_cycle();
  jw_reclaim_get_stats(&r1);
  CHECK(r1.placement_contended == r0.placement_contended,
        "the guard tripped on growth: %llu of %llu roots mapped without the lock", (unsigned long long)lf1,
        (unsigned long long)mapped1);

  /* 2. Contention: only roots mapped without the lock. */
  uint64_t lf2 = lock_free_roots();
  CHECK(lf2 > 8, "only %llu roots mapped without the lock", (unsigned long long)lf2);
  jw_reclaim_cycle();
  jw_reclaim_get_stats(&r2);
  CHECK(r2.placement_contended == r1.placement_contended + 1,
        "the guard did not trip on %llu roots mapped without the lock alone (contended %llu -> %llu)",
        (unsigned long long)lf2, (unsigned long long)r1.placement_contended,
        (unsigned long long)r2.placement_contended);
  jw_test_set_lock_hook(NULL);
  printf("placement guard: growth %llu of %llu roots without the lock, not contended; then %llu alone, "
         "contended\n",
         (unsigned long long)lf1, (unsigned long long)mapped1, (unsigned long long)lf2);
  for (int i = 0; i < nbig; i++) jw_free(big[i]);
  return test_failures() ? 1 : 0;
}
