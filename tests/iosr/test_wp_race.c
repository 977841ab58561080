/* The swap-out write race (issue 5, "Reclaim": a page that the app writes
 * while it is being swapped out must keep the write). The dispatcher is held
 * (test hook) while the pages are write-protected and copied and their writes
 * queued; the app then writes some of them; after release, those pages hold
 * the new data (they stayed resident) and the others were swapped out. */
#include "util.h"

#include <pthread.h>

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

int main(void) {
  iosr_test_require();
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, "test_hooks=1", "racer");
  eng = env.eng;
  iosr_ctx *ctx = env.ctx;
  iosr_ctl *ctl = env.ctl;
  iosr_region *r = iosr_region_create(ctx, N * 4096);
  uint8_t *p = iosr_region_base(r);
  for (uint64_t i = 0; i < N; i++) iosr_fill(p + i * 4096, 41, i, 0);
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
  CHECKF(st.wp_faults == N / 8 && st.resident_pages == N / 8 && st.swapped_pages == N - N / 8,
         "wp faults %llu resident %llu swapped %llu", (unsigned long long)st.wp_faults,
         (unsigned long long)st.resident_pages, (unsigned long long)st.swapped_pages);
  for (uint64_t i = 0; i < N; i++)
    CHECKF(iosr_check(p + i * 4096, 41, i, i % 8 == 0), "page %llu lost %s", (unsigned long long)i,
           i % 8 ? "its content" : "the write made during swap-out");
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
