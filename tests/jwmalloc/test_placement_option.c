/* JWMALLOC_PLACEMENT changed at run time while the library works
 * (docs/design/backend.md 7b, reclamation.md 6a): jw_option_set from several
 * threads, against the trough detector's trim requests, during trims, chains
 * of cross-thread frees and thread exits. Afterwards the option, the
 * backend's mode and the switch in force agree (page_source.h), and every
 * block is intact.
 *
 * Usage: test_placement_option CASE [SCALE]
 *   concurrent_sets     jw_option_set("PLACEMENT", 0/1) from two threads at
 *                       once, many rounds: afterwards the option, the
 *                       backend's mode and the switch in force agree
 *   flips_during_exits  threads that allocate in every tier, free across
 *                       threads (chains pending), trim and exit, while three
 *                       threads flip PLACEMENT and raise the trim epoch (run
 *                       with JWMALLOC_CHECK=1: queues checked at every
 *                       conversion, the backend's trees on every operation):
 *                       every block's pattern intact, nothing live at the
 *                       end, backend check clean
 *   set_vs_trim_request jw_option_set("PLACEMENT", 0 | 1) racing the
 *                       detector's trim request (jw_pages_place_trim, which
 *                       the detector calls at every full cycle of a lasting
 *                       trough): once both are done, placement is off after
 *                       mode 0 and on after mode 1 (SETRACE_CONTROL=1 in the
 *                       environment: without the racing requests)
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "backend/backend.h"
#include "pages/page_source.h"
#include "checked_blocks.h"
#include "jwmalloc.h"
#include "thread_test.h"

/* ---- concurrent_sets: concurrent switches agree at the end ---- */

static pthread_barrier_t bar;
static long race_rounds;
static atomic_int race_stop;

static void *racer(void *arg) {
  long me = (long)arg;
  for (long r = 0; r < race_rounds; r++) {
    pthread_barrier_wait(&bar);
    /* Both threads set, one 0 and one 1 (which one alternates). */
    CHECK(jw_option_set("PLACEMENT", (me + r) & 1) == 0, "concurrent_sets: jw_option_set failed");
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* main checks in between */
  }
  return NULL;
}

static int case_concurrent_sets(void) {
  race_rounds = scaled(20000);
  pthread_barrier_init(&bar, NULL, 3);
  pthread_t t[2];
  for (long i = 0; i < 2; i++) pthread_create(&t[i], NULL, racer, (void *)i);
  long bad = 0, first_bad = -1, opt_mode_differ = 0;
  for (long r = 0; r < race_rounds; r++) {
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar);
    long opt = -1;
    jw_option_get("PLACEMENT", &opt);
    unsigned mode = jw_pages_place_mode();
    bool on = jw_place_on();
    if ((long)mode != opt) opt_mode_differ++;
    if ((mode == JW_PLACE_ON) != on) {
      if (bad++ == 0) first_bad = r;
    }
    pthread_barrier_wait(&bar);
  }
  for (int i = 0; i < 2; i++) pthread_join(t[i], NULL);
  CHECK(bad == 0,
        "concurrent_sets: %ld of %ld rounds ended with the mode and the switch in force disagreeing (first at "
        "round %ld): PLACEMENT reads one thing, the tiers do the other",
        bad, race_rounds, first_bad);
  CHECK(opt_mode_differ == 0,
        "concurrent_sets: %ld of %ld rounds ended with jw_option_get(PLACEMENT) and the backend's mode "
        "disagreeing",
        opt_mode_differ, race_rounds);
  printf("concurrent_sets: %ld rounds of two concurrent switches; %ld disagreements (switch), %ld (option vs mode)\n",
         race_rounds, bad, opt_mode_differ);
  return test_failures() ? 1 : 0;
}

/* ---- flips_during_exits: flips during trims, chains and thread exits ---- */

#define MBOX 512
static pthread_mutex_t mbox_mu = PTHREAD_MUTEX_INITIALIZER;
static void *mbox[MBOX];
static int mbox_n;
static atomic_long flips, exits_done, checked_blocks;

static size_t pick(uint64_t *s) {
  unsigned r = (unsigned)(rnd(s) % 100);
  if (r < 70) return 16 + rnd(s) % 1500;
  if (r < 90) return 2100 + rnd(s) % 12000;
  return 16384 + rnd(s) % (60 * 1024);
}

/* Trades blocks with the others: puts `p` in, takes one out to free. */
static void *trade(void *p) {
  pthread_mutex_lock(&mbox_mu);
  void *out = NULL;
  if (mbox_n == MBOX || (p == NULL && mbox_n > 0)) out = mbox[--mbox_n];
  else if (mbox_n > 0 && (((uintptr_t)p >> 4) & 1)) out = mbox[--mbox_n];
  if (p) mbox[mbox_n++] = p;
  pthread_mutex_unlock(&mbox_mu);
  return out;
}

static void *churner(void *arg) {
  uint64_t s = (uint64_t)(uintptr_t)arg * 0x9e3779b97f4a7c15ULL + 1;
  enum { K = 200 };
  void *mine[K] = {0};
  long ops = scaled(15000);
  for (long i = 0; i < ops; i++) {
    unsigned k = (unsigned)(rnd(&s) % K);
    if (mine[k]) {
      if (rnd(&s) % 3 == 0) {
        void *o = trade(mine[k]); /* someone else frees it */
        if (o) check_and_free(o), atomic_fetch_add(&checked_blocks, 1);
      } else {
        check_and_free(mine[k]), atomic_fetch_add(&checked_blocks, 1);
      }
      mine[k] = NULL;
    } else {
      mine[k] = make(pick(&s), rnd(&s));
    }
    if (i % 1500 == 1499) jw_malloc_trim(0);
  }
  /* Exit with a chain likely pending and blocks of ours in others' hands. */
  for (unsigned k = 0; k < K; k++)
    if (mine[k]) {
      if (k & 1) {
        void *o = trade(mine[k]);
        if (o) check_and_free(o), atomic_fetch_add(&checked_blocks, 1);
      } else {
        check_and_free(mine[k]), atomic_fetch_add(&checked_blocks, 1);
      }
    }
  atomic_fetch_add(&exits_done, 1);
  return NULL;
}

static void *flipper(void *arg) {
  long me = (long)arg;
  uint64_t s = (uint64_t)me + 99;
  static const long modes[] = {1, 0, 2};
  while (!atomic_load(&race_stop)) {
    long m = modes[rnd(&s) % 3];
    CHECK(jw_option_set("PLACEMENT", m) == 0, "flips_during_exits: jw_option_set(%ld)", m);
    if (rnd(&s) & 1) jw_pages_place_trim();
    atomic_fetch_add(&flips, 1);
    if (me == 0 && rnd(&s) % 64 == 0) jw_malloc_trim(0);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static int case_flips_during_exits(void) {
  pthread_t fl[3];
  for (long i = 0; i < 3; i++) pthread_create(&fl[i], NULL, flipper, (void *)i);
  long gens = scaled(12);
  for (long g = 0; g < gens; g++) {
    pthread_t w[3];
    for (long i = 0; i < 3; i++) pthread_create(&w[i], NULL, churner, (void *)(g * 3 + i + 1));
    for (int i = 0; i < 3; i++) pthread_join(w[i], NULL);
    char err[256];
    CHECK(jw_backend_check_all(err, sizeof err) == 0, "flips_during_exits: backend check after generation %ld: %s", g,
          err);
  }
  atomic_store(&race_stop, 1);
  for (int i = 0; i < 3; i++) pthread_join(fl[i], NULL);
  void *o;
  while ((o = trade(NULL)) != NULL) check_and_free(o), atomic_fetch_add(&checked_blocks, 1);
  jw_option_set("PLACEMENT", 0);
  jw_malloc_trim(0);
  char err[256];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "flips_during_exits: backend check at the end: %s", err);
  jw_stats e = st();
  CHECK(e.small_mallocs == e.small_frees, "flips_during_exits: small mallocs %llu != frees %llu with every block freed",
        (unsigned long long)e.small_mallocs, (unsigned long long)e.small_frees);
  CHECK(e.page_source_live_bytes == 0 || e.page_source_live_bytes <= 64 * 4096,
        "flips_during_exits: %llu bytes of pages live with every block freed and every thread gone",
        (unsigned long long)e.page_source_live_bytes);
  printf("flips_during_exits: %ld generations of 3 threads, %ld flips, %ld blocks checked, %llu bytes live at the "
         "end\n",
         gens, atomic_load(&flips), atomic_load(&checked_blocks), (unsigned long long)e.page_source_live_bytes);
  return test_failures() ? 1 : 0;
}

/* ---- set_vs_trim_request: a set racing the detector's trim request ---- */

static atomic_int setrace_stop;
static atomic_ulong trims;

/* What the detector does at each full cycle of a lasting trough. */
static void *trim_requester(void *a) {
  (void)a;
  while (!atomic_load(&setrace_stop)) {
    jw_pages_place_trim();
    atomic_fetch_add(&trims, 1);
  }
  return NULL;
}

static int case_set_vs_trim_request(void) {
  jw_free(jw_malloc(100)); /* the library initialised: its options set */
  pthread_t t;
  if (!getenv("SETRACE_CONTROL")) pthread_create(&t, NULL, trim_requester, NULL);
  long iters = scaled(20000), stuck = 0;
  for (long i = 0; i < iters && stuck == 0; i++) {
    unsigned want = (unsigned)(i & 1);
    CHECK(jw_option_set("PLACEMENT", want) == 0, "jw_option_set");
    /* Two whole trim requests after the set returned: a request that read
     * the old state has finished, later ones keep what they find. */
    unsigned long t0 = atomic_load(&trims);
    TEST_WAIT_UNTIL(getenv("SETRACE_CONTROL") || atomic_load(&trims) >= t0 + 2);
    if (jw_place_on() != (want == 1)) {
      stuck++;
      FAIL("iteration %ld: PLACEMENT set to %u but placement is %s for good", i, want, jw_place_on() ? "on" : "off");
    }
  }
  atomic_store(&setrace_stop, 1);
  if (!getenv("SETRACE_CONTROL")) pthread_join(t, NULL);
  jw_option_set("PLACEMENT", 2);
  printf("set_vs_trim_request: %lu trim requests\n", atomic_load(&trims));
  return 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"concurrent_sets", case_concurrent_sets},
      {"flips_during_exits", case_flips_during_exits},
      {"set_vs_trim_request", case_set_vs_trim_request},
  };
  setvbuf(stdout, NULL, _IONBF, 0);
  return TEST_MAIN(cases);
}
