/* The hand-over of deferred frees (docs/design/backend.md, section 7c,
 * "The deferred hand-over"), made deterministic with the backend's test points
 * (built with JW_TEST_HOOKS). A free that finds the backend lock held pushes
 * its range on the deferred list for the holder to file; once every free has
 * returned, none may still wait there (it would stay counted live, out of
 * the locked path's reach and never aged, until some later backend call).
 * The two interleavings that lost a free before the fix:
 *   after_release  the free's try-lock fails, the holder drains (nothing
 *                  yet) and releases, then the free pushes;
 *   after_drain    the holder has drained for the last time, the free
 *                  pushes, then the holder releases.
 * Each is forced with the other thread parked at a test point, then the
 * live count is read without the lock: it must be back where it was.
 * Built a second time with the hand-over's second look left out
 * (JW_MUTATE_NO_HANDOFF): that build must fail (CTest WILL_FAIL). */
#include <pthread.h>

#include "backend/backend.h"
#include "park.h"
#include "tb.h"

/* Each case starts from figures a lock holder settled (a loss in an earlier
 * case must not hide one in this one). */
static uint64_t live_settled(void) {
  jw_backend_stats s;
  jw_backend_get_stats_quiet(&s);
  return s.pages.live_bytes;
}

static uint64_t live_now(void) {
  jw_backend_stats s;
  jw_backend_get_stats(&s); /* no lock: what a process gone quiet would keep */
  return s.pages.live_bytes;
}

static char *alloc1(void) {
  char *p = jw_pages_alloc(1, JW_KIND_SMALL_SLAB, NULL, NULL);
  REQUIRE(p != NULL, "alloc");
  return p;
}

/* after_release: this thread frees (aged: never into a bitmap, so deferred)
 * while the main thread holds the lock, and parks before its push. */
static char *victim;
static void *aged_freer(void *arg) {
  (void)arg;
  jw_pages_free_aged(victim);
  return NULL;
}

static void t_after_release(void) {
  uint64_t base = live_settled();
  victim = alloc1();
  jw_backend_test_lock();
  arm(JW_TP_BE_DEFER);
  pthread_t th;
  pthread_create(&th, NULL, aged_freer, NULL);
  wait_for(&parked);             /* its try-lock failed: it is about to push */
  jw_backend_test_unlock();      /* drains nothing yet, releases */
  jw_store(&go, 1, JW_RELEASE);  /* now it pushes, the lock free */
  pthread_join(th, NULL);
  uint64_t live = live_now();
  CHECK(live == base, "after_release: %llu bytes still live after the free returned (left on the deferred list)",
        (unsigned long long)(live - base));
}

/* after_drain: a holder parks after its last drain; a free of a range whose
 * buddy is free (its probe sends it to the lock, which is held: deferred)
 * pushes; then the holder releases. */
static void *holder(void *arg) {
  (void)arg;
  jw_backend_test_lock();
  jw_backend_test_unlock(); /* parks at JW_TP_BE_UNLOCK */
  return NULL;
}

static void t_after_drain(void) {
  uint64_t base = live_settled();
  char *x = alloc1(), *y = alloc1();
  /* Buddies when x is the lower of an aligned pair (a fresh split gives
   * that); otherwise the free may go to a bitmap and the case proves less. */
  if (x > y) {
    char *t = x;
    x = y, y = t;
  }
  jw_pages_free(y);
  arm(JW_TP_BE_UNLOCK);
  pthread_t th;
  pthread_create(&th, NULL, holder, NULL);
  wait_for(&parked); /* the holder has drained for the last time */
  jw_backend_stats s0;
  jw_backend_get_stats(&s0);
  jw_pages_free(x);  /* the lock is held: deferred or into a bitmap, never waits */
  jw_backend_stats s1;
  jw_backend_get_stats(&s1);
  jw_store(&go, 1, JW_RELEASE);
  pthread_join(th, NULL);
  uint64_t live = live_now();
  CHECK(s1.deferred_frees == s0.deferred_frees + 1, "after_drain: the free was not deferred (%s)",
        "its buddy was not free: the case did not run");
  CHECK(live == base, "after_drain: %llu bytes still live after the free returned (left on the deferred list)",
        (unsigned long long)(live - base));
}

int main(void) {
  jw_backend_set_check(1);
  arm(PARK_NO_POINT);
  jw_test_set_point_hook(park_hook);
  for (int i = 0; i < 3; i++) {
    t_after_release();
    t_after_drain();
  }
  char err[300];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "check_all: %s", err);
  if (test_failures()) return 1;
  puts("handoff: ok");
  return 0;
}
