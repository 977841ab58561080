/* Lifetime-based reclamation through the library (issue 7,
 * docs/design/reclamation.md): what malloc and free see while the reclaim
 * thread gives memory back behind them.
 *
 *   stress [ops]   threads keep a pattern in every live block of every tier
 *                  (frontend, midend, ranges, direct mappings) and check all
 *                  their live blocks after every reclaim cycle or synchronous
 *                  release they observe and after every idle spell (while
 *                  their page pool and the midend's caches age); half the
 *                  frees cross threads, threads end and leave blocks to the
 *                  next round; at the end the process, idle, gives every
 *                  cached byte back. No live memory is ever released.
 *   tiers          an idle thread's page pool and an idle midend class age
 *                  and go back through the backend; a thread whose pool lock
 *                  the reclaimer holds still mallocs and frees (never waits).
 *   fork           fork while the reclaim thread works (threads churning,
 *                  1 ms interval), while a batch is in flight and while an
 *                  aging pass holds pages taken out of a pool: both sides go
 *                  on, the child's blocks intact and its own reclaim thread
 *                  started.
 *   exit           a process that exits while a release batch or an aging
 *                  pass is in flight exits at once, its exit handler
 *                  allocating and freeing.
 *   pthread_exit   with a 600 s interval and memory to age, a process whose
 *                  threads all end with pthread_exit ends at once (without the
 *                  last-thread check it would live for the interval).
 *
 * Built with JW_DROPIN against libjwmalloc.a (malloc and free are
 * jwmalloc's), and with the jw_ API against its AddressSanitizer variant
 * (stress and tiers). The test hooks (reclaim/reclaim.h) are internal:
 * linked statically. Waits are bounded for hangs, never timing checks. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "api/runtime.h"
#include "pages/page_source.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"
#include "stage.h"

#ifdef JW_DROPIN
#define M(x) x
#else
#define M(x) jw_##x
#endif

#define HANG 60.0 /* seconds: a bound for a hang */

static jw_reclaim_stats rstats(void) {
  jw_reclaim_stats s;
  jw_reclaim_get_stats(&s);
  return s;
}

/* The reclaimer's state, for a failure message. */
static void explain(const char *what) {
  jw_reclaim_stats r = rstats();
  fprintf(stderr,
          "%s: reclaim thread %s (%llu starts, %llu exits, %llu start failures); %llu cycles, %llu aging passes, "
          "%llu early wakes; cached %llu bytes, tiers hold %llu bytes\n",
          what, r.thread_running ? "running" : "not running", (unsigned long long)r.thread_starts,
          (unsigned long long)r.thread_exits, (unsigned long long)r.thread_start_failures,
          (unsigned long long)r.cycles, (unsigned long long)r.tier_passes, (unsigned long long)r.early_wakes,
          (unsigned long long)r.cached_bytes, (unsigned long long)r.tier_held_bytes);
}

static jw_stats lstats(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

static void config(uint32_t interval_ms, uint64_t watermark) {
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  c.enabled = 1;
  c.interval_ms = interval_ms;
  c.watermark = watermark;
  if (jw_reclaim_set_config(&c) != 0) {
    perror("jw_reclaim_set_config");
    exit(2);
  }
}

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* ---- blocks carrying a pattern ----
 * word 0: (id << 24) | size, word 1: its complement, then one word per 4 KiB
 * and the last word derived from word 0: a block says what it should hold,
 * so whichever thread frees it can check it; a released page reads zero. */
static uint64_t mix(uint64_t w0, size_t k) { return (w0 ^ (k * 0xbf58476d1ce4e5b9ull)) * 0x94d049bb133111ebull | 1; }

static void *make(size_t n, uint64_t id) {
  uint64_t *p = M(malloc)(n);
  CHECK(p != NULL, "malloc(%zu) failed", n);
  if (p == NULL) exit(1);
  size_t words = n / 8;
  uint64_t w0 = (id << 24) | n;
  p[0] = w0;
  p[1] = ~w0;
  for (size_t k = 512; k < words; k += 512) p[k] = mix(w0, k);
  if (words > 2) p[words - 1] = mix(w0, words - 1);
  return p;
}

static int intact(const uint64_t *p) {
  uint64_t w0 = p[0];
  if (p[1] != ~w0) return 0;
  size_t words = (w0 & 0xffffff) / 8;
  for (size_t k = 512; k < words; k += 512)
    if (p[k] != mix(w0, k)) return 0;
  return words <= 2 || p[words - 1] == mix(w0, words - 1);
}

static void check_block(const uint64_t *p, const char *when) {
  CHECK(intact(p), "live block %p (%llu bytes) lost its pattern %s", (const void *)p,
        (unsigned long long)(p[0] & 0xffffff), when);
  if (test_failures()) exit(1);
}

/* Sizes across the tiers: 60% frontend, 25% midend, 14.8% ranges up to
 * 512 KiB, 0.2% direct mappings of 4-6 MiB. */
static size_t draw(uint64_t *r) {
  uint64_t u = rng_next(r) % 1000, v = rng_next(r);
  if (u < 600) return 16 + v % 1984;
  if (u < 850) return 2048 + v % 14336;
  if (u < 998) return 16384 + v % (512 * 1024 - 16384);
  return (4u << 20) + v % (2u << 20);
}

/* ---- stress ---- */

enum { THREADS = 4, SLOTS = 160, SHARED = 64, ROUNDS = 2 };

static uint64_t ops_per_thread = 20000;
static _Atomic(uint64_t *) shared[SHARED];              /* blocks handed between threads */
static uint64_t *inherited[THREADS][SLOTS];             /* left by a round's threads to the next */
static _Atomic uint64_t n_checks, n_idle_checks, n_blocks_checked;

static uint64_t release_events(void) {
  jw_reclaim_stats s = rstats();
  return s.cycles + s.sync_releases + s.tier_passes;
}

static void check_all(uint64_t **live, const char *when) {
  for (int i = 0; i < SLOTS; i++)
    if (live[i]) check_block(live[i], when);
  n_blocks_checked += SLOTS;
}

static void drop(uint64_t *p) {
  check_block(p, "when freed");
  M(free)(p);
}

typedef struct warg {
  int index, round;
} warg;

static void *worker(void *arg) {
  warg *w = arg;
  uint64_t r = 0x5eed + (uint64_t)w->index * 7919 + (uint64_t)w->round * 104729;
  uint64_t **live = inherited[w->index]; /* adopted from the previous round's thread */
  uint64_t id = ((uint64_t)w->round * THREADS + (uint64_t)w->index) << 24;
  uint64_t seen = release_events();
  for (uint64_t op = 0; op < ops_per_thread; op++) {
    int i = (int)(rng_next(&r) % SLOTS);
    if (live[i]) {
      if (rng_next(&r) & 1) {
        check_block(live[i], "when handed over");
        uint64_t *old = atomic_exchange(&shared[rng_next(&r) % SHARED], live[i]);
        if (old) drop(old);
      } else {
        drop(live[i]);
      }
      live[i] = NULL;
    }
    if (rng_next(&r) % 4 != 0) live[i] = make(draw(&r), ++id & 0xffffffffffull);
    if ((op & 63) == 0) {
      uint64_t e = release_events();
      if (e != seen) { /* memory went back since we last looked: is ours intact? */
        seen = e;
        check_all(live, "after a reclaim cycle");
        n_checks++;
      }
    }
    if (op % 1200 == 1199) {
      /* Idle for a few intervals holding our blocks: our page pool and the
       * midend's caches age meanwhile. */
      test_sleep_ms(10);
      check_all(live, "after an idle spell");
      n_idle_checks++;
    }
  }
  /* Half the live blocks stay for the next round's thread (their slabs are
   * abandoned when this thread ends). */
  for (int i = 0; i < SLOTS; i += 2)
    if (live[i]) {
      drop(live[i]);
      live[i] = NULL;
    }
  return NULL;
}

static int case_stress(void) {
  jw_stats s0 = lstats();
  jw_reclaim_stats r0 = rstats();
  for (int round = 0; round < ROUNDS; round++) {
    pthread_t t[THREADS];
    warg a[THREADS];
    for (int i = 0; i < THREADS; i++) {
      a[i] = (warg){i, round};
      pthread_create(&t[i], NULL, worker, &a[i]);
    }
    for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  }
  for (int i = 0; i < THREADS; i++)
    for (int k = 0; k < SLOTS; k++)
      if (inherited[i][k]) drop(inherited[i][k]);
  for (int j = 0; j < SHARED; j++) {
    uint64_t *p = atomic_exchange(&shared[j], NULL);
    if (p) drop(p);
  }
  /* Idle now: every cached byte goes back (the backend's buffers, the pools,
   * the midend's caches), within a few intervals. */
  int drained = TEST_WAIT_FOR(rstats().cached_bytes == 0 && rstats().tier_held_bytes == 0, HANG);
  jw_stats s1 = lstats();
  jw_reclaim_stats r1 = rstats();
  CHECK(drained, "idle process still caches %llu bytes in the backend and %llu in the tiers",
        (unsigned long long)r1.cached_bytes, (unsigned long long)r1.tier_held_bytes);
  if (!drained) explain("stress");
  CHECK(s1.reclaim_cycles > s0.reclaim_cycles && s1.reclaim_released_bytes > s0.reclaim_released_bytes,
        "no reclamation happened");
  CHECK(s1.invalid_frees == 0, "invalid frees reported");
  printf("stress: %d rounds of %d threads x %llu ops; %llu cycles, %llu synchronous releases, %llu aging passes; "
         "%llu MiB given back in %llu madvise calls; aged out of the tiers: %llu pool pages, %llu midend slabs; "
         "%llu checks of all live blocks after a release, %llu after idle spells (%llu blocks)\n",
         ROUNDS, THREADS, (unsigned long long)ops_per_thread, (unsigned long long)(r1.cycles - r0.cycles),
         (unsigned long long)(r1.sync_releases - r0.sync_releases),
         (unsigned long long)(r1.tier_passes - r0.tier_passes),
         (unsigned long long)((s1.reclaim_released_bytes - s0.reclaim_released_bytes) >> 20),
         (unsigned long long)(r1.madvise_calls - r0.madvise_calls),
         (unsigned long long)(s1.pool_pages_aged - s0.pool_pages_aged),
         (unsigned long long)(s1.mid_slabs_aged - s0.mid_slabs_aged), (unsigned long long)n_checks,
         (unsigned long long)n_idle_checks, (unsigned long long)n_blocks_checked);
  return test_failures() != 0;
}

/* ---- tiers ---- */

enum { KEEP = 63 * 400, EMPTY = 84 * 100 }; /* 400 slabs of 64 B kept, 100 slabs of 48 B emptied */

static uint64_t *kept[KEEP];

/* A thread that fills its pool with 100 pages, then goes idle. */
static void *pool_owner(void *arg) {
  (void)arg;
  static uint64_t *gone[EMPTY];
  for (int i = 0; i < KEEP; i++) kept[i] = make(64, (uint64_t)i + 1);
  for (int i = 0; i < EMPTY; i++) gone[i] = make(48, (uint64_t)i + 1);
  for (int i = 0; i < EMPTY; i++) drop(gone[i]);
  set_stage(1);
  wait_stage(2); /* idle while the reclaimer ages the pool */
  for (int i = 0; i < KEEP; i++) check_block(kept[i], "after its thread's pool aged");
  for (int i = 0; i < KEEP; i++) drop(kept[i]);
  return NULL;
}

static int is_live(const void *p) {
  jw_range_info info;
  return jw_pages_lookup(p, &info);
}

static int case_tiers(void) {
  /* The public option calls reach the reclamation settings. */
  long v = 0;
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 20) == 0 && jw_option_get("RECLAIM_INTERVAL_MS", &v) == 0 && v == 20,
        "RECLAIM_INTERVAL_MS not set through the option API (%ld)", v);
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 0) == -1 && errno == EINVAL, "interval 0 accepted");
  CHECK(jw_option_set("RECLAIM_POLICY", 2) == -1 && errno == EINVAL, "policy 2 accepted");
  /* the table's range holds for reclamation's rows too (at most 2^50 bytes) */
  CHECK(jw_option_set("RECLAIM_WATERMARK", (long)((uint64_t)1 << 60)) == -1 && errno == EINVAL, "watermark 2^60 accepted");
  CHECK(jw_option_get("RECLAIM_POLICY", &v) == 0 && v == 0, "default policy not lifetime");
  jw_stats s0 = lstats();
  pthread_t t;
  pthread_create(&t, NULL, pool_owner, NULL);
  wait_stage(1);
  printf("tiers: a thread keeps 400 slabs, empties 100 (its pool keeps about 100 pages) and idles\n");
  fflush(stdout);
  jw_stats s1 = lstats(); /* after printf's own buffer was allocated */
  (void)s0;
  /* Its pool (about 100 pages: 25% of its 400 slabs) ages and goes back. */
  int aged = TEST_WAIT_FOR(lstats().pool_pages_aged - s1.pool_pages_aged >= 90, HANG);
  jw_stats s2 = lstats();
  CHECK(aged, "idle thread's pool not aged: %llu pages", (unsigned long long)(s2.pool_pages_aged - s1.pool_pages_aged));
  if (!aged) explain("tiers");
  CHECK(s2.page_source_live_bytes + 90 * 4096 <= s1.page_source_live_bytes,
        "pool pages still held by the backend's client: %llu -> %llu bytes live",
        (unsigned long long)s1.page_source_live_bytes, (unsigned long long)s2.page_source_live_bytes);
  int released = aged && TEST_WAIT_FOR(lstats().reclaim_released_bytes - s1.reclaim_released_bytes >= 90 * 4096, HANG);
  CHECK(released, "aged pool pages not given back to the OS");
  printf("tiers: %llu pool pages aged out of the idle thread's pool; %llu KiB given back to the OS\n",
         (unsigned long long)(lstats().pool_pages_aged - s1.pool_pages_aged),
         (unsigned long long)((lstats().reclaim_released_bytes - s1.reclaim_released_bytes) >> 10));
  set_stage(2);
  pthread_join(t, NULL);

  /* The midend: an 8 KiB class used, then idle: its cached blocks go back
   * to their slabs and the slabs back to the backend. */
  enum { MID = 48 };
  void *m[MID];
  for (int i = 0; i < MID; i++) m[i] = make(8000, (uint64_t)i + 1);
  for (int i = 0; i < MID; i++) drop(m[i]);
  int cached_somewhere = 0;
  for (int i = 0; i < MID; i++) cached_somewhere += is_live(m[i]);
  jw_stats s3 = lstats();
  int mid_aged = TEST_WAIT_FOR(lstats().mid_slabs_aged > s3.mid_slabs_aged && ({
                                 int any = 0;
                                 for (int i = 0; i < MID; i++) any |= is_live(m[i]);
                                 !any;
                               }),
                               HANG);
  CHECK(cached_somewhere > 0, "the midend kept nothing of the freed class (nothing to age)");
  CHECK(mid_aged, "idle midend class not aged (%llu slabs aged)",
        (unsigned long long)(lstats().mid_slabs_aged - s3.mid_slabs_aged));
  printf("tiers: an idle 8 KiB midend class gave back %llu slabs (%d of %d freed blocks had stayed cached)\n",
         (unsigned long long)(lstats().mid_slabs_aged - s3.mid_slabs_aged), cached_somewhere, MID);

  /* A freed direct mapping is kept, then unmapped by the aging pass one to
   * two intervals later (api.md, "Kept direct mappings"). The reclaimer is
   * held off while the free is checked: under outside load two passes can
   * fit between the free and the check, and the mapping would be gone for
   * the right reason. */
  void *big = M(malloc)(6 << 20);
  memset(big, 1, 6 << 20);
  jw_reclaim_hold(); /* a free takes the token only with a try: no wait */
  M(free)(big);
  jw_stats s6 = lstats();
  jw_reclaim_unhold();
  CHECK(s6.huge_kept_bytes >= (6u << 20), "a freed 6 MiB mapping was not kept");
  int huge_aged = TEST_WAIT_FOR(lstats().huge_kept_bytes == 0, HANG);
  CHECK(huge_aged, "a kept direct mapping was not unmapped by the aging pass (%llu bytes kept)",
        (unsigned long long)lstats().huge_kept_bytes);
  printf("tiers: a freed 6 MiB direct mapping was kept, then unmapped by the reclaimer\n");

  /* The owner never waits for its pool lock: hold it as the reclaimer does,
   * then empty and refill slabs (pool puts and takes). */
  void *warm = M(malloc)(48);
  jw_tcache *tc = jw_tls_state.tc;
  CHECK(tc != NULL, "no thread cache");
  if (tc == NULL) return 1;
  CHECK(jw_lock_try(&tc->pool_lock, JW_LK_POOL), "pool lock busy");
  jw_stats s4 = lstats();
  static void *b[84 * 20];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < 84 * 20; i++) b[i] = make(48, (uint64_t)i + 1);
    for (int i = 0; i < 84 * 20; i++) drop(b[i]);
  }
  jw_stats s5 = lstats();
  jw_lock_release(&tc->pool_lock);
  M(free)(warm);
  CHECK(s5.pool_hits == s4.pool_hits, "pool used while its lock was held");
  CHECK(s5.pool_evictions - s4.pool_evictions >= 3 * 18, "emptied slabs did not bypass the held pool (%llu)",
        (unsigned long long)(s5.pool_evictions - s4.pool_evictions));
  printf("tiers: with its pool lock held, the owner freed and allocated 3 x 20 slabs' worth (%llu pages bypassed "
         "the pool, no wait)\n",
         (unsigned long long)(s5.pool_evictions - s4.pool_evictions));
  return test_failures() != 0;
}

/* ---- fork ---- */

static _Atomic int churn_stop;

static void *churner(void *arg) {
  uint64_t r = 0xc0ffee + (uint64_t)(uintptr_t)arg;
  uint64_t *live[64] = {0};
  uint64_t id = (uint64_t)(uintptr_t)arg << 28;
  while (!churn_stop) {
    int i = (int)(rng_next(&r) % 64);
    if (live[i]) drop(live[i]);
    size_t n = draw(&r);
    live[i] = make(n > (64u << 10) ? (64u << 10) : n, ++id);
  }
  for (int i = 0; i < 64; i++)
    if (live[i]) drop(live[i]);
  return NULL;
}

/* The child: its inherited blocks are intact, it allocates and frees across
 * the tiers, and its own reclaim thread runs a cycle. Exit status: 0 ok. */
static void child_work(uint64_t **mine, int n) {
  for (int i = 0; i < n; i++)
    if (!intact(mine[i])) _exit(3);
  uint64_t r = 77;
  uint64_t *live[32] = {0};
  uint64_t c0 = rstats().cycles;
  for (int k = 0; k < 2000; k++) {
    int i = (int)(rng_next(&r) % 32);
    if (live[i]) {
      if (!intact(live[i])) _exit(4);
      M(free)(live[i]);
    }
    size_t sz = draw(&r);
    live[i] = make(sz > (64u << 10) ? (64u << 10) : sz, (uint64_t)k + 1);
  }
  for (int i = 0; i < 32; i++) M(free)(live[i]);
  if (!TEST_WAIT_FOR(rstats().cycles > c0, HANG)) _exit(5);
  for (int i = 0; i < n; i++)
    if (!intact(mine[i])) _exit(6);
  _exit(0);
}

static void fork_and_check(uint64_t **mine, int n, const char *what) {
  pid_t pid = fork();
  if (pid == 0) child_work(mine, n);
  CHECK(pid > 0, "fork: %s", strerror(errno));
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child forked %s: status %#x", what, st);
}

static void *unhold_later(void *arg) {
  test_sleep_ms(100);
  if (arg) jw_reclaim_test_hold_aging(0);
  else jw_reclaim_test_hold(0);
  return NULL;
}

/* Makes memory due for release, turns the hold on and waits until the
 * reclaimer stops at it: a batch in flight (aging = 0), or an aging pass that
 * took pages out of this thread's idle pool and has not given them back yet
 * (aging = 1). */
static uint64_t *frozen_keep[KEEP]; /* kept live: the slab count behind the pool's watermark */

static void freeze_reclaimer(int aging) {
  uint64_t held = jw_reclaim_test_held();
  if (aging) {
    jw_reclaim_test_hold_aging(1);
    static uint64_t *gone[EMPTY];
    for (int i = 0; i < KEEP; i++) frozen_keep[i] = make(64, (uint64_t)i + 1);
    for (int i = 0; i < EMPTY; i++) gone[i] = make(48, (uint64_t)i + 1);
    for (int i = 0; i < EMPTY; i++) drop(gone[i]); /* about 100 pages in this thread's pool */
  } else {
    jw_reclaim_test_hold(1);
    static void *big[32];
    for (int i = 0; i < 32; i++) big[i] = make(64 * 1024, (uint64_t)i + 1);
    for (int i = 0; i < 32; i++) M(free)(big[i]);
  }
  if (!TEST_WAIT_FOR(jw_reclaim_test_held() > held, HANG)) {
    fprintf(stderr, "the reclaimer never reached the %s hold\n", aging ? "aging" : "batch");
    exit(1);
  }
}

static int case_fork(void) {
  config(1, 1u << 20);
  uint64_t *mine[64];
  for (int i = 0; i < 64; i++) mine[i] = make(16 + (size_t)i * 900, (uint64_t)i + 1);
  /* 1. While threads churn and the reclaim thread cycles every millisecond. */
  pthread_t t[3];
  for (int i = 0; i < 3; i++) pthread_create(&t[i], NULL, churner, (void *)(uintptr_t)(i + 1));
  for (int k = 0; k < 16; k++) {
    fork_and_check(mine, 64, "during churn");
    test_sleep_ms(2);
  }
  churn_stop = 1;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  /* 2. With a batch in flight: fork prepare waits for its system calls. */
  config(20, 0);
  for (int aging = 0; aging <= 1; aging++) {
    freeze_reclaimer(aging);
    pthread_t u;
    pthread_create(&u, NULL, unhold_later, aging ? (void *)1 : NULL);
    fork_and_check(mine, 64, aging ? "while an aging pass held pool pages" : "with a batch in flight");
    pthread_join(u, NULL);
  }
  for (int i = 0; i < 64; i++) check_block(mine[i], "in the parent after the forks");
  for (int i = 0; i < 64; i++) M(free)(mine[i]);
  if (!test_failures())
    printf("fork: 16 forks during churn, one with a batch in flight, one during an aging pass: ok\n");
  return test_failures() != 0;
}

/* ---- exit ---- */

static void exit_handler(void) {
  /* Allocates and frees in every tier while the reclaimer is frozen. */
  for (size_t n = 16; n <= (8u << 20); n *= 3) M(free)(make(n, 1));
  if (write(3, "x", 1) != 1) _exit(9);
}

/* Runs `fn` in a child and waits for it, with a bound for a hang. */
static int child_status(void (*fn)(int), int arg, int *wrote) {
  int fds[2];
  if (pipe(fds) != 0) return -1;
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    if (fds[1] != 3) {
      dup2(fds[1], 3);
      close(fds[1]);
    }
    fn(arg);
    _exit(98);
  }
  close(fds[1]);
  int st = test_wait_child(pid, HANG, "the process");
  char c = 0;
  *wrote = read(fds[0], &c, 1) == 1 && c == 'x';
  close(fds[0]);
  return st;
}

static void exit_in_flight(int aging) {
  config(20, 0);
  freeze_reclaimer(aging);
  atexit(exit_handler);
  exit(7);
}

static int case_exit(void) {
  for (int aging = 0; aging <= 1; aging++) {
    int wrote = 0, st = child_status(exit_in_flight, aging, &wrote);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 7, "exit with %s in flight: status %#x",
          aging ? "an aging pass" : "a release batch", st);
    CHECK(wrote, "the exit handler did not allocate and free");
  }
  if (!test_failures())
    printf("exit: with a release batch and with an aging pass in flight, the process ended at once\n");
  return test_failures() != 0;
}

/* ---- pthread_exit ---- */

static void *short_lived(void *arg) {
  test_sleep_ms(arg ? 50 : 0);
  M(free)(make(100000, 5));
  return NULL;
}

static void all_pthread_exit(int main_first) {
  config(600000, 0);
  /* Memory to age: the reclaim thread starts, and would sleep 600 s. */
  static void *r[16];
  for (int i = 0; i < 16; i++) r[i] = make(64 * 1024, (uint64_t)i + 1);
  for (int i = 0; i < 16; i += 2) M(free)(r[i]);
  if (!TEST_WAIT_FOR(rstats().thread_running, HANG)) _exit(5);
  if (write(3, "x", 1) != 1) _exit(9);
  pthread_t t;
  pthread_create(&t, NULL, short_lived, main_first ? (void *)1 : NULL);
  if (!main_first) pthread_join(t, NULL); /* the helper ends first, main last */
  pthread_exit(NULL);
}

static int case_pthread_exit(void) {
  for (int main_first = 1; main_first >= 0; main_first--) {
    int wrote = 0, st = child_status(all_pthread_exit, main_first, &wrote);
    CHECK(wrote, "the child did not start its reclaim thread");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "every thread ended with pthread_exit (%s last): status %#x",
          main_first ? "a helper" : "main", st);
  }
  if (!test_failures()) printf("pthread_exit: with a 600 s interval, the process ended with its last thread\n");
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  const char *c = argc > 1 ? argv[1] : "";
  if (argc > 2) ops_per_thread = strtoull(argv[2], NULL, 10);
  if (!strcmp(c, "stress")) return case_stress();
  if (!strcmp(c, "tiers")) return case_tiers();
  if (!strcmp(c, "fork")) return case_fork();
  if (!strcmp(c, "exit")) return case_exit();
  if (!strcmp(c, "pthread_exit")) return case_pthread_exit();
  fprintf(stderr, "usage: %s stress [ops]|tiers|fork|exit|pthread_exit\n", argv[0]);
  return 2;
}
