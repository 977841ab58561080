/* The swap-out write race (issue 5, "Reclaim": a page that the app writes
 * while it is being swapped out must keep the write).
 *
 *   (no argument)       The dispatcher is held (test hook) while the pages
 *                       are write-protected and copied and their writes
 *                       queued; the app then writes some of them; after
 *                       release, those pages hold the new data (they stayed
 *                       resident) and the others were swapped out.
 *   deferred-unprotect  The un-protect that lets such a write go on meets
 *                       EAGAIN (an event is pending; forced by a test hook)
 *                       and runs later; meanwhile a second reclaim protects
 *                       and copies out the page again. The late un-protect
 *                       must not lift that protection: the write would land
 *                       unseen, the dropper would discard the page, and the
 *                       app would read the older bytes from its slot. */
#include "util.h"

#include <pthread.h>
#include <time.h>

#define N 512u

static iosr_engine *eng;

static void *reclaimer(void *arg) {
  (void)arg;
  iosr_ctl *c = iosr_ctl_open_engine(eng);
  uint64_t got;
  CHECK(c && iosr_ctl_reclaim(c, "racer", 0, &got) == 0);
  iosr_ctl_close(c);
  return NULL;
}

static void *writer(void *arg) {
  iosr_fill(arg, 41, 7, 1);
  return NULL;
}

/* Page 7 is written while it is WRITING; its un-protect is held; a second
 * reclaim takes it again before the un-protect runs. */
static void deferred_unprotect(iosr_ctl *ctl, uint8_t *p) {
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 1) == 0);
  pthread_t t, w;
  CHECK(pthread_create(&t, NULL, reclaimer, NULL) == 0);
  iosr_test_wait_queued(ctl, 1); /* write-protected, copied out */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_HOLD_RETRIES, 1) == 0);
  CHECK(pthread_create(&w, NULL, writer, p + 7 * 4096) == 0); /* waits on the protection */
  iosr_app_stats st;
  for (int i = 0; i < 5000; i++) {
    CHECK(iosr_ctl_app_stats(ctl, "racer", &st) == 0);
    if (st.wp_faults) break;
    usleep(1000);
  }
  CHECK(st.wp_faults == 1, "the write did not fault (%llu write-protect faults)", (unsigned long long)st.wp_faults);
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(t, NULL); /* page 7 stayed resident, still protected */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 1) == 0);
  CHECK(pthread_create(&t, NULL, reclaimer, NULL) == 0);
  iosr_test_wait_queued(ctl, 1); /* page 7 (old bytes) is being written out again */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_HOLD_RETRIES, 0) == 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 60;
  CHECK(pthread_timedjoin_np(w, NULL, &ts) == 0, "the write did not complete within 60 s");
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(t, NULL);
  for (uint64_t i = 0; i < N; i++)
    CHECK(iosr_check(p + i * 4096, 41, i, i == 7), "page %llu lost %s", (unsigned long long)i,
          i != 7 ? "its content" : "the write made while its un-protect waited (it reads the older bytes)");
  printf("deferred un-protect: the write kept while the page was written out again\n");
}

int main(int argc, char **argv) {
  int deferred = argc == 2 && !strcmp(argv[1], "deferred-unprotect");
  if (argc > 2 || (argc == 2 && !deferred)) {
    fprintf(stderr, "usage: test_wp_race [deferred-unprotect]\n");
    return 2;
  }
  iosr_test_require();
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, "test_hooks=1", "racer");
  eng = env.eng;
  iosr_ctx *ctx = env.ctx;
  iosr_ctl *ctl = env.ctl;
  iosr_region *r;
  uint8_t *p = iosr_test_fill_new_region(ctx, N, 41, &r);
  if (deferred) {
    deferred_unprotect(ctl, p);
    iosr_test_inproc_end(&env);
    iosr_test_cleanup();
    return 0;
  }
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 1) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reclaimer, NULL) == 0);
  /* wait until the writes are queued: the pages are write-protected, copied out */
  iosr_test_wait_queued(ctl, 2);
  /* the app writes every 8th page now: each write faults on write protection */
  for (uint64_t i = 0; i < N; i += 8) iosr_fill(p + i * 4096, 41, i, 1);
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(t, NULL);
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "racer", &st) == 0);
  printf("wp race: %llu write faults during swap-out; %llu pages swapped, %llu kept resident\n",
         (unsigned long long)st.wp_faults, (unsigned long long)st.swapped_pages, (unsigned long long)st.resident_pages);
  CHECK(st.wp_faults == N / 8 && st.resident_pages == N / 8 && st.swapped_pages == N - N / 8,
        "wp faults %llu resident %llu swapped %llu", (unsigned long long)st.wp_faults,
        (unsigned long long)st.resident_pages, (unsigned long long)st.swapped_pages);
  for (uint64_t i = 0; i < N; i++)
    CHECK(iosr_check(p + i * 4096, 41, i, i % 8 == 0), "page %llu lost %s", (unsigned long long)i,
          i % 8 ? "its content" : "the write made during swap-out");
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
