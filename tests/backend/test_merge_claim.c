/* A merge claims the sibling leaf it tested, never a range that took its
 * place (docs/design/backend.md, section 7a, "claim"), made deterministic
 * with the backend's test point JW_TP_BE_SIBLING (built with JW_TEST_HOOKS).
 *
 * A root holds two half-root siblings: one live (X), one free in its class's
 * bitmap (S). Thread T frees X under the lock; its merge finds S a free leaf
 * of S's size and parks there, before the claim. Meanwhile the lock is held,
 * so this thread's allocations take the lock-free paths: a quarter-root
 * allocation takes S from the bitmap and splits it (nested: A at S's head,
 * the rest B a child of S), a second one takes B, and the free of A puts A
 * into the quarter class's bitmap: S's head record is a free bitmap range
 * again, of another class. Then T goes on. Merging X with what it finds at
 * S's head, taking that as S, made one range of 3/4 root at depth 0 with B
 * inside the root's only level-1 boundary gone ("node 0+1024 at depth 0:
 * inner boundary at level 2", the right-hand case) or B inside the merged
 * range (the left-hand case). The per-operation check (JWMALLOC_CHECK=1)
 * stops the process at the filing; jw_backend_check_all checks the end.
 */
#include <pthread.h>
#include <stdint.h>

#include "backend/backend.h"
#include "pages/page_source.h"
#include "park.h"
#include "tb.h"

static void *freed_under_lock;
static void *locked_free(void *arg) {
  (void)arg;
  jw_pages_free(freed_under_lock); /* over the bitmaps' bound: the lists, under the lock */
  return NULL;
}

static uint64_t fast_frees(void) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  return s.fast_frees;
}

/* `left`: S is the lower half (the merge looks left), else the upper. */
static void one_case(int left) {
  const char *side = left ? "left" : "right";
  jw_backend_stats s0;
  jw_backend_get_stats_quiet(&s0);
  uint32_t half = JW_ROOT_GRANULES / 2, quarter = JW_ROOT_GRANULES / 4;
  size_t quarter_bytes = (size_t)quarter * JW_GRANULE;
  char *lo = jw_pages_alloc(half, JW_KIND_LARGE, NULL, NULL), *hi = jw_pages_alloc(half, JW_KIND_LARGE, NULL, NULL);
  REQUIRE(lo && hi, "%s: allocations", side);
  if (lo > hi) {
    char *t = lo;
    lo = hi, hi = t;
  }
  REQUIRE(((uintptr_t)lo & (JW_ROOT - 1)) == 0 && hi == lo + (JW_ROOT / 2),
          "%s: the two halves of one root expected, got %p and %p", side, (void *)lo, (void *)hi);
  char *s = left ? lo : hi, *x = left ? hi : lo;
  /* S into its class's bitmap: a free that finds the lock held. */
  uint64_t ff = fast_frees();
  jw_backend_test_lock();
  jw_pages_free(s);
  jw_backend_test_unlock();
  REQUIRE(fast_frees() == ff + 1, "%s: the sibling did not go into its bitmap", side);

  arm(JW_TP_BE_SIBLING);
  freed_under_lock = x;
  pthread_t th;
  pthread_create(&th, NULL, locked_free, NULL);
  wait_for(&parked); /* T holds the lock, has read S's head, has not claimed it */
  char *a = jw_pages_alloc(quarter, JW_KIND_LARGE, NULL, NULL); /* S taken and split */
  char *b = jw_pages_alloc(quarter, JW_KIND_LARGE, NULL, NULL); /* its rest */
  REQUIRE(a == s && b == s + quarter_bytes, "%s: S split into %p and %p, expected %p and %p", side, (void *)a,
          (void *)b, (void *)s, (void *)(s + quarter_bytes));
  ff = fast_frees();
  jw_pages_free(a); /* S's head: a free bitmap range of the quarter class */
  REQUIRE(fast_frees() == ff + 1, "%s: the quarter did not go into its bitmap", side);
  jw_store(&go, 1, JW_RELEASE);
  pthread_join(th, NULL);

  char err[300];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "%s: check_all after the merge: %s", side, err);
  jw_pages_free(b);
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "%s: check_all at the end: %s", side, err);
  jw_backend_stats s1;
  jw_backend_get_stats_quiet(&s1);
  CHECK(s1.pages.live_bytes == s0.pages.live_bytes, "%s: %llu live bytes, %llu before", side,
        (unsigned long long)s1.pages.live_bytes, (unsigned long long)s0.pages.live_bytes);
}

int main(void) {
  jw_backend_set_check(1);
  arm(PARK_NO_POINT);
  jw_test_set_point_hook(park_hook);
  for (int i = 0; i < 2; i++) {
    one_case(0);
    one_case(1);
  }
  if (test_failures()) return 1;
  puts("merge_claim: ok");
  return 0;
}
