/* Failures with nothing lost (issue 5, "Must be shown"): a full swap area
 * stops reclaim with a clear error and the pages stay resident; a write error
 * leaves the pages resident and is counted; a read error gives the faulting
 * thread SIGBUS while other apps are still served. In-process engine, I/O
 * errors injected by the engine's test hooks. */
#include "util.h"
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>


static sigjmp_buf jb;
static volatile void *bus_addr;
static volatile int bus_code;

static void on_bus(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  bus_addr = si->si_addr;
  bus_code = si->si_code;
  siglongjmp(jb, 1);
}

int main(void) {
  iosr_test_require();
  /* ---- 1. full swap area: 300 slots for 512 pages ---- */
  iosr_test_env env;
  iosr_test_inproc(&env, 301 * 4096, "test_hooks=1", "big");
  iosr_engine *eng = env.eng;
  iosr_ctx *ctx = env.ctx;
  iosr_ctl *ctl = env.ctl;
  iosr_region *r;
  uint8_t *p = iosr_test_fill_new_region(ctx, 512, 11, &r);
  uint64_t got = 0;
  errno = 0;
  CHECK(iosr_ctl_reclaim(ctl, "big", 0, &got) == -1 && errno == ENOSPC);
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "big", &st) == 0);
  CHECK(st.swapped_pages == 300 && st.resident_pages == 212 && got == 300 * 4096ull,
        "full: swapped %llu resident %llu reclaimed %llu", (unsigned long long)st.swapped_pages,
        (unsigned long long)st.resident_pages, (unsigned long long)got);
  for (int i = 0; i < 512; i++) CHECK(iosr_check(p + i * 4096, 11, (uint64_t)i, 0));
  /* written (the same bytes): the pages read back give up their slots, so
   * the next reclaim has slots to write to */
  for (int i = 0; i < 512; i++) iosr_fill(p + i * 4096, 11, (uint64_t)i, 0);
  printf("full area: reclaim stopped with ENOSPC after 300 of 512 pages, all 512 intact\n");

  /* ---- 2. write errors: the pages stay resident, counted, slots retired ---- */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_FAIL_WRITES, 1) == 0);
  errno = 0;
  int rc = iosr_ctl_reclaim(ctl, "big", 0, &got);
  CHECK(iosr_ctl_app_stats(ctl, "big", &st) == 0);
  CHECK(st.write_errors == 1, "write errors %llu", (unsigned long long)st.write_errors);
  CHECK(rc == -1 && (errno == EIO || errno == ENOSPC), "reclaim with a failing write: rc %d errno %d", rc, errno);
  CHECK(st.resident_pages + st.swapped_pages == 512 && st.resident_pages >= 1,
        "resident %llu swapped %llu", (unsigned long long)st.resident_pages, (unsigned long long)st.swapped_pages);
  char *js = iosr_ctl_stat_json(ctl);
  CHECK(js && !strstr(js, "\"bad\":0,"));
  free(js);
  for (int i = 0; i < 512; i++) CHECK(iosr_check(p + i * 4096, 11, (uint64_t)i, 0), "page %d after write error", i);
  printf("write error: counted, slots retired, every page intact and resident\n");
  CHECK(iosr_region_destroy(r) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);

  /* ---- 3. read error: SIGBUS in the faulting thread, other apps served ---- */
  char swap[256];
  iosr_test_swap(swap, sizeof swap, 16u << 20);
  eng = iosr_engine_start(swap, "test_hooks=1,readahead=cluster,page_cluster=0");
  CHECK(eng);
  iosr_connect_opts o1 = {.app_name = "victim", .engine = eng}, o2 = {.app_name = "bystander", .engine = eng};
  iosr_ctx *c1 = iosr_connect(&o1), *c2 = iosr_connect(&o2);
  ctl = iosr_ctl_open_engine(eng);
  CHECK(c1 && c2 && ctl);
  iosr_region *r1 = iosr_region_create(c1, 64 * 4096), *r2 = iosr_region_create(c2, 64 * 4096);
  uint8_t *p1 = iosr_region_base(r1), *p2 = iosr_region_base(r2);
  for (int i = 0; i < 64; i++) {
    iosr_fill(p1 + i * 4096, 12, (uint64_t)i, 0);
    iosr_fill(p2 + i * 4096, 13, (uint64_t)i, 0);
  }
  CHECK(iosr_ctl_reclaim(ctl, "victim", 0, &got) == 0 && iosr_ctl_reclaim(ctl, "bystander", 0, &got) == 0);
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_FAIL_READS, 1) == 0);
  struct sigaction sa = {.sa_sigaction = on_bus, .sa_flags = SA_SIGINFO};
  sigaction(SIGBUS, &sa, NULL);
  volatile int bused = 0;
  if (sigsetjmp(jb, 1) == 0) {
    volatile uint8_t x = p1[5 * 4096];
    (void)x;
  } else {
    bused = 1;
  }
  CHECK(bused && bus_addr == p1 + 5 * 4096, "no SIGBUS at the unreadable page (got %p)", (void *)bus_addr);
  /* other pages of the victim, and the other app, are served */
  for (int i = 0; i < 64; i++) CHECK(iosr_check(p2 + i * 4096, 13, (uint64_t)i, 0));
  for (int i = 0; i < 64; i++)
    if (i != 5) CHECK(iosr_check(p1 + i * 4096, 12, (uint64_t)i, 0));
  CHECK(iosr_ctl_app_stats(ctl, "victim", &st) == 0 && st.read_errors == 1);
  /* the page stays poisoned (SIGBUS again) until discarded; then it reads zero */
  bused = 0;
  if (sigsetjmp(jb, 1) == 0) {
    volatile uint8_t x = p1[5 * 4096];
    (void)x;
  } else {
    bused = 1;
  }
  CHECK(bused);
  CHECK(iosr_region_discard(r1, 5 * 4096, 4096) == 0);
  CHECK(iosr_is_zero(p1 + 5 * 4096));
  printf("read error: SIGBUS (si_code %d) at the page, the rest and the other app served\n", bus_code);
  signal(SIGBUS, SIG_DFL);
  CHECK(iosr_region_destroy(r1) == 0 && iosr_region_destroy(r2) == 0);
  CHECK(iosr_disconnect(c1) == 0 && iosr_disconnect(c2) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  return 0;
}
