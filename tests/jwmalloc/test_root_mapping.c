/* Roots mapped outside the backend lock (docs/design/backend.md 7a, "Roots
 * are mapped outside the lock") and the grace before the lock-free
 * subdivision while placement is on (7b).
 *
 * The test defines mmap itself (the static library's calls bind to it): a
 * 4 MiB anonymous mapping (a root's first try) can be parked until the test
 * lets it go, or failed with ENOMEM. So "a root is between its mapping and
 * its split" is a fixed point of every case below, not a timing accident.
 *
 * Usage: test_root_mapping CASE [SCALE]
 *   between   a locked allocation that found nothing free is parked in its
 *             root's mmap (the lock given back); the test takes the backend
 *             lock, then lets the mmap go: the allocation returns without
 *             the lock (the lock-free carve), the block is whole and
 *             writable, the root is counted once, not as a step-5 root, and
 *             once the lock is given back the trees are whole, no root is
 *             left BUSY, and after the free live bytes are back at 0
 *   checkrace jw_backend_check_all from another thread while a root is
 *             parked between mapping and split: the check waits for it (it
 *             must not return while the root is BUSY), then passes
 *   fork      fork() from another thread while a root is parked: prepare
 *             waits for it; the child's trees are whole, it allocates and
 *             frees, its live bytes come back; the parent's block is whole
 *   enomem    every root map fails: 100 B, 20 KiB and 3 MiB blocks are NULL
 *             with errno ENOMEM, nothing is left half-built (no root, no
 *             live bytes, whole trees); then 16 threads race for 5 roots:
 *             every failure is NULL with ENOMEM, roots counted = roots
 *             mapped, everything freed gives live bytes back
 *   rlimit    a child with RLIMIT_AS just above its use: 12 threads
 *             allocate 16 KiB-4 MiB blocks until refused; every refusal is
 *             ENOMEM, blocks intact, trees whole, live bytes back
 *   storm     SCALE% of 24 threads start together in an empty process and
 *             allocate 16 KiB-4 MiB blocks and slabs (every first one needs a
 *             root) while one thread runs jw_backend_check_all and another
 *             jw_malloc_trim in a loop (JWMALLOC_CHECK=1 from CTest): blocks
 *             intact, trees whole, no hang, live bytes back, roots counted
 *             by the map = roots in the statistics
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "pages/page_source.h"
#include "common/lock.h"
#include "jwmalloc.h"
#include "thread_test.h"

#include "raw_mmap.h"

#define HANG 60.0 /* seconds: a bound for a hang, never a timing check */
#define BIG ((size_t)3 << 20) /* one per 4 MiB root */

/* ---- the interposed mmap ---- */

enum { MM_PASS, MM_PARK_ONE, MM_FAIL, MM_BUDGET };
static atomic_int mm_mode, mm_parked, mm_go;
static atomic_long mm_budget, mm_failed;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (len == JW_ROOT && (flags & MAP_ANONYMOUS)) {
    int m = atomic_load(&mm_mode), park = MM_PARK_ONE;
    if (m == MM_PARK_ONE && atomic_compare_exchange_strong(&mm_mode, &park, MM_PASS)) {
      atomic_store(&mm_parked, 1);
      while (!atomic_load(&mm_go)) usleep(500);
    } else if (m == MM_FAIL || (m == MM_BUDGET && atomic_fetch_sub(&mm_budget, 1) <= 0)) {
      atomic_fetch_add(&mm_failed, 1);
      errno = ENOMEM;
      return MAP_FAILED;
    }
  }
  return jw_raw_mmap(addr, len, prot, flags, fd, off);
}

static void wait_parked(void) {
  double t0 = test_now_s();
  while (!atomic_load(&mm_parked) && test_now_s() - t0 < HANG) usleep(500);
  CHECK(atomic_load(&mm_parked), "no root map was parked");
}

/* ---- shared checks ---- */

static void check_backend(const char *when) {
  char err[256];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "backend check %s: %s", when, err);
}

static long settled_live(void) {
  double t0 = test_now_s();
  long l;
  while ((l = (long)st().page_source_live_bytes) != 0 && test_now_s() - t0 < HANG) {
    jw_malloc_trim(0);
    usleep(2000);
  }
  return l;
}

static void fill(unsigned char *p, size_t n, uint64_t s) {
  for (size_t i = 0; i + 8 < n; i += 4096) memcpy(p + i, &s, 8); /* clear of the last byte */
  p[n - 1] = (unsigned char)(s * 31 + 7);
}

static int intact(const unsigned char *p, size_t n, uint64_t s) {
  for (size_t i = 0; i + 8 < n; i += 4096)
    if (memcmp(p + i, &s, 8) != 0) return 0;
  return p[n - 1] == (unsigned char)(s * 31 + 7);
}

/* ---- between / checkrace / fork: a root parked between mapping and split ---- */

static void *parked_block;
static void *alloc_big(void *arg) {
  (void)arg;
  parked_block = jw_malloc(BIG);
  return NULL;
}

static atomic_int check_done, check_rc;
static void *checker_once(void *arg) {
  (void)arg;
  char err[256];
  int rc = jw_backend_check_all(err, sizeof err);
  if (rc != 0) FAIL("check_all while a root was parked: %s", err);
  atomic_store(&check_rc, rc);
  atomic_store(&check_done, 1);
  return NULL;
}

static atomic_int fork_status = -1;
static void *forker(void *arg) {
  (void)arg;
  pid_t pid = fork();
  if (pid == 0) {
    char err[256];
    int bad = jw_backend_check_all(err, sizeof err) != 0;
    if (bad) fprintf(stderr, "child: backend check: %s\n", err);
    long live0 = (long)st().page_source_live_bytes;
    void *q[8];
    for (int i = 0; i < 8; i++) {
      q[i] = jw_malloc(i & 1 ? BIG : (size_t)20 << 10);
      if (q[i] == NULL) bad = 1;
      else memset(q[i], i, i & 1 ? BIG : (size_t)20 << 10);
    }
    for (int i = 0; i < 8; i++) jw_free(q[i]);
    if (jw_backend_check_all(err, sizeof err) != 0) bad = 1, fprintf(stderr, "child: backend check: %s\n", err);
    double t0 = test_now_s();
    while ((long)st().page_source_live_bytes != live0 && test_now_s() - t0 < HANG) jw_malloc_trim(0), usleep(2000);
    if ((long)st().page_source_live_bytes != live0) bad = 1, fprintf(stderr, "child: live bytes not back\n");
    _exit(bad);
  }
  int stt = 0;
  if (pid > 0 && waitpid(pid, &stt, 0) == pid) atomic_store(&fork_status, stt);
  return NULL;
}

static int case_parked(const char *what) {
  jw_stats a = st();
  atomic_store(&mm_mode, MM_PARK_ONE);
  pthread_t t, o;
  CHECK(pthread_create(&t, NULL, alloc_big, NULL) == 0, "pthread_create");
  wait_parked();
  if (strcmp(what, "between") == 0) {
    /* The lock is taken between the allocation's unlock and its re-lock. */
    jw_backend_test_lock();
    atomic_store(&mm_go, 1);
    pthread_join(t, NULL); /* must not need the lock: it is held here */
    jw_stats b = st();
    CHECK(parked_block != NULL, "3 MiB block with the lock taken while its root was mapped: %s", strerror(errno));
    CHECK(b.backend_roots_mapped == a.backend_roots_mapped + 1, "roots mapped %llu -> %llu",
          (unsigned long long)a.backend_roots_mapped, (unsigned long long)b.backend_roots_mapped);
    CHECK(b.backend_lf_roots == a.backend_lf_roots, "the locked path's root counted as a step-5 root");
    jw_backend_test_unlock();
  } else if (strcmp(what, "checkrace") == 0) {
    CHECK(pthread_create(&o, NULL, checker_once, NULL) == 0, "pthread_create");
    usleep(50000); /* room for the check to run ahead if it could */
    CHECK(!atomic_load(&check_done), "check_all returned while a root was BUSY between mapping and split");
    atomic_store(&mm_go, 1);
    pthread_join(t, NULL);
    pthread_join(o, NULL);
    CHECK(atomic_load(&check_rc) == 0, "check_all failed");
    CHECK(parked_block != NULL, "3 MiB block: %s", strerror(errno));
  } else { /* fork */
    CHECK(pthread_create(&o, NULL, forker, NULL) == 0, "pthread_create");
    usleep(50000); /* the fork's prepare reaches its wait */
    atomic_store(&mm_go, 1);
    pthread_join(t, NULL);
    pthread_join(o, NULL);
    int s = atomic_load(&fork_status);
    CHECK(s != -1 && WIFEXITED(s) && WEXITSTATUS(s) == 0, "child failed (status %d)", s);
    CHECK(parked_block != NULL, "3 MiB block: %s", strerror(errno));
  }
  if (parked_block) {
    fill(parked_block, BIG, 77);
    CHECK(intact(parked_block, BIG, 77), "block not writable");
  }
  check_backend("after the parked root");
  jw_free(parked_block);
  CHECK(settled_live() == 0, "live bytes not back to 0");
  check_backend("at the end");
  printf("%s: ok (roots mapped %llu, without the lock %llu)\n", what, (unsigned long long)st().backend_roots_mapped,
         (unsigned long long)st().backend_lf_roots);
  return test_failures() ? 1 : 0;
}

/* ---- enomem ---- */

#define NRACE 16
static pthread_barrier_t bar;
static void *race_blocks[NRACE];
static atomic_int race_bad_errno;
static void *racer(void *arg) {
  long i = (long)arg;
  pthread_barrier_wait(&bar);
  errno = 0;
  race_blocks[i] = jw_malloc(BIG);
  if (race_blocks[i] == NULL && errno != ENOMEM) atomic_fetch_add(&race_bad_errno, 1);
  if (race_blocks[i]) memset(race_blocks[i], (int)i, BIG);
  return NULL;
}

static int case_enomem(void) {
  atomic_store(&mm_mode, MM_FAIL);
  size_t sizes[] = {100, (size_t)20 << 10, BIG};
  for (unsigned i = 0; i < 3; i++) {
    errno = 0;
    void *p = jw_malloc(sizes[i]);
    CHECK(p == NULL && errno == ENOMEM, "jw_malloc(%zu) with no root mappable: %p, errno %d", sizes[i], p, errno);
  }
  jw_stats s = st();
  CHECK(s.backend_root_bytes == 0 && s.page_source_live_bytes == 0, "half-built: %llu root bytes, %llu live",
        (unsigned long long)s.backend_root_bytes, (unsigned long long)s.page_source_live_bytes);
  check_backend("after failed root maps");
  atomic_store(&mm_mode, MM_PASS);
  void *p = jw_malloc(BIG);
  CHECK(p != NULL, "3 MiB once roots map again");
  jw_free(p);
  CHECK(settled_live() == 0, "live bytes not back");

  /* 16 threads race for 5 more roots (the free root above may serve one). */
  atomic_store(&mm_budget, 5);
  atomic_store(&mm_mode, MM_BUDGET);
  jw_stats a = st();
  pthread_barrier_init(&bar, NULL, NRACE);
  pthread_t t[NRACE];
  for (long i = 0; i < NRACE; i++) CHECK(pthread_create(&t[i], NULL, racer, (void *)i) == 0, "pthread_create");
  for (int i = 0; i < NRACE; i++) pthread_join(t[i], NULL);
  atomic_store(&mm_mode, MM_PASS);
  int got = 0;
  for (int i = 0; i < NRACE; i++) got += race_blocks[i] != NULL;
  jw_stats b = st();
  CHECK(atomic_load(&race_bad_errno) == 0, "%d failures without ENOMEM", atomic_load(&race_bad_errno));
  CHECK(got >= 5 && got <= 6, "%d of %d threads got a block with 5 roots mappable (and one free)", got, NRACE);
  CHECK(b.backend_roots_mapped - a.backend_roots_mapped <= 5, "%llu roots mapped with 5 allowed",
        (unsigned long long)(b.backend_roots_mapped - a.backend_roots_mapped));
  CHECK(b.backend_root_bytes <= (uint64_t)6 * JW_ROOT, "%llu root bytes for at most 6 roots",
        (unsigned long long)b.backend_root_bytes);
  check_backend("after the race at the limit");
  for (int i = 0; i < NRACE; i++) {
    if (race_blocks[i]) {
      unsigned char *q = race_blocks[i];
      CHECK(q[0] == (unsigned char)i && q[BIG - 1] == (unsigned char)i, "block %d overwritten", i);
    }
    jw_free(race_blocks[i]);
  }
  CHECK(settled_live() == 0, "live bytes not back");
  check_backend("at the end");
  printf("enomem: ok (%d of %d got a block, %ld root maps refused)\n", got, NRACE, atomic_load(&mm_failed));
  return test_failures() ? 1 : 0;
}

/* ---- rlimit (in a child) ---- */

#define NRL 12
static atomic_long rl_blocks, rl_refused;
typedef struct rl_arg {
  long id;
  void *p[256];
  size_t n[256];
  int k;
} rl_arg;
static void *rl_thread(void *arg) {
  rl_arg *a = arg;
  uint64_t r = 0x9e3779b97f4a7c15ull * (uint64_t)(a->id + 1);
  pthread_barrier_wait(&bar);
  int fails = 0;
  while (a->k < 256 && fails < 8) {
    size_t n = (size_t)(16 << 10) + rnd(&r) % ((size_t)4 << 20) - (size_t)(16 << 10) + 1;
    if (rnd(&r) % 3 == 0) n = 64 + rnd(&r) % 4000; /* slabs too */
    errno = 0;
    void *p = jw_malloc(n);
    if (p == NULL) {
      if (errno != ENOMEM) FAIL("jw_malloc(%zu) at the limit: NULL with errno %d", n, errno);
      atomic_fetch_add(&rl_refused, 1);
      fails++;
      continue;
    }
    fill(p, n, (uint64_t)a->id << 32 | (uint64_t)a->k);
    a->p[a->k] = p, a->n[a->k] = n, a->k++;
    atomic_fetch_add(&rl_blocks, 1);
  }
  return NULL;
}

static long vm_size(void) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long kb = -1;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %ld kB", &kb) == 1) break;
  if (f) fclose(f);
  return kb * 1024;
}

static int case_rlimit(void) {
  pid_t pid = fork();
  if (pid == 0) {
    static rl_arg args[NRL];
    pthread_t t[NRL];
    pthread_barrier_init(&bar, NULL, NRL + 1);
    for (long i = 0; i < NRL; i++) {
      args[i].id = i;
      if (pthread_create(&t[i], NULL, rl_thread, &args[i]) != 0) _exit(2);
    }
    long vs = vm_size();
    struct rlimit rl = {(rlim_t)vs + (96 << 20), (rlim_t)vs + (96 << 20)};
    if (vs < 0 || setrlimit(RLIMIT_AS, &rl) != 0) _exit(77);
    pthread_barrier_wait(&bar);
    for (int i = 0; i < NRL; i++) pthread_join(t[i], NULL);
    CHECK(atomic_load(&rl_refused) > 0, "no allocation refused under RLIMIT_AS");
    check_backend("at the address-space limit");
    for (int i = 0; i < NRL; i++)
      for (int k = 0; k < args[i].k; k++) {
        CHECK(intact(args[i].p[k], args[i].n[k], (uint64_t)i << 32 | (uint64_t)k), "block changed at the limit");
        jw_free(args[i].p[k]);
      }
    rl.rlim_cur = rl.rlim_max = RLIM_INFINITY;
    CHECK(settled_live() == 0, "live bytes not back after the limit");
    check_backend("after freeing at the limit");
    printf("rlimit: %ld blocks, %ld refused with ENOMEM\n", atomic_load(&rl_blocks), atomic_load(&rl_refused));
    fflush(stdout);
    _exit(test_failures() ? 1 : 0);
  }
  int s = 0;
  CHECK(pid > 0 && waitpid(pid, &s, 0) == pid, "fork/waitpid");
  if (WIFEXITED(s) && WEXITSTATUS(s) == 77) {
    printf("rlimit: SKIP (setrlimit unavailable)\n");
    return 77;
  }
  CHECK(WIFEXITED(s) && WEXITSTATUS(s) == 0, "child at RLIMIT_AS failed (status %d)", s);
  return test_failures() ? 1 : 0;
}

/* ---- storm ---- */

static atomic_int storm_done;
static void *storm_checker(void *arg) {
  (void)arg;
  long n = 0;
  while (!atomic_load(&storm_done)) {
    char err[256];
    if (jw_backend_check_all(err, sizeof err) != 0) FAIL("check_all during the storm: %s", err);
    n++;
    usleep(500); /* not a lock held for good: allocations also take it */
  }
  return (void *)n;
}
static void *storm_trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&storm_done)) jw_malloc_trim(0), usleep(200);
  return NULL;
}
static void *storm_thread(void *arg) {
  long id = (long)arg;
  uint64_t r = 0x2545f4914f6cdd1dull * (uint64_t)(id + 7);
  enum { N = 16 };
  unsigned char *p[N];
  size_t n[N];
  pthread_barrier_wait(&bar);
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      unsigned k = (unsigned)(rnd(&r) % 10);
      n[i] = k < 5 ? 16 + rnd(&r) % 4000 : k < 7 ? 2049 + rnd(&r) % 14000
                                                  : (size_t)(16 << 10) + rnd(&r) % (((size_t)4 << 20) - (16 << 10));
      p[i] = jw_malloc(n[i]);
      CHECK(p[i] != NULL, "jw_malloc(%zu): %s", n[i], strerror(errno));
      if (p[i]) fill(p[i], n[i], (uint64_t)id << 40 | (uint64_t)round << 20 | (uint64_t)i);
    }
    for (int i = 0; i < N; i++) {
      if (!p[i]) continue;
      CHECK(intact(p[i], n[i], (uint64_t)id << 40 | (uint64_t)round << 20 | (uint64_t)i),
            "block %p (%zu bytes) changed while live: handed out twice?", (void *)p[i], n[i]);
      jw_free(p[i]);
    }
  }
  return NULL;
}

static int case_storm(void) {
  int nt = (int)scaled(24);
  if (nt < 2) nt = 2;
  pthread_barrier_init(&bar, NULL, (unsigned)nt);
  pthread_t t[64], ck, tr;
  CHECK(pthread_create(&ck, NULL, storm_checker, NULL) == 0, "pthread_create");
  CHECK(pthread_create(&tr, NULL, storm_trimmer, NULL) == 0, "pthread_create");
  for (long i = 0; i < nt; i++) CHECK(pthread_create(&t[i], NULL, storm_thread, (void *)i) == 0, "pthread_create");
  for (int i = 0; i < nt; i++) pthread_join(t[i], NULL);
  atomic_store(&storm_done, 1);
  void *checks;
  pthread_join(ck, &checks);
  pthread_join(tr, NULL);
  CHECK(settled_live() == 0, "live bytes not back after the storm");
  check_backend("after the storm");
  jw_stats s = st();
  printf("storm: %d threads, %ld whole-tree checks, %llu roots mapped (%llu without the lock, %llu lock-free "
         "splits)\n",
         nt, (long)checks, (unsigned long long)s.backend_roots_mapped, (unsigned long long)s.backend_lf_roots,
         (unsigned long long)s.backend_lf_splits);
  return test_failures() ? 1 : 0;
}

static int case_between(void) { return case_parked("between"); }
static int case_checkrace(void) { return case_parked("checkrace"); }
static int case_fork(void) { return case_parked("fork"); }

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"between", case_between}, {"checkrace", case_checkrace}, {"fork", case_fork},
      {"enomem", case_enomem},   {"rlimit", case_rlimit},       {"storm", case_storm},
  };
  alarm(240); /* a hang bound */
  return TEST_MAIN(cases);
}
