/* Android's extensions (docs/design/api.md, "Android's extensions"):
 * malloc_disable pauses every allocation call, malloc_iterate finds exactly
 * the live blocks while other threads are paused, mallopt's M_PURGE and
 * M_PURGE_ALL bring RSS down at once, M_DECAY_TIME 0 releases at free,
 * mallinfo follows the heap; each across fork and many threads.
 *
 * Built twice: with JW_DROPIN the standard names linked to libjwmalloc.so
 * (glibc's own allocations, thread start-up's among them, are jwmalloc's),
 * otherwise the jw_ API of the ThreadSanitizer variant (the cases without
 * fork). Usage: test_android CASE. Every wait on another thread is bounded
 * by an alarm (a hang) and never asserts a duration. */
#include <errno.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jwmalloc.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#ifdef JW_DROPIN
#define M(x) x
#define DISABLE malloc_disable
#define ENABLE malloc_enable
#define ITERATE malloc_iterate
#define MALLOPT mallopt
#else
#define M(x) jw_##x
#define DISABLE jw_malloc_disable
#define ENABLE jw_malloc_enable
#define ITERATE jw_malloc_iterate
#define MALLOPT jw_mallopt
#endif

#include "check.h"

#define HANG_SECONDS 120

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] = "test_android: hang (no progress within the bound)\n";
  if (write(2, msg, sizeof msg - 1) < 0) _exit(3);
  _exit(3);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* ---- the live blocks the program knows ---- */

typedef struct blk {
  uintptr_t p;
  size_t usable;
} blk;

#define MAX_LIVE 8192
static pthread_mutex_t rec_mu = PTHREAD_MUTEX_INITIALIZER;
static blk rec[MAX_LIVE]; /* rec_mu: every worker's live blocks */
static size_t nrec;

static void rec_add(void *p, size_t usable) {
  pthread_mutex_lock(&rec_mu);
  if (nrec < MAX_LIVE) rec[nrec++] = (blk){(uintptr_t)p, usable};
  pthread_mutex_unlock(&rec_mu);
}

/* Takes a random recorded block out (NULL when none). */
static void *rec_take(uint64_t r, size_t *usable) {
  pthread_mutex_lock(&rec_mu);
  void *p = NULL;
  if (nrec > 0) {
    size_t i = r % nrec;
    p = (void *)rec[i].p;
    if (usable) *usable = rec[i].usable;
    rec[i] = rec[--nrec];
  }
  pthread_mutex_unlock(&rec_mu);
  return p;
}

/* What malloc_iterate reported (the callback must not allocate). */
#define MAX_SEEN (MAX_LIVE * 4)
static blk seen[MAX_SEEN];
static size_t nseen, seen_overflow;

static void on_block(uintptr_t base, size_t size, void *arg) {
  (void)arg;
  if (nseen < MAX_SEEN) seen[nseen++] = (blk){base, size};
  else seen_overflow++;
}

static int by_addr(const void *a, const void *b) {
  uintptr_t x = ((const blk *)a)->p, y = ((const blk *)b)->p;
  return x < y ? -1 : x > y;
}

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* Sizes of every tier: frontend, midend, ranges (block-cache classes and
 * beyond), a rare direct mapping. */
static size_t pick_size(uint64_t r) {
  unsigned k = (unsigned)(r % 100);
  r /= 100;
  if (k < 55) return 1 + r % 2016;
  if (k < 80) return 2017 + r % (16384 - 2016);
  if (k < 97) return 16385 + r % (1 << 20);
  if (k < 99) return (1 << 20) + r % (3 << 20);
  return (5 << 20) + r % (1 << 20);
}

/* ---- workers: allocate and free across threads, record what is live ---- */

#define WORKERS 4
static atomic_int stop;
static atomic_ulong progress[WORKERS];
/* The block a worker is freeing or reallocating right now: still live
 * while the worker waits at the gate inside that call. */
static _Atomic(uintptr_t) in_flight[WORKERS];
static size_t in_flight_usable[WORKERS];

static void *allocate(uint64_t *s) {
  uint64_t r = rnd(s);
  size_t n = pick_size(r >> 8);
  void *p;
  switch (r % 8) {
    case 0:
      p = M(calloc)(1, n);
      break;
    case 1: /* over-aligned: a range's interior block, or an aligned small class */
      p = M(memalign)((size_t)64 << (r >> 4) % 11, n % 100000);
      break;
    default:
      p = M(malloc)(n);
  }
  if (p == NULL) {
    CHECK(0, "allocation of %zu bytes failed", n);
    return NULL;
  }
  memset(p, 0x5a, n < 64 ? n : 64);
  return p;
}

static size_t rec_count(void) {
  pthread_mutex_lock(&rec_mu);
  size_t n = nrec;
  pthread_mutex_unlock(&rec_mu);
  return n;
}

/* Records block p, just allocated by worker w: live from now on, so it is
 * in flight while malloc_usable_size (which may pause) measures it (its size
 * is then unknown: 0). */
static void keep(unsigned w, void *p) {
  in_flight_usable[w] = 0;
  atomic_store(&in_flight[w], (uintptr_t)p);
  size_t usable = M(malloc_usable_size)(p);
  rec_add(p, usable);
  atomic_store(&in_flight[w], 0);
}

static void *worker(void *arg) {
  unsigned w = (unsigned)(uintptr_t)arg;
  uint64_t s = 0x9e3779b97f4a7c15ULL * (w + 1);
  while (!atomic_load(&stop)) {
    uint64_t r = rnd(&s);
    size_t usable;
    if (r % 16 < 7 || rec_count() < 64) {
      void *p = allocate(&s);
      if (p) keep(w, p);
    } else if (r % 16 < 15) {
      void *p = rec_take(r >> 4, &usable); /* any worker's block: cross-thread frees */
      if (p == NULL) continue;
      in_flight_usable[w] = usable;
      atomic_store(&in_flight[w], (uintptr_t)p);
      M(free)(p);
      atomic_store(&in_flight[w], 0);
    } else {
      void *p = rec_take(r >> 4, &usable);
      if (p == NULL) continue;
      in_flight_usable[w] = usable;
      atomic_store(&in_flight[w], (uintptr_t)p);
      size_t n = pick_size(rnd(&s)) % 100000 + 1;
      void *q = M(realloc)(p, n);
      if (q) {
        keep(w, q);
      } else {
        rec_add(p, usable);
        atomic_store(&in_flight[w], 0);
      }
    }
    atomic_fetch_add(&progress[w], 1);
  }
  return NULL;
}

/* Waits (bounded by the alarm) until `n` threads are paused at the gate. */
static void wait_paused(unsigned n) {
  while (jw_malloc_paused() < n) sched_yield();
}

static blk expect[MAX_LIVE + WORKERS + 256];
static blk base_set[256];
static size_t nbase;

/* One check: disable, wait until every worker is paused at the gate,
 * snapshot the records and iterate, enable; then compare (qsort may
 * allocate: after enable). The reported blocks must be exactly the
 * baseline's (blocks the process had before the workers started), the
 * recorded ones and those being freed, each once, with its usable size. */
static void check_round(int round) {
  DISABLE();
  wait_paused(WORKERS);
  size_t ne = 0;
  pthread_mutex_lock(&rec_mu); /* no worker holds it: all are paused in calls */
  for (size_t i = 0; i < nrec; i++) expect[ne++] = rec[i];
  pthread_mutex_unlock(&rec_mu);
  for (unsigned w = 0; w < WORKERS; w++)
    if (atomic_load(&in_flight[w])) expect[ne++] = (blk){atomic_load(&in_flight[w]), in_flight_usable[w]};
  for (size_t i = 0; i < nbase; i++) expect[ne++] = base_set[i];
  unsigned long before[WORKERS];
  for (unsigned w = 0; w < WORKERS; w++) before[w] = atomic_load(&progress[w]);
  nseen = seen_overflow = 0;
  CHECK(ITERATE(0, SIZE_MAX, on_block, NULL) == 0, "iterate failed");
  for (unsigned w = 0; w < WORKERS; w++)
    CHECK(atomic_load(&progress[w]) == before[w], "round %d: worker %u moved while paused", round, w);
  ENABLE();
  CHECK(seen_overflow == 0, "too many blocks reported");
  qsort(expect, ne, sizeof *expect, by_addr);
  qsort(seen, nseen, sizeof *seen, by_addr);
  CHECK(ne == nseen, "round %d: %zu live blocks known, %zu reported", round, ne, nseen);
  size_t i = 0, j = 0;
  int shown = 0;
  while ((i < ne || j < nseen) && shown < 5) {
    if (j == nseen || (i < ne && expect[i].p < seen[j].p)) {
      CHECK(0, "round %d: live block %#lx (%zu bytes) not reported", round, (unsigned long)expect[i].p,
            expect[i].usable);
      i++, shown++;
    } else if (i == ne || seen[j].p < expect[i].p) {
      CHECK(0, "round %d: %#lx (%zu bytes) reported, not live", round, (unsigned long)seen[j].p, seen[j].usable);
      j++, shown++;
    } else {
      CHECK(expect[i].usable == 0 || seen[j].usable == expect[i].usable,
            "round %d: %#lx reported with %zu bytes, usable %zu", round, (unsigned long)seen[j].p, seen[j].usable,
            expect[i].usable);
      i++, j++;
    }
  }
}

static void t_iterate_exact(int rounds) {
  /* The baseline: what the process holds before any worker allocates. */
  nseen = 0;
  ITERATE(0, SIZE_MAX, on_block, NULL);
  CHECK(nseen <= 256, "baseline of %zu blocks", nseen);
  pthread_t t[WORKERS];
  for (unsigned w = 0; w < WORKERS; w++) pthread_create(&t[w], NULL, worker, (void *)(uintptr_t)w);
  /* Thread start-up allocates too (glibc's thread structures): the
   * baseline is what is live, with every worker paused, that no worker
   * knows of. */
  DISABLE();
  wait_paused(WORKERS);
  nseen = 0;
  ITERATE(0, SIZE_MAX, on_block, NULL);
  pthread_mutex_lock(&rec_mu);
  nbase = 0;
  for (size_t k = 0; k < nseen; k++) {
    int known = 0;
    for (size_t i = 0; i < nrec && !known; i++) known = rec[i].p == seen[k].p;
    for (unsigned w = 0; w < WORKERS && !known; w++) known = atomic_load(&in_flight[w]) == seen[k].p;
    if (!known && nbase < 256) base_set[nbase++] = seen[k];
  }
  pthread_mutex_unlock(&rec_mu);
  ENABLE();
  for (int round = 0; round < rounds && test_failures() == 0; round++) {
    sleep_ms(5);
    check_round(round);
  }
  atomic_store(&stop, 1);
  for (unsigned w = 0; w < WORKERS; w++) pthread_join(t[w], NULL);
  size_t u;
  void *p;
  while ((p = rec_take(0, &u)) != NULL) M(free)(p);
}

/* bionic's malloc_iterate tests: blocks of every size class found once with
 * their usable size after the same sizes were allocated and freed (cached
 * blocks are not reported); nothing reported outside the heap. */
static void t_iterate_sizes(void) {
  static const size_t sizes[] = {8, 16, 32, 48, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
                                 640, 768, 896, 1024, 1280, 1536, 1792, 2048, 2560, 3072, 3584, 4096, 5120, 6144,
                                 7168, 8192, 10240, 12288, 14336, 16384, 32768, 65536, 131072, 262144, 524288,
                                 1048576, 2097152, 6291456};
  enum { N = sizeof sizes / sizeof sizes[0], PER = 50 };
  static blk mine[N * PER];
  size_t n = 0;
  for (size_t k = 0; k < N; k++) {
    for (int i = 0; i < 40; i++) M(free)(M(malloc)(sizes[k])); /* more than any cache holds */
    for (int i = 0; i < PER; i++) {
      void *p = M(malloc)(sizes[k]);
      mine[n++] = (blk){(uintptr_t)p, M(malloc_usable_size)(p)};
    }
  }
  nseen = 0;
  DISABLE();
  ITERATE(0, SIZE_MAX, on_block, NULL);
  ENABLE();
  qsort(seen, nseen, sizeof *seen, by_addr);
  for (size_t i = 0; i < n; i++) {
    blk *b = bsearch(&mine[i], seen, nseen, sizeof *seen, by_addr);
    CHECK(b != NULL, "block %#lx of %zu bytes not reported", (unsigned long)mine[i].p, mine[i].usable);
    if (b) CHECK(b->usable == mine[i].usable, "block reported with %zu bytes, usable %zu", b->usable, mine[i].usable);
  }
  /* Outside the heap (this stack, this program's data): nothing. */
  static char data[1 << 16];
  char stack[4096];
  nseen = 0;
  ITERATE((uintptr_t)data, sizeof data, on_block, NULL);
  ITERATE((uintptr_t)stack, sizeof stack, on_block, NULL);
  CHECK(nseen == 0, "%zu blocks reported outside the heap", nseen);
  /* A range holding exactly one block reports it alone. */
  nseen = 0;
  ITERATE(mine[3].p, 1, on_block, NULL);
  CHECK(nseen == 1 && seen[0].p == mine[3].p, "one-byte range: %zu blocks", nseen);
  CHECK(ITERATE(0, 1, NULL, NULL) == -1 && errno == EINVAL, "a NULL callback is refused");
  for (size_t i = 0; i < n; i++) M(free)((void *)mine[i].p);
}

/* malloc_disable pauses other threads' calls (both fast paths included)
 * until malloc_enable; enable without disable does nothing. */
static void t_disable(void) {
  ENABLE(); /* nothing to end: a no-op */
  pthread_t t[WORKERS];
  for (unsigned w = 0; w < WORKERS; w++) pthread_create(&t[w], NULL, worker, (void *)(uintptr_t)w);
  for (int round = 0; round < 50; round++) {
    DISABLE();
    wait_paused(WORKERS);
    unsigned long before[WORKERS];
    for (unsigned w = 0; w < WORKERS; w++) before[w] = atomic_load(&progress[w]);
    sleep_ms(2);
    for (unsigned w = 0; w < WORKERS; w++) CHECK(atomic_load(&progress[w]) == before[w], "worker moved");
    ENABLE();
    for (unsigned w = 0; w < WORKERS; w++) /* every worker goes on */
      while (atomic_load(&progress[w]) == before[w]) sched_yield();
  }
  atomic_store(&stop, 1);
  for (unsigned w = 0; w < WORKERS; w++) pthread_join(t[w], NULL);
  size_t u;
  void *p;
  while ((p = rec_take(0, &u)) != NULL) M(free)(p);
}

#ifdef JW_DROPIN
/* ---- across fork ---- */

/* The disabling thread's own calls pause too (bionic's
 * malloc_disable_prevents_allocs): a forked child disables, then mallocs;
 * it must be asleep at the gate (its one thread in a futex wait, the
 * malloc never returning) until the parent kills it. */
static void t_self_pause(void) {
  int fds[2];
  CHECK(pipe(fds) == 0, "pipe");
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    malloc_disable();
    if (write(fds[1], "A", 1) != 1) _exit(4);
    void *p = malloc(1024);
    if (write(fds[1], "B", 1) != 1) _exit(4);
    _exit(p ? 0 : 1);
  }
  close(fds[1]);
  char c = 0;
  CHECK(read(fds[0], &c, 1) == 1 && c == 'A', "child did not disable");
  char path[64], buf[128];
  snprintf(path, sizeof path, "/proc/%d/syscall", (int)pid);
  long nr = -1;
  for (;;) { /* until its one thread sleeps in a futex (bounded by the alarm) */
    int fd = open(path, O_RDONLY);
    if (fd < 0) break;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0) break;
    buf[n] = 0;
    nr = strtol(buf, NULL, 10);
    if (nr == SYS_futex) break;
    sleep_ms(1);
  }
  if (nr != SYS_futex) printf("self_pause: %s unreadable here; checked the pipe only\n", path);
  sleep_ms(20);
  fcntl(fds[0], F_SETFL, O_NONBLOCK);
  CHECK(read(fds[0], &c, 1) == -1 && errno == EAGAIN, "the disabling thread's malloc returned");
  kill(pid, SIGKILL);
  waitpid(pid, NULL, 0);
  close(fds[0]);
}

/* Blocks of every tier in a child, checked, then freed; also the
 * extensions themselves in the child. Returns the child's exit status. */
static int child_allocates(void) {
  static const size_t sizes[] = {16, 200, 1500, 3000, 9000, 16000, 40000, 300000, 2 << 20, 6 << 20};
  void *p[sizeof sizes / sizeof sizes[0]];
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    p[i] = malloc(sizes[i]);
    if (p[i] == NULL) return 1;
    memset(p[i], (int)i, sizes[i]);
  }
  malloc_disable();
  nseen = 0;
  ITERATE(0, SIZE_MAX, on_block, NULL);
  malloc_enable();
  size_t found = 0;
  for (size_t k = 0; k < nseen; k++)
    for (size_t i = 0; i < sizeof p / sizeof p[0]; i++) found += seen[k].p == (uintptr_t)p[i];
  if (found != sizeof p / sizeof p[0]) return 2;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    unsigned char *b = p[i];
    if (b[0] != (unsigned char)i || b[sizes[i] - 1] != (unsigned char)i) return 3;
    free(p[i]);
  }
  if (mallopt(M_PURGE, 0) != 1 || mallopt(M_PURGE_ALL, 0) != 1) return 4;
  return 0;
}

static void wait_child(pid_t pid, const char *what) {
  int st = 0;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: child status %#x", what, st);
}

static atomic_int enabled_flag;
static void *enabler(void *arg) {
  (void)arg;
  sleep_ms(200);
  atomic_store(&enabled_flag, 1);
  malloc_enable();
  return NULL;
}

/* Scudo's DisableForkEnable: fork while malloc is disabled waits for the
 * malloc_enable of another thread; the child then allocates. */
static void t_fork_enable(void) {
  pthread_t t;
  pthread_create(&t, NULL, enabler, NULL);
  malloc_disable();
  pid_t pid = fork();
  if (pid == 0) _exit(child_allocates());
  CHECK(atomic_load(&enabled_flag) == 1, "fork returned while malloc was disabled");
  wait_child(pid, "fork_enable");
  pthread_join(t, NULL);
  free(malloc(100)); /* the parent allocates too */
}

/* Forks while other threads are in allocation calls: every child can
 * allocate in every tier, iterate and purge. */
static void t_fork_in_calls(void) {
  pthread_t t[WORKERS];
  for (unsigned w = 0; w < WORKERS; w++) pthread_create(&t[w], NULL, worker, (void *)(uintptr_t)w);
  for (int i = 0; i < 20; i++) {
    sleep_ms(3);
    pid_t pid = fork();
    if (pid == 0) _exit(child_allocates());
    wait_child(pid, "fork_in_calls");
  }
  atomic_store(&stop, 1);
  for (unsigned w = 0; w < WORKERS; w++) pthread_join(t[w], NULL);
}

/* ---- RSS ---- */

static size_t rss(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
  if (fd >= 0) close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size, res;
  if (sscanf(buf, "%lu %lu", &size, &res) != 2) return 0;
  return res * (size_t)sysconf(_SC_PAGESIZE);
}

#define MIB (1024.0 * 1024.0)

/* About 60 MiB in every tier below direct mappings, touched, then freed. */
static size_t churn_tiers(void) {
  static void *p[24000];
  size_t n = 0, bytes = 0;
  for (int i = 0; i < 16000; i++, n++) bytes += 1000, p[n] = malloc(1000);
  for (int i = 0; i < 2000; i++, n++) bytes += 8000, p[n] = malloc(8000);
  for (int i = 0; i < 200; i++, n++) bytes += 128 << 10, p[n] = malloc(128 << 10);
  for (int i = 0; i < 6; i++, n++) bytes += 3 << 20, p[n] = malloc(3 << 20);
  for (size_t i = 0; i < n; i++) {
    size_t sz = malloc_usable_size(p[i]);
    for (size_t o = 0; o < sz; o += 4096) ((char *)p[i])[o] = 1;
  }
  for (size_t i = 0; i < n; i++) free(p[i]);
  return bytes;
}

/* mallopt(M_PURGE, 0) gives the memory just freed back at once (reclamation's
 * interval and watermark set so that nothing goes back by itself). */
static void t_purge(void) {
  free(malloc(1));
  size_t base = rss(), bytes = churn_tiers(), freed = rss();
  CHECK(mallopt(M_PURGE, 0) == 1, "mallopt(M_PURGE) failed");
  size_t after = rss();
  printf("purge: base %.1f MiB, %.1f MiB allocated, %.1f MiB resident after the frees, %.1f MiB after M_PURGE\n",
         base / MIB, bytes / MIB, freed / MIB, after / MIB);
  CHECK(freed > base + bytes / 2, "the frees gave memory back by themselves: set the reclaim options");
  CHECK(freed - after >= bytes * 3 / 4, "M_PURGE gave back %.1f of %.1f MiB", (freed - after) / MIB, bytes / MIB);
  CHECK(after <= base + (4 << 20), "%.1f MiB above the start after M_PURGE", (after - base) / MIB);
}

/* Idle threads whose block caches hold freed ranges and midend blocks:
 * M_PURGE from another thread leaves them, M_PURGE_ALL gives them back. */
#define HOLDERS 4
static pthread_barrier_t held, go_on;
static void *holder(void *arg) {
  (void)arg;
  void *p[64];
  for (int round = 0; round < 4; round++) { /* the budget of 80 KiB-1 MiB ranges grows with use */
    for (int i = 0; i < 16; i++) p[i] = malloc((size_t)(256 + 64 * (i % 4)) << 10);
    for (int i = 16; i < 64; i++) p[i] = malloc(2048 + 1024 * (i % 12));
    for (int i = 0; i < 64; i++) memset(p[i], 1, malloc_usable_size(p[i]));
    for (int i = 0; i < 64; i++) free(p[i]);
  }
  pthread_barrier_wait(&held);
  pthread_barrier_wait(&go_on); /* idle meanwhile, its caches full */
  return NULL;
}

static void t_purge_all(void) {
  free(malloc(1));
  pthread_barrier_init(&held, NULL, HOLDERS + 1);
  pthread_barrier_init(&go_on, NULL, HOLDERS + 1);
  size_t base = rss();
  pthread_t t[HOLDERS];
  for (int i = 0; i < HOLDERS; i++) pthread_create(&t[i], NULL, holder, NULL);
  pthread_barrier_wait(&held);
  size_t full = rss();
  CHECK(mallopt(M_PURGE, 0) == 1, "M_PURGE");
  size_t purge = rss();
  CHECK(mallopt(M_PURGE_ALL, 0) == 1, "M_PURGE_ALL");
  size_t all = rss();
  printf("purge_all: base %.1f MiB, %.1f with %d idle threads' caches full, %.1f after M_PURGE, %.1f after "
         "M_PURGE_ALL\n", base / MIB, full / MIB, HOLDERS, purge / MIB, all / MIB);
  CHECK(purge >= all + (HOLDERS << 20), "M_PURGE_ALL gave back only %.1f MiB of other threads' caches",
        ((double)purge - (double)all) / MIB);
  CHECK(all <= base + (2 << 20) + HOLDERS * (256 << 10), "%.1f MiB above the start after M_PURGE_ALL",
        ((double)all - (double)base) / MIB);
  pthread_barrier_wait(&go_on);
  for (int i = 0; i < HOLDERS; i++) pthread_join(t[i], NULL);
}

/* M_DECAY_TIME 0 releases at free; 1 puts the delayed release back; -1
 * releases nothing; other values are refused. */
static void t_decay(void) {
  long wm0, wm, rc, grace0, grace;
  free(malloc(1));
  jw_option_get("RECLAIM_WATERMARK", &wm0); /* the environment's, read at the first call */
  jw_option_get("RECLAIM_GRACE_MS", &grace0);
  CHECK(mallopt(M_DECAY_TIME, 0) == 1, "M_DECAY_TIME 0");
  CHECK(jw_option_get("RECLAIM_GRACE_MS", &grace) == 0 && grace == 0, "M_DECAY_TIME 0 left a grace of %ld ms", grace);
  size_t base = rss(), bytes = churn_tiers(), now = rss();
  printf("decay 0: base %.1f MiB, %.1f MiB allocated and freed, %.1f MiB resident after\n", base / MIB,
         bytes / MIB, now / MIB);
  CHECK(now <= base + (6 << 20), "M_DECAY_TIME 0 kept %.1f MiB after the frees", ((double)now - base) / MIB);
  CHECK(mallopt(M_DECAY_TIME, 1) == 1, "M_DECAY_TIME 1");
  jw_option_get("RECLAIM_WATERMARK", &wm);
  CHECK(wm == wm0, "M_DECAY_TIME 1 left the watermark at %ld, not %ld", wm, wm0);
  jw_option_get("RECLAIM_GRACE_MS", &grace);
  CHECK(grace == grace0, "M_DECAY_TIME 1 left the grace at %ld ms, not %ld", grace, grace0);
  churn_tiers();
  size_t delayed = rss();
  printf("decay 1: %.1f MiB resident after the same frees\n", delayed / MIB);
  CHECK(delayed >= now + bytes / 2, "M_DECAY_TIME 1 released at once too");
  CHECK(mallopt(M_DECAY_TIME, -1) == 1 && jw_option_get("RECLAIM", &rc) == 0 && rc == 0, "-1: reclamation off");
  CHECK(mallopt(M_DECAY_TIME, 5) == 1 && jw_option_get("RECLAIM", &rc) == 0 && rc == 1, "5 counts as 1");
  CHECK(mallopt(M_DECAY_TIME, -2) == 0, "-2 is refused");
  CHECK(mallopt(M_PURGE, 7) == 1 && mallopt(1 /* glibc's M_MXFAST */, 0) == 1, "other parameters accepted");
}

/* mallinfo follows the heap (uordblks up and down with a range). */
static void t_mallinfo(void) {
  struct mallinfo2 a = mallinfo2();
  void *p = malloc(1 << 20);
  struct mallinfo2 b = mallinfo2();
  free(p);
  mallopt(M_PURGE, 0);
  struct mallinfo2 c = mallinfo2();
  struct mallinfo d = mallinfo();
  CHECK(b.uordblks >= a.uordblks + (1 << 20), "uordblks %zu -> %zu", a.uordblks, b.uordblks);
  CHECK(c.uordblks + (1 << 19) <= b.uordblks, "uordblks did not fall: %zu -> %zu", b.uordblks, c.uordblks);
  CHECK(b.arena >= b.uordblks - b.hblkhd && (size_t)d.uordblks == c.uordblks, "fields disagree");
}

/* JWMALLOC_LOW_MEMORY=1: a thread's cache is parked at its exit and the next
 * thread fills its partly used slabs, so short-lived threads that each leave
 * a few blocks behind do not leave a slab per class each (the default
 * abandons them); a parked cache no thread takes gives everything back
 * within two reclaim intervals. */
#define SEQ_THREADS 300
#define SEQ_CLASSES 10
static void *kept[SEQ_THREADS][SEQ_CLASSES];

static void *short_lived(void *arg) {
  unsigned i = (unsigned)(uintptr_t)arg;
  void *p[SEQ_CLASSES][5];
  for (unsigned c = 0; c < SEQ_CLASSES; c++)
    for (unsigned k = 0; k < 5; k++) {
      p[c][k] = malloc(24 + 96 * c);
      memset(p[c][k], (int)(i + c), 24 + 96 * c);
    }
  for (unsigned c = 0; c < SEQ_CLASSES; c++) {
    kept[i][c] = p[c][0];
    for (unsigned k = 1; k < 5; k++) free(p[c][k]);
  }
  return NULL;
}

/* Checks and frees every kept block. On a thread of its own: a thread that
 * frees into a slab whose parked cache the reclaimer already gave back adopts
 * that slab, and the main thread would keep what it adopted in its own cache
 * and pool (a live thread's, not aged out), a few hundred KiB depending on
 * when the reclaimer ran. This thread's cache is parked at its exit and ages
 * out like the others. */
static void *free_kept(void *arg) {
  (void)arg;
  for (unsigned i = 0; i < SEQ_THREADS; i++)
    for (unsigned c = 0; c < SEQ_CLASSES; c++) {
      unsigned char *b = kept[i][c];
      CHECK(b[0] == (unsigned char)(i + c) && b[23 + 96 * c] == (unsigned char)(i + c), "block damaged");
      free(b);
    }
  return NULL;
}

static uint64_t live_now(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s.page_source_live_bytes;
}

static void t_parking(void) {
  long low;
  CHECK(jw_option_get("LOW_MEMORY", &low) == 0 && low == 1, "run with JWMALLOC_LOW_MEMORY=1");
  CHECK(jw_option_set("LOW_MEMORY", 0) == -1 && errno == EINVAL, "LOW_MEMORY is a start-up option");
  free(malloc(1));
  long grace;
  CHECK(jw_option_get("RECLAIM_GRACE_MS", &grace) == 0 && grace == 0, "a grace of %ld ms in the low-memory "
        "configuration", grace);
  /* No aging while the threads come and go: a parked cache aged out between
   * one thread's exit and the next one's start (a busy machine makes that
   * gap long) would leave its slabs to the new cache. Aging is checked after. */
  long interval;
  CHECK(jw_option_get("RECLAIM_INTERVAL_MS", &interval) == 0 && jw_option_set("RECLAIM_INTERVAL_MS", 600000) == 0,
        "the reclaim interval cannot be set");
  uint64_t start = live_now();
  for (unsigned i = 0; i < SEQ_THREADS; i++) {
    pthread_t t;
    pthread_create(&t, NULL, short_lived, (void *)(uintptr_t)i);
    pthread_join(t, NULL);
  }
  uint64_t after = live_now();
  /* Abandoned, each thread's blocks would hold a slab per class: 12 MB. */
  printf("parking: %d threads in turn, %d blocks each left live: page-source live bytes +%.1f MiB\n", SEQ_THREADS,
         SEQ_CLASSES, ((double)after - (double)start) / MIB);
  CHECK(after < start + (2 << 20), "short-lived threads held %.1f MiB of slabs", ((double)after - start) / MIB);
  fflush(stdout);
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", interval) == 0, "the reclaim interval cannot be set back");
  pthread_t t;
  pthread_create(&t, NULL, free_kept, NULL);
  pthread_join(t, NULL);
  /* The parked caches age out (bounded by the alarm; the statistics once on
   * the way, so that a hang says where the memory stayed). */
  for (int waited = 0; live_now() > start + (256 << 10); waited++) {
    if (waited == 1000) {
      fprintf(stderr, "parking: %llu bytes live after 1000 waits of 10 ms, %llu at the start\n",
              (unsigned long long)live_now(), (unsigned long long)start);
      jw_stats_print(2);
    }
    sleep_ms(10);
  }
}

static int android_fork_case(const char *c) {
  if (strcmp(c, "self_pause") == 0) t_self_pause();
  else if (strcmp(c, "fork_enable") == 0) t_fork_enable();
  else if (strcmp(c, "fork_in_calls") == 0) t_fork_in_calls();
  else if (strcmp(c, "purge") == 0) t_purge();
  else if (strcmp(c, "purge_all") == 0) t_purge_all();
  else if (strcmp(c, "decay") == 0) t_decay();
  else if (strcmp(c, "mallinfo") == 0) t_mallinfo();
  else if (strcmp(c, "parking") == 0) t_parking();
  else return 0;
  return 1;
}
#endif

int main(int argc, char **argv) {
  signal(SIGALRM, on_alarm);
  alarm(HANG_SECONDS);
  const char *c = argc > 1 ? argv[1] : "";
  if (strcmp(c, "iterate_exact") == 0) t_iterate_exact(argc > 2 ? atoi(argv[2]) : 200);
  else if (strcmp(c, "iterate_sizes") == 0) t_iterate_sizes();
  else if (strcmp(c, "disable") == 0) t_disable();
#ifdef JW_DROPIN
  else if (android_fork_case(c)) {
  }
#endif
  else {
    fprintf(stderr, "usage: test_android iterate_exact [rounds]|iterate_sizes|disable|self_pause|fork_enable|"
                    "fork_in_calls|purge|purge_all|decay|mallinfo|parking\n");
    return 2;
  }
  if (test_failures()) fprintf(stderr, "test_android %s: %d failures\n", c, test_failures());
  else printf("test_android %s: ok\n", c);
  return test_failures() != 0;
}
