/* The hard budget (design note section 9, "Memory budget"): while apps fault
 * (first touch, swap-in with read-ahead, two threads at once), the resident
 * region pages never pass the budget, as IOSR counts them (the engine's
 * resident pages and its peak over the budget) and as the kernel sees them
 * (mincore over the regions). Every page comes back as written. */
#include "util.h" /* first: it sets _GNU_SOURCE */

#include <pthread.h>
#include <time.h>

#include "client/client_int.h"

#define MB (1u << 20)
#define BUDGET_PAGES 512u /* 2 MiB */
#define FG_PAGES 1536u    /* 6 MiB: three times the budget */
#define BG_PAGES 768u

static iosr_ctl *ctl;
static uint8_t *pf, *pb;
static volatile int done;
static uint64_t samples, kernel_max, iosr_max, kernel_over, iosr_over;

static uint64_t mincore_pages(void *base, size_t pages) {
  static unsigned char vec[FG_PAGES];
  CHECK(mincore(base, pages * 4096, vec) == 0);
  uint64_t n = 0;
  for (size_t i = 0; i < pages; i++) n += vec[i] & 1;
  return n;
}

/* mincore reads the page tables one after another, not at one instant: a
 * page counted early and discarded before a page counted late would make
 * the sum more than was ever resident at once. Only the dropper discards
 * region pages (the engine maps them in, never out), so the sampler holds
 * the dropper's madvise off while it reads (the drop gate of
 * client/client_int.h): every page it counts is still resident when it ends,
 * and the count is a lower bound of what was resident at that instant. */
static pthread_rwlock_t discard_lock = PTHREAD_RWLOCK_INITIALIZER;
static __thread int discarding;

static void discard_gate(uint64_t id, int phase) {
  (void)id;
  if (phase == 3 && !discarding) { /* a run's madvise follows */
    CHECK(pthread_rwlock_rdlock(&discard_lock) == 0);
    discarding = 1;
  } else if (phase == 1 && discarding) { /* the drop's last madvise is done */
    CHECK(pthread_rwlock_unlock(&discard_lock) == 0);
    discarding = 0;
  }
}

/* Samples while the foreground app faults. */
static void *sampler(void *arg) {
  (void)arg;
  while (!__atomic_load_n(&done, __ATOMIC_ACQUIRE)) {
    CHECK(pthread_rwlock_wrlock(&discard_lock) == 0);
    uint64_t k = mincore_pages(pf, FG_PAGES) + mincore_pages(pb, BG_PAGES);
    CHECK(pthread_rwlock_unlock(&discard_lock) == 0);
    uint64_t r = iosr_test_stat(ctl, "\"resident_pages\":");
    if (k > kernel_max) kernel_max = k;
    if (r > iosr_max) iosr_max = r;
    kernel_over += k > BUDGET_PAGES;
    iosr_over += r > BUDGET_PAGES;
    samples++;
    struct timespec ts = {0, 200000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* A second thread of the foreground app: the upper half, backwards. */
static void *reader(void *arg) {
  int *ok = arg;
  for (uint64_t i = FG_PAGES; i-- > FG_PAGES / 2;) *ok &= iosr_check(pf + i * 4096, 7, i, 0);
  return NULL;
}

int main(void) {
  iosr_test_require();
  char swap[256];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  iosr_test_drop_gate = discard_gate;
  iosr_engine *eng = iosr_engine_start(swap, "budget=2M,readahead=adaptive");
  CHECK(eng);
  iosr_connect_opts ob = {.app_name = "back", .engine = eng}, of = {.app_name = "front", .engine = eng};
  iosr_ctx *b = iosr_connect(&ob), *f = iosr_connect(&of);
  ctl = iosr_ctl_open_engine(eng);
  CHECK(b && f && ctl);
  iosr_region *rb = iosr_region_create(b, BG_PAGES * 4096), *rf = iosr_region_create(f, FG_PAGES * 4096);
  CHECK(rb && rf);
  pb = iosr_region_base(rb);
  pf = iosr_region_base(rf);
  /* "back" fills its region in the foreground (1.5 times the budget: its
   * own pages go), then goes to the background */
  CHECK(iosr_ctl_foreground(ctl, "back") == 0);
  for (uint64_t i = 0; i < BG_PAGES; i++) iosr_fill(pb + i * 4096, 5, i, 0);
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  pthread_t ts, tr;
  CHECK(pthread_create(&ts, NULL, sampler, NULL) == 0);
  /* first touch (zero windows), then two passes of swap-in with read-ahead,
   * the second with two threads */
  for (uint64_t i = 0; i < FG_PAGES; i++) iosr_fill(pf + i * 4096, 7, i, 0);
  int ok = 1, ok2 = 1;
  for (uint64_t i = 0; i < FG_PAGES; i++) ok &= iosr_check(pf + i * 4096, 7, i, 0);
  CHECK(pthread_create(&tr, NULL, reader, &ok2) == 0);
  for (uint64_t i = 0; i < FG_PAGES / 2; i++) ok &= iosr_check(pf + i * 4096, 7, i, 0);
  CHECK(pthread_join(tr, NULL) == 0);
  __atomic_store_n(&done, 1, __ATOMIC_RELEASE);
  CHECK(pthread_join(ts, NULL) == 0);
  CHECK(ok && ok2, "a page of the foreground app came back with other bytes");
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t over_peak = iosr_test_stat(ctl, "\"over_peak_pages\":");
  uint64_t overrun = iosr_test_stat(ctl, "\"overrun_pages\":");
  uint64_t held = iosr_test_stat(ctl, "\"held_faults\":");
  uint64_t cut = iosr_test_stat(ctl, "\"ra_cut_pages\":");
  uint64_t majors = iosr_test_stat(ctl, "\"reads\":");
  printf("budget %u pages: %llu samples, most resident %llu (kernel) %llu (IOSR), over the budget in %llu / %llu "
         "samples; peak over %llu, overrun %llu pages, %llu faults held, %llu read-ahead pages cut, "
         "%llu reads\n",
         BUDGET_PAGES, (unsigned long long)samples, (unsigned long long)kernel_max, (unsigned long long)iosr_max,
         (unsigned long long)kernel_over, (unsigned long long)iosr_over, (unsigned long long)over_peak,
         (unsigned long long)overrun, (unsigned long long)held, (unsigned long long)cut, (unsigned long long)majors);
  CHECK(samples > 0, "no sample taken");
  CHECK(kernel_max <= BUDGET_PAGES, "the kernel saw %llu region pages resident, budget %u",
        (unsigned long long)kernel_max, BUDGET_PAGES);
  CHECK(iosr_max <= BUDGET_PAGES, "IOSR counted %llu pages resident, budget %u", (unsigned long long)iosr_max,
        BUDGET_PAGES);
  CHECK(over_peak == 0 && overrun == 0, "the budget was passed by up to %llu pages (%llu pages past it)",
        (unsigned long long)over_peak, (unsigned long long)overrun);
  for (uint64_t i = 0; i < BG_PAGES; i++) CHECK(iosr_check(pb + i * 4096, 5, i, 0));
  CHECK(iosr_disconnect(b) == 0 && iosr_disconnect(f) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  return 0;
}
