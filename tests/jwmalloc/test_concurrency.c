/* Concurrency stress through the jw_ API (built plain, with ASan and with
 * TSan): producer/consumer with at least 80% of frees by another thread,
 * thousands of short-lived threads whose blocks outlive them (abandoned
 * slabs must give their pages back), 10 threads per core exchanging blocks,
 * and fork from a multi-threaded parent with allocation on both sides.
 *
 * Usage: test_concurrency CASE [SCALE]   (CASE: prodcons, short, oversub,
 * fork; SCALE in percent of the full size, for the sanitizer builds). Every
 * block carries a header and a pattern that are verified before it is freed.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backend/backend.h"
#include "checked_blocks.h"
#include "jwmalloc.h"
#include "thread_test.h"

/* ---- blocks that check themselves (checked_blocks.h) ---- */

/* Mostly small sizes, some midend, a few ranges and direct mappings. */
static size_t pick_size(uint64_t *s) {
  uint64_t r = rnd(s) % 1000;
  if (r < 700) return 16 + rnd(s) % 500;
  if (r < 900) return 16 + rnd(s) % 2000;
  if (r < 985) return 2017 + rnd(s) % 14000;
  if (r < 999) return 16385 + rnd(s) % 200000;
  return (4 << 20) + rnd(s) % (1 << 20);
}

static void stats(jw_stats *s) { jw_stats_get(s, sizeof *s); }

/* ---- producer/consumer ---- */

#define QCAP 1024
static void *queue[QCAP];
static size_t qhead, qtail;
static int producers_left;
static pthread_mutex_t qmu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t qcv = PTHREAD_COND_INITIALIZER;

static void *producer(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
  long n = scaled(60000);
  for (long i = 0; i < n; i++) {
    void *p = make(pick_size(&s), s);
    if (p == NULL) continue;
    if (i % 10 == 0) { /* a few local frees, as real producers do */
      check_and_free(p);
      continue;
    }
    pthread_mutex_lock(&qmu);
    while (qtail - qhead == QCAP) pthread_cond_wait(&qcv, &qmu);
    queue[qtail++ % QCAP] = p;
    pthread_cond_broadcast(&qcv);
    pthread_mutex_unlock(&qmu);
  }
  pthread_mutex_lock(&qmu);
  producers_left--;
  pthread_cond_broadcast(&qcv);
  pthread_mutex_unlock(&qmu);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&qmu);
    while (qtail == qhead && producers_left > 0) pthread_cond_wait(&qcv, &qmu);
    if (qtail == qhead) {
      pthread_mutex_unlock(&qmu);
      return NULL;
    }
    void *p = queue[qhead++ % QCAP];
    pthread_cond_broadcast(&qcv);
    pthread_mutex_unlock(&qmu);
    check_and_free(p);
  }
}

static int case_prodcons(void) {
  enum { P = 4, C = 4 };
  jw_stats a, b;
  stats(&a);
  pthread_t tp[P], tcs[C];
  producers_left = P;
  for (int i = 0; i < P; i++) pthread_create(&tp[i], NULL, producer, (void *)(uintptr_t)i);
  for (int i = 0; i < C; i++) pthread_create(&tcs[i], NULL, consumer, NULL);
  for (int i = 0; i < P; i++) pthread_join(tp[i], NULL);
  for (int i = 0; i < C; i++) pthread_join(tcs[i], NULL);
  stats(&b);
  uint64_t frees = b.small_frees - a.small_frees, cross = b.cross_thread_frees - a.cross_thread_frees;
  printf("prodcons: %llu small frees, %llu cross-thread (%llu%%), %llu abandoned slabs\n",
         (unsigned long long)frees, (unsigned long long)cross, (unsigned long long)(frees ? cross * 100 / frees : 0),
         (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs));
  if (cross * 100 < frees * 80) FAIL("fewer than 80%% of frees were cross-thread");
  return 0;
}

/* ---- thousands of short-lived threads ---- */

#define HANDOFF 4096
static void *_Atomic handoff[HANDOFF];

static void *short_thread(void *arg) {
  uint64_t s = 0x2545f4914f6cdd1dULL * ((uintptr_t)arg + 7);
  void *mine[300];
  for (int i = 0; i < 300; i++) {
    size_t n = pick_size(&s);
    if (n > 65536) n = 100 + n % 3000;
    mine[i] = make(n, s);
  }
  for (int i = 0; i < 300; i++) {
    if (mine[i] == NULL) continue;
    if (i % 3 == 0) {
      check_and_free(mine[i]); /* freed by its owner */
    } else {
      /* handed off: freed later by another thread or main, after we exit */
      void *old = atomic_exchange(&handoff[rnd(&s) % HANDOFF], mine[i]);
      if (old) check_and_free(old);
    }
  }
  return NULL;
}

static int case_short(void) {
  int threads = (int)scaled(2000), wave = 16;
  jw_stats a, b;
  void *warm = jw_malloc(100);
  jw_free(warm);
  jw_malloc_trim(0);
  stats(&a);
  for (int base = 0; base < threads; base += wave) {
    pthread_t t[16];
    int n = threads - base < wave ? threads - base : wave;
    for (int i = 0; i < n; i++)
      if (pthread_create(&t[i], NULL, short_thread, (void *)(uintptr_t)(base + i)) != 0) FAIL("pthread_create");
    for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  }
  for (int i = 0; i < HANDOFF; i++) {
    void *p = atomic_exchange(&handoff[i], NULL);
    if (p) check_and_free(p);
  }
  jw_malloc_trim(0);
  stats(&b);
  long live_growth = (long)b.page_source_live_bytes - (long)a.page_source_live_bytes;
  printf("short: %d threads, %llu exited, %llu abandoned slabs, page-source live bytes %+ld after all frees\n",
         threads, (unsigned long long)(b.threads_exited - a.threads_exited),
         (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs), live_growth);
  if ((long)(b.threads_exited - a.threads_exited) < threads) FAIL("thread caches not released at exit");
  if (b.abandoned_slabs == a.abandoned_slabs) FAIL("no slab was abandoned: the case did not test it");
  /* Every block is free: abandoned slabs must have returned their pages
   * (what remains is the midend's one spare slab per class at most). */
  if (live_growth > 13 * 72 * 1024) FAIL("pages of exited threads not given back (%ld bytes)", live_growth);
  return 0;
}

/* ---- 10 threads per core exchanging blocks ---- */

#define SLOTS 1024
static void *_Atomic slots[SLOTS];

static void *oversub_thread(void *arg) {
  uint64_t s = 0xda942042e4dd58b5ULL * ((uintptr_t)arg + 3);
  long ops = scaled(20000);
  for (long i = 0; i < ops; i++) {
    size_t n = pick_size(&s);
    if (n > 65536 && (rnd(&s) & 7)) n = 64; /* keep big ones rare */
    void *p = make(n, s);
    void *old = atomic_exchange(&slots[rnd(&s) % SLOTS], p);
    if (old) check_and_free(old);
  }
  return NULL;
}

static int case_oversub(void) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int threads = (int)(10 * (cores > 0 ? cores : 1));
  if (threads > 160) threads = 160;
  pthread_t t[160];
  jw_stats a, b;
  stats(&a);
  for (int i = 0; i < threads; i++) pthread_create(&t[i], NULL, oversub_thread, (void *)(uintptr_t)i);
  for (int i = 0; i < threads; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < SLOTS; i++) {
    void *p = atomic_exchange(&slots[i], NULL);
    if (p) check_and_free(p);
  }
  stats(&b);
  printf("oversub: %d threads on %ld cores, %llu cross-thread frees, %llu midend fallbacks\n", threads, cores,
         (unsigned long long)(b.cross_thread_frees - a.cross_thread_frees),
         (unsigned long long)(b.mid_fallbacks - a.mid_fallbacks));
  return 0;
}

/* ---- fork from a multi-threaded parent ---- */

static atomic_int stop;
#define SHARED 512
static void *_Atomic shared_blocks[SHARED];

static void *busy_thread(void *arg) {
  uint64_t s = 0x8a5cd789635d2dffULL * ((uintptr_t)arg + 11);
  while (!atomic_load(&stop)) {
    void *p = make(pick_size(&s) % 20000 + 16, s);
    void *old = atomic_exchange(&shared_blocks[rnd(&s) % SHARED], p);
    if (old) check_and_free(old);
  }
  return NULL;
}

#ifndef JW_NO_THREADS_AFTER_FORK
static void *child_thread(void *arg) {
  uint64_t s = (uintptr_t)arg;
  for (int i = 0; i < 2000; i++) check_and_free(make(pick_size(&s) % 5000 + 16, s));
  return NULL;
}
#endif

static int child_work(int round) {
  uint64_t s = 0x1234567ULL + (uint64_t)round;
  /* Free blocks the parent's other threads allocated, allocate new ones. */
  for (int i = 0; i < SHARED; i += 2) {
    void *p = atomic_exchange(&shared_blocks[i], NULL);
    if (p) check_and_free(p);
  }
  void *keep[1000];
  for (int i = 0; i < 1000; i++) keep[i] = make(pick_size(&s), s);
  for (int i = 0; i < 1000; i++)
    if (keep[i]) check_and_free(keep[i]);
#ifndef JW_NO_THREADS_AFTER_FORK
  pthread_t t;
  if (pthread_create(&t, NULL, child_thread, (void *)(uintptr_t)round) != 0) return 2;
  pthread_join(t, NULL);
#endif
  return test_failures() ? 1 : 0;
}

static int case_fork(void) {
  enum { W = 4 };
  pthread_t t[W];
  for (int i = 0; i < W; i++) pthread_create(&t[i], NULL, busy_thread, (void *)(uintptr_t)i);
  int rounds = (int)scaled(30), bad = 0;
  uint64_t s = 99;
  for (int r = 0; r < rounds; r++) {
    void *mine = make(pick_size(&s), s); /* the parent allocates around each fork */
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
      FAIL("fork: %s", strerror(errno));
      break;
    }
    if (pid == 0) _exit(child_work(r));
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
      FAIL("child %d: status %#x", r, st);
      bad++;
    }
    if (mine) check_and_free(mine);
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < W; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < SHARED; i++) {
    void *p = atomic_exchange(&shared_blocks[i], NULL);
    if (p) check_and_free(p);
  }
  printf("fork: %d forks from a parent with %d allocating threads, %d children failed\n", rounds, W, bad);
  return 0;
}

/* ---- backend: ranges freed 90% by other threads, short-lived threads
 * joining and leaving, and a thread that keeps taking the backend lock, so
 * that frees go to the bitmaps and the deferred list and allocations take
 * the lock-free paths (docs/design/backend.md, section 7a); the lock holder
 * drains the deferred list each time it lets go. ---- */

#define RSLOTS 1024
static void *_Atomic rslots[RSLOTS];
static atomic_int backend_stop;

static size_t range_size(uint64_t *s) {
  uint64_t r = rnd(s) % 100;
  if (r < 60) return 16385 + rnd(s) % (240 << 10);  /* classes with a bitmap */
  if (r < 80) return (256 << 10) + rnd(s) % (1 << 20); /* without */
  return 16 + rnd(s) % 16000;                        /* frontend and midend */
}

static void range_round(uint64_t *s, int n) {
  for (int i = 0; i < n; i++) {
    void *p = make(range_size(s), *s);
    if (p == NULL) continue;
    if (rnd(s) % 10 == 0) {
      check_and_free(p); /* 10% freed by their owner */
      continue;
    }
    void *old = atomic_exchange(&rslots[rnd(s) % RSLOTS], p);
    if (old) check_and_free(old); /* most likely another thread's */
  }
}

static void *range_thread(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 3);
  range_round(&s, (int)scaled(6000));
  return NULL;
}

static void *range_short(void *arg) {
  uint64_t s = 0xda942042e4dd58b5ULL * ((uintptr_t)arg + 5);
  range_round(&s, 40);
  return NULL;
}

static void *lock_taker(void *arg) {
  (void)arg;
  while (!atomic_load(&backend_stop)) {
    jw_backend_test_lock();
    usleep(300);
    jw_backend_test_unlock(); /* drains the deferred list */
    usleep(100);
  }
  return NULL;
}

static int case_backend(void) {
  jw_backend_stats b0, b1;
  jw_backend_get_stats(&b0);
  pthread_t t[4], holder;
  pthread_create(&holder, NULL, lock_taker, NULL);
  for (uintptr_t i = 0; i < 4; i++) pthread_create(&t[i], NULL, range_thread, (void *)i);
  /* Threads created and exiting during it. */
  for (long k = 0; k < scaled(200); k++) {
    pthread_t sh;
    if (pthread_create(&sh, NULL, range_short, (void *)(uintptr_t)k) == 0) pthread_join(sh, NULL);
  }
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  atomic_store(&backend_stop, 1);
  pthread_join(holder, NULL);
  for (int i = 0; i < RSLOTS; i++) {
    void *p = atomic_exchange(&rslots[i], NULL);
    if (p) check_and_free(p);
  }
  jw_backend_get_stats(&b1);
  printf("backend: %llu bitmap frees, %llu bitmap allocations, %llu deferred frees, %llu lock-free "
         "subdivisions, %llu deferred ranges reused, %llu roots mapped without the lock\n",
         (unsigned long long)(b1.fast_frees - b0.fast_frees), (unsigned long long)(b1.fast_allocs - b0.fast_allocs),
         (unsigned long long)(b1.deferred_frees - b0.deferred_frees),
         (unsigned long long)(b1.lf_splits - b0.lf_splits), (unsigned long long)(b1.lf_recycled - b0.lf_recycled),
         (unsigned long long)(b1.lf_roots - b0.lf_roots));
  if (b1.deferred_frees == b0.deferred_frees || b1.fast_frees == b0.fast_frees || b1.fast_allocs == b0.fast_allocs)
    FAIL("backend: the deferred list or the bitmaps were never used");
  char err[256];
  if (jw_backend_check_all(err, sizeof err) != 0) FAIL("backend check: %s", err);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"prodcons", case_prodcons}, {"short", case_short},     {"oversub", case_oversub},
      {"fork", case_fork},         {"backend", case_backend},
  };
  return TEST_MAIN(cases);
}
