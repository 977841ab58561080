/* A lock holder frozen for ever must not make any malloc or free wait (brief,
 * "Non-blocking interface"; issue 8). For one lock kind of the allocator
 * (common/lock.h: backend, midend class, page pool, aging, reclaimer token,
 * kept direct mappings),
 * a trigger thread takes that lock the way the allocator does and is frozen
 * there by the test hook (the library variant jwmalloc_api_hooks; release
 * libraries have no hook). Then worker threads allocate and free blocks of
 * every tier (frontend, midend including the frozen class, backend ranges of
 * classes with and without a bitmap, direct mappings), half of them freed by
 * another thread, with patterns checked. The test fails when they do not all
 * finish within a bound of seconds: a hang bound, not a timing check.
 *
 * Usage: test_frozen KIND   (backend, midend, pool, aging, token, huge)
 *        test_frozen midend trim
 *        test_frozen midend shards
 *
 * `midend trim`: malloc_trim, called while the midend class lock is frozen,
 * must not return before it has emptied that class's cache (a skipped class
 * keeps partly used slabs pinned): it waits for the holder. The test fails if
 * the trim returns while the holder is still frozen.
 *
 * `midend shards`: the same run with the midend class lock frozen, counting
 * the mallocs of midend classes that took the page-range fallback while the
 * workers ran (docs/design/midend.md, "Shards"): a thread whose home shard's
 * lock is held takes another shard's, so at most 1 in 20 of them may fall
 * back (with one lock per class every cache miss of the frozen class did).
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/backend.h"
#include "common/lock.h"
#include "jwmalloc.h"
#include "midend/midend.h"

enum { WORKERS = 4, ROUNDS = 40, PER_ROUND = 24, HANG_SECONDS = 60 };
#define MID_SIZE 4000 /* a midend class; the midend trigger freezes it */

static int target;
static atomic_int frozen, release_holder, failures, done_workers;
static __thread int may_freeze; /* only the trigger thread is frozen */
static const char *kind_name;

static void hook(jw_lock_kind k) {
  if (!may_freeze || (int)k != target) return;
  int exp = 0;
  if (!atomic_compare_exchange_strong(&frozen, &exp, 1)) return; /* once */
  while (!atomic_load(&release_holder)) usleep(1000); /* frozen, holding the lock */
}

static void on_alarm(int sig) {
  (void)sig;
  char msg[160];
  int n = snprintf(msg, sizeof msg,
                   "test_frozen %s: %s (hang bound of %d s; %d of %d workers done)\n", kind_name,
                   atomic_load(&frozen) ? "a malloc or free waited for the frozen lock holder"
                                        : "the trigger never took the lock",
                   HANG_SECONDS, atomic_load(&done_workers), WORKERS);
  (void)!write(2, msg, (size_t)n);
  _exit(1);
}

/* ---- the trigger: takes the target lock the way the allocator does ---- */

static void *trigger(void *arg) {
  (void)arg;
  may_freeze = 1;
  static void *keep[512];
  while (!atomic_load(&frozen)) {
    switch (target) {
      case JW_LK_BACKEND: { /* a class without a bitmap: the locked lists */
        void *p = jw_malloc(300 << 10), *q = jw_malloc(40 << 10);
        jw_free(p);
        jw_free(q);
        break;
      }
      case JW_LK_MIDEND: /* the class cache empties and fills: its lock */
        for (int i = 0; i < 512; i++) keep[i] = jw_malloc(MID_SIZE);
        for (int i = 0; i < 512; i++) jw_free(keep[i]);
        break;
      case JW_LK_POOL: /* slabs empty into the thread's page pool */
        for (int i = 0; i < 512; i++) keep[i] = jw_malloc(900);
        for (int i = 0; i < 512; i++) jw_free(keep[i]);
        break;
      case JW_LK_HUGE: /* freed direct mappings kept and reused */
        jw_free(jw_malloc(6 << 20));
        break;
      case JW_LK_AGING: /* a reclaim cycle ages the tiers' caches */
      case JW_LK_TOKEN:
        for (int i = 0; i < 64; i++) jw_free(jw_malloc(64 + (size_t)i * 16));
        jw_backend_reclaim_step();
        break;
    }
  }
  return NULL;
}

/* ---- malloc_trim against the frozen midend class ---- */

static atomic_int trim_done;

static void *trimmer(void *arg) {
  (void)arg;
  jw_malloc_trim(0);
  atomic_store(&trim_done, 1);
  return NULL;
}

/* Blocks of the frozen class freed into its cache, then a trim: it must wait
 * for the holder. The bound on the wait before the holder is released only
 * decides when to look; a trim that waits passes whatever the machine's speed. */
static int trim_case(void **held, int n) {
  for (int i = 0; i < n; i++) jw_free(held[i]);
  pthread_t t;
  pthread_create(&t, NULL, trimmer, NULL);
  for (int i = 0; i < 500 && !atomic_load(&trim_done); i++) usleep(1000);
  int returned_while_frozen = atomic_load(&trim_done);
  atomic_store(&release_holder, 1);
  pthread_join(t, NULL);
  printf("frozen midend holder: malloc_trim %s\n",
         returned_while_frozen ? "returned while the class was locked" : "waited for the holder");
  if (returned_while_frozen) {
    fprintf(stderr, "malloc_trim returned without emptying the locked midend class's cache\n");
    return 1;
  }
  return 0;
}

/* ---- workers: every tier, cross-thread frees, patterns ---- */

static _Atomic(uintptr_t) mailbox[WORKERS][PER_ROUND];

static size_t size_of(unsigned i, unsigned round) {
  static const size_t sizes[] = {16, 100, 700, 1500, 2048, MID_SIZE, 9000, 16000,
                                 20 << 10, 64 << 10, 100 << 10, 300 << 10, 1 << 20, 3 << 20, 5 << 20};
  return sizes[(i + round) % (sizeof sizes / sizeof sizes[0])] + (i % 3) * 8;
}

static void fill(unsigned char *p, size_t n, unsigned char v) {
  p[0] = v;
  p[n / 2] = v;
  p[n - 1] = v;
}

static int ok(const unsigned char *p, size_t n, unsigned char v) { return p[0] == v && p[n / 2] == v && p[n - 1] == v; }

static void *worker(void *arg) {
  unsigned w = (unsigned)(uintptr_t)arg;
  for (unsigned round = 0; round < ROUNDS; round++) {
    unsigned char *mine[PER_ROUND];
    for (unsigned i = 0; i < PER_ROUND; i++) {
      size_t n = size_of(i, round);
      mine[i] = jw_malloc(n);
      if (mine[i] == NULL) {
        atomic_fetch_add(&failures, 1);
        fprintf(stderr, "jw_malloc(%zu) failed\n", n);
        return NULL;
      }
      fill(mine[i], n, (unsigned char)(w * 31 + i));
    }
    /* Half go to the next worker's mailbox, freed there. */
    for (unsigned i = 0; i < PER_ROUND; i += 2) {
      uintptr_t old = atomic_exchange(&mailbox[(w + 1) % WORKERS][i], (uintptr_t)mine[i]);
      if (old) jw_free((void *)old);
    }
    for (unsigned i = 1; i < PER_ROUND; i += 2) {
      if (!ok(mine[i], size_of(i, round), (unsigned char)(w * 31 + i))) {
        atomic_fetch_add(&failures, 1);
        fprintf(stderr, "block pattern damaged\n");
      }
      jw_free(mine[i]);
    }
  }
  atomic_fetch_add(&done_workers, 1);
  return NULL;
}

int main(int argc, char **argv) {
  /* Every lock a malloc or free meets (not the disable lock: malloc_disable pauses calls by design). */
  static const char *names[] = {"backend", "midend", "pool", "aging", "token", "huge"};
  target = -1;
  for (int k = 0; argc > 1 && k < (int)(sizeof names / sizeof names[0]); k++)
    if (strcmp(argv[1], names[k]) == 0) target = k;
  if (target < 0) {
    fprintf(stderr, "usage: test_frozen backend|midend|pool|aging|token|huge, or test_frozen midend trim\n");
    return 2;
  }
  kind_name = names[target];
  jw_free(jw_malloc(16)); /* initialise (the reclaimer's tier hook too) */
  jw_test_set_lock_hook(hook);
  signal(SIGALRM, on_alarm);
  alarm(HANG_SECONDS);
  int trim = argc > 2 && strcmp(argv[2], "trim") == 0 && target == JW_LK_MIDEND;
  int shards = argc > 2 && strcmp(argv[2], "shards") == 0 && target == JW_LK_MIDEND;
  enum { NHELD = 64 };
  void *held[NHELD];
  for (int i = 0; trim && i < NHELD; i++) held[i] = jw_malloc(MID_SIZE);
  pthread_t trig, ws[WORKERS];
  pthread_create(&trig, NULL, trigger, NULL);
  while (!atomic_load(&frozen)) usleep(1000);
  if (trim) {
    int r = trim_case(held, NHELD);
    pthread_join(trig, NULL);
    alarm(0);
    return r;
  }
  jw_mid_totals before, after;
  jw_mid_totals_get(&before);
  for (unsigned w = 0; w < WORKERS; w++) pthread_create(&ws[w], NULL, worker, (void *)(uintptr_t)w);
  for (unsigned w = 0; w < WORKERS; w++) pthread_join(ws[w], NULL);
  jw_mid_totals_get(&after);
  /* Every worker finished while the holder stayed frozen. */
  alarm(0);
  int still_frozen = atomic_load(&release_holder) == 0;
  atomic_store(&release_holder, 1);
  pthread_join(trig, NULL);
  for (unsigned w = 0; w < WORKERS; w++)
    for (unsigned i = 0; i < PER_ROUND; i++) jw_free((void *)atomic_load(&mailbox[w][i]));
  jw_backend_stats bs;
  jw_backend_get_stats_quiet(&bs);
  printf("frozen %s holder: %d workers x %d rounds x %d blocks of every tier done; backend: %llu bitmap "
         "allocations, %llu lock-free subdivisions, %llu deferred ranges reused, %llu roots mapped without the lock, "
         "%llu deferred frees\n",
         kind_name, WORKERS, ROUNDS, PER_ROUND, (unsigned long long)bs.fast_allocs,
         (unsigned long long)bs.lf_splits, (unsigned long long)bs.lf_recycled, (unsigned long long)bs.lf_roots,
         (unsigned long long)bs.deferred_frees);
  char err[256];
  if (jw_backend_check_all(err, sizeof err) != 0) {
    fprintf(stderr, "backend check after the test: %s\n", err);
    return 1;
  }
  if (!still_frozen || atomic_load(&failures)) return 1;
  if (shards) {
    /* a fallback is counted once as a fallback, never as a malloc */
    uint64_t fb = after.fallbacks - before.fallbacks, tries = after.mallocs - before.mallocs + fb;
    printf("frozen midend holder, shards: %llu of %llu midend mallocs took the page-range fallback\n",
           (unsigned long long)fb, (unsigned long long)tries);
    if (fb * 20 > tries) {
      fprintf(stderr, "with one shard's lock frozen, %llu of %llu midend mallocs fell back to a page range\n",
              (unsigned long long)fb, (unsigned long long)tries);
      return 1;
    }
  }
  return 0;
}
