/* I/O scheduling in the engine (issue 5, "Must be shown"): app W is being
 * reclaimed (its writes fill the queue) when the foreground app F faults on a
 * swapped page. With the dispatcher held (test hook) until both are queued,
 * the dispatch log shows sios sending F's fault read before W's queued writes
 * and fifo after them. Counts and order only. */
#include "util.h"
#include <pthread.h>
#include <stdatomic.h>


#define NPAGES 4096u

static iosr_engine *eng;
static atomic_int reclaim_done;

static void *reclaim_w(void *arg) {
  (void)arg;
  iosr_ctl *c = iosr_ctl_open_engine(eng);
  CHECK(c);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(c, "W", 0, &got) == 0);
  iosr_ctl_close(c);
  atomic_store(&reclaim_done, 1);
  return NULL;
}

static uint8_t *fbase;
static atomic_int f_done;
static void *touch_f(void *arg) {
  (void)arg;
  CHECK(iosr_check(fbase, 2, 0, 0));
  atomic_store(&f_done, 1);
  return NULL;
}

static unsigned queued(iosr_ctl *ctl) { return (unsigned)iosr_test_stat(ctl, "\"queued\":"); }

static void run(const char *sched, int *fg_pos, int *writes_before, int *writes_total) {
  char swap[256], settings[128];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  snprintf(settings, sizeof settings, "sched=%s,test_hooks=1,write_hold_ms=60000,write_hold_max=1000", sched);
  eng = iosr_engine_start(swap, settings);
  CHECK(eng);
  iosr_connect_opts ow = {.app_name = "W", .engine = eng}, of = {.app_name = "F", .engine = eng};
  iosr_ctx *w = iosr_connect(&ow), *f = iosr_connect(&of);
  CHECK(w && f);
  iosr_ctl *ctl = iosr_ctl_open_engine(eng);
  CHECK(ctl);
  iosr_region *rw = iosr_region_create(w, NPAGES * 4096), *rf = iosr_region_create(f, 64 * 4096);
  CHECK(rw && rf);
  uint8_t *pw = iosr_region_base(rw);
  fbase = iosr_region_base(rf);
  for (uint64_t i = 0; i < NPAGES; i++) iosr_fill(pw + i * 4096, 1, i, 0);
  for (uint64_t i = 0; i < 64; i++) iosr_fill(fbase + i * 4096, 2, i, 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(ctl, "F", 0, &got) == 0 && got == 64 * 4096);
  CHECK(iosr_ctl_foreground(ctl, "F") == 0);
  iosr_dispatch_rec log[512];
  size_t n = 512;
  CHECK(iosr_ctl_dispatch_log(ctl, log, &n) == 0); /* clears it */
  /* hold the dispatcher; W's writes queue up; then F faults */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 1) == 0);
  atomic_store(&reclaim_done, 0);
  atomic_store(&f_done, 0);
  pthread_t tw, tf;
  CHECK(pthread_create(&tw, NULL, reclaim_w, NULL) == 0);
  unsigned q0 = iosr_test_wait_queued(ctl, 8);
  CHECK(pthread_create(&tf, NULL, touch_f, NULL) == 0);
  for (int i = 0; i < 5000 && queued(ctl) == q0; i++) usleep(1000);
  CHECK(queued(ctl) > q0);
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(tf, NULL);
  pthread_join(tw, NULL);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  n = 512;
  CHECK(iosr_ctl_dispatch_log(ctl, log, &n) == 0);
  iosr_app_stats fs;
  CHECK(iosr_ctl_app_stats(ctl, "F", &fs) == 0);
  *fg_pos = -1;
  *writes_before = 0;
  *writes_total = 0;
  for (size_t i = 0; i < n; i++) {
    if (log[i].write) {
      (*writes_total)++;
      if (*fg_pos < 0) (*writes_before)++;
    } else if (log[i].app == fs.id && log[i].cls == 0 && *fg_pos < 0) {
      *fg_pos = (int)i;
    }
  }
  CHECK(*fg_pos >= 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_disconnect(w) == 0 && iosr_disconnect(f) == 0);
  CHECK(iosr_engine_stop(eng) == 0);
  printf("%s: %u requests queued when released; F's fault read was dispatch #%d, after %d of W's %d writes\n",
         sched, q0 + 1, *fg_pos, *writes_before, *writes_total);
}

int main(void) {
  iosr_test_require();
  int pos, before, total;
  run("sios", &pos, &before, &total);
  CHECK(pos == 0 && before == 0, "sios: fault read at %d after %d writes", pos, before);
  run("fifo", &pos, &before, &total);
  CHECK(before >= 8, "fifo: fault read after only %d writes", before);
  iosr_test_cleanup();
  return 0;
}
