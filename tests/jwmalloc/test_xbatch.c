/* Batched cross-thread frees (docs/design/frontend.md, "Batched remote
 * frees"): a thread that frees blocks of another thread's slab keeps them on
 * a pending chain for one slab and pushes the chain with one CAS. Each case
 * asserts what a user relies on: no block lost, none handed out twice, chains
 * of idle or exiting threads come back, abandoned slabs still return their
 * page, double frees of chained blocks reported.
 *
 * Usage: test_xbatch CASE [SCALE]
 *   stress   producers hand blocks to consumers that exit after a few frees,
 *            go idle holding a chain (then trim or carry on), with and
 *            without a thread cache; every block checked (pattern, and a set
 *            of live pointers: a block handed out while live fails), and
 *            every page back at the end
 *   abandon  the owner exits while a consumer's chain on its slab is
 *            pending; the consumer's later pushes count the abandoned slab
 *            down and the last one (at the consumer's exit) returns the page
 *            (uncached consumer, and one with a cache: the page joins its
 *            pool and leaves with it)
 *   idle     a consumer idles with a chain pending; its malloc_trim, or its
 *            exit, pushes it, and the owner's slab then empties
 *   double   a block on a pending chain freed again by the same thread, by
 *            another thread and by its owner: each reported, nothing lost
 * SCALE: percent of the full size (sanitizer builds).
 * Run with JWMALLOC_RECLAIM=0 (exact page counts).
 */
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "checked_blocks.h"
#include "backend/backend.h"
#include "jwmalloc.h"
#include "thread_test.h"


static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  nanosleep(&ts, NULL);
}

/* ---- the set of live pointers (a block handed out twice while live) ---- */

#define LIVE_SLOTS (1u << 16)
static uintptr_t live_set[LIVE_SLOTS];
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static size_t live_count;

static size_t slot_of(uintptr_t p) { return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ULL >> 48) & (LIVE_SLOTS - 1); }

static void live_add(void *v) {
  uintptr_t p = (uintptr_t)v;
  pthread_mutex_lock(&live_mu);
  size_t i = slot_of(p);
  for (; live_set[i] != 0; i = (i + 1) & (LIVE_SLOTS - 1))
    if (live_set[i] == p) {
      FAIL("block %p handed out while still live", v);
      pthread_mutex_unlock(&live_mu);
      return;
    }
  if (live_count + 1 >= LIVE_SLOTS / 2) FAIL("live set full");
  else {
    live_set[i] = p;
    live_count++;
  }
  pthread_mutex_unlock(&live_mu);
}

/* Removal with backward shift (linear probing, no tombstones). */
static void live_remove(void *v) {
  uintptr_t p = (uintptr_t)v;
  pthread_mutex_lock(&live_mu);
  size_t i = slot_of(p);
  while (live_set[i] != p) {
    if (live_set[i] == 0) {
      FAIL("block %p freed but not live", v);
      pthread_mutex_unlock(&live_mu);
      return;
    }
    i = (i + 1) & (LIVE_SLOTS - 1);
  }
  live_set[i] = 0;
  live_count--;
  for (size_t j = (i + 1) & (LIVE_SLOTS - 1); live_set[j] != 0; j = (j + 1) & (LIVE_SLOTS - 1)) {
    size_t h = slot_of(live_set[j]);
    /* Move j back to the hole i when its home is not in (i, j]. */
    if (((j - h) & (LIVE_SLOTS - 1)) >= ((j - i) & (LIVE_SLOTS - 1))) {
      live_set[i] = live_set[j];
      live_set[j] = 0;
      i = j;
    }
  }
  pthread_mutex_unlock(&live_mu);
}

/* ---- stress: producers, consumers that exit, idle, trim ---- */

#define NPROD 2
#define QCAP 512
typedef struct queue {
  pthread_mutex_t mu;
  void *item[QCAP];
  size_t head, tail;
  int done;
} queue;
static queue q[NPROD];
static atomic_long consumed;
static atomic_int stop_runners;

static void *producer(void *arg) {
  unsigned i = (unsigned)(uintptr_t)arg;
  uint64_t s = 0x9e3779b97f4a7c15ULL * (i + 1);
  long n = scaled(100000);
  for (long k = 0; k < n; k++) {
    /* A few sizes, so that runs of frees fall into one slab (chains form). */
    static const size_t sizes[] = {16, 32, 48, 64, 112, 256, 1000};
    size_t size = sizes[rnd(&s) % 7];
    void *p = make(size, rnd(&s));
    if (p == NULL) continue;
    live_add(p);
    for (unsigned round = 0;; test_backoff(&round)) { /* the queue is full: its consumer is behind */
      pthread_mutex_lock(&q[i].mu);
      if (q[i].tail - q[i].head < QCAP) {
        q[i].item[q[i].tail++ % QCAP] = p;
        pthread_mutex_unlock(&q[i].mu);
        break;
      }
      pthread_mutex_unlock(&q[i].mu);
    }
  }
  pthread_mutex_lock(&q[i].mu);
  q[i].done = 1;
  pthread_mutex_unlock(&q[i].mu);
  return NULL;
}

/* Takes up to `max` blocks from queue i. Returns how many; -1 when the queue
 * is done and empty. */
static int take(unsigned i, void **out, int max) {
  pthread_mutex_lock(&q[i].mu);
  int n = 0;
  while (n < max && q[i].head != q[i].tail) out[n++] = q[i].item[q[i].head++ % QCAP];
  int done = q[i].done;
  pthread_mutex_unlock(&q[i].mu);
  return n == 0 && done ? -1 : n;
}

enum { K_SHORT, K_IDLE_TRIM, K_IDLE, K_LONG, K_KINDS };

typedef struct consumer_arg {
  unsigned kind, gen;
  uint64_t seed;
} consumer_arg;

/* Frees from both queues in bursts; `kind` decides when it idles, trims or
 * exits. Half the generations allocate once first (a thread cache), the
 * other half never do (chains of a thread without a cache). */
/* "Never runs out": 2^40 where long has the bits. */
#if LONG_MAX > 0x7fffffffL
#define LONG_BUDGET (1L << 40)
#else
#define LONG_BUDGET LONG_MAX
#endif
static void *consumer(void *v) {
  consumer_arg *a = v;
  uint64_t s = a->seed;
  if (a->gen & 1) jw_free(jw_malloc(24));
  long budget = a->kind == K_LONG ? LONG_BUDGET : 1 + (long)(rnd(&s) % 400);
  int finished[NPROD] = {0};
  while (budget > 0) {
    int idle = 1, all_done = 1;
    for (unsigned i = 0; i < NPROD && budget > 0; i++) {
      void *b[64];
      int n = finished[i] ? -1 : take(i, b, (int)(1 + rnd(&s) % 64));
      if (n < 0) {
        finished[i] = 1;
        continue;
      }
      all_done = 0;
      for (int k = 0; k < n; k++) {
        live_remove(b[k]);
        check_and_free(b[k]);
      }
      if (n) idle = 0;
      budget -= n;
      atomic_fetch_add(&consumed, n);
    }
    if (all_done) break;
    if (a->kind == K_IDLE || a->kind == K_IDLE_TRIM) {
      if (rnd(&s) % 8 == 0) {
        sleep_us(200 + (long)(rnd(&s) % 800)); /* holding its chain */
        if (a->kind == K_IDLE_TRIM) jw_malloc_trim(0);
      }
    } else if (idle) {
      sched_yield();
    }
  }
  return NULL; /* exit: the hook pushes the chain */
}

/* One consumer slot: consumers of one kind, one after another, until every
 * queue is done and empty. */
static void *runner(void *v) {
  unsigned kind = (unsigned)(uintptr_t)v;
  for (unsigned gen = 0;; gen++) {
    consumer_arg a = {kind, gen, 0x12345678ULL * (gen + 1) + kind};
    pthread_t t;
    if (pthread_create(&t, NULL, consumer, &a) != 0) {
      FAIL("pthread_create");
      return NULL;
    }
    pthread_join(t, NULL);
    if (atomic_load(&stop_runners)) return NULL;
    int all_done = 1;
    for (unsigned i = 0; i < NPROD; i++) {
      pthread_mutex_lock(&q[i].mu);
      all_done &= q[i].done && q[i].head == q[i].tail;
      pthread_mutex_unlock(&q[i].mu);
    }
    if (all_done) return NULL;
  }
}

static int case_stress(void) {
  jw_malloc_trim(0);
  jw_stats a = st();
  for (unsigned i = 0; i < NPROD; i++) pthread_mutex_init(&q[i].mu, NULL);
  pthread_t tp[NPROD], tr[K_KINDS];
  for (unsigned i = 0; i < NPROD; i++) pthread_create(&tp[i], NULL, producer, (void *)(uintptr_t)i);
  for (unsigned k = 0; k < K_KINDS; k++) pthread_create(&tr[k], NULL, runner, (void *)(uintptr_t)k);
  for (unsigned i = 0; i < NPROD; i++) pthread_join(tp[i], NULL);
  for (unsigned k = 0; k < K_KINDS; k++) pthread_join(tr[k], NULL);
  jw_malloc_trim(0);
  jw_stats b = st();
  long want = NPROD * scaled(100000);
  CHECK(atomic_load(&consumed) == want, "stress: %ld blocks freed, %ld produced", atomic_load(&consumed), want);
  CHECK(live_count == 0, "stress: %zu blocks still in the live set", live_count);
  uint64_t cross = b.cross_thread_frees - a.cross_thread_frees;
  /* A consumer with a cache adopts the slabs of exited producers that it
   * frees into (frontend.md, "Thread exit, abandoned slabs and adoption"):
   * its later frees into an adopted slab are its own, at most a slab's blocks
   * (252) per adoption. Every other free is counted as a cross-thread one. */
  uint64_t adopted = b.adopted_slabs - a.adopted_slabs;
  CHECK(cross <= (uint64_t)want && cross + adopted * 252 >= (uint64_t)want,
        "stress: %llu cross-thread frees counted, want %ld less at most 252 per adopted slab (%llu adopted)",
        (unsigned long long)cross, want, (unsigned long long)adopted);
  long growth = (long)b.page_source_live_bytes - (long)a.page_source_live_bytes;
  /* Every thread but this one exited and every block is free: every slab
   * page is back (a block lost on a chain would keep its page). */
  if (growth > 0) {
    /* Which kind of failure: ranges left waiting on the backend's deferred
     * list (a lock holder files them: the quiet figures) or pages still live. */
    jw_backend_stats q;
    jw_backend_get_stats_quiet(&q);
    FAIL("stress: %ld bytes of pages still live after every block was freed (%ld after a lock holder filed "
         "the deferred frees; %llu deferred in all)",
         growth, (long)q.pages.live_bytes - (long)a.page_source_live_bytes, (unsigned long long)q.deferred_frees);
  }
  printf("stress: %ld blocks, %llu consumer threads, %llu abandoned slabs (%llu adopted), page-source live bytes %+ld\n",
         want, (unsigned long long)(b.threads_exited - a.threads_exited - NPROD),
         (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs), (unsigned long long)adopted, growth);
  return 0;
}

/* ---- a deterministic owner / consumer pair ---- */

#define NB 60 /* blocks of 32 bytes: one slab (126 blocks) */
static void *blocks[NB];

/* The owner: one slab's worth of blocks handed out, then it waits until
 * step 2 and exits. */
static void *owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(32, (uint64_t)i + 7);
  set_step(1);
  wait_step(2);
  return NULL;
}

static long pages_live(void) { return (long)st().page_source_live_bytes; }

/* abandon: consumer frees 10 blocks (a chain, not pushed: below the bound),
 * the owner exits (its slab abandoned with 60 blocks out, the chain's 10
 * among them), the consumer frees the other 50 (pushes at the bound count
 * the slab down) and exits with a chain pending: its exit pushes the last
 * blocks and returns the page. */
static int cached_consumer;
static void *abandon_consumer(void *arg) {
  (void)arg;
  if (cached_consumer) jw_free(jw_malloc(24));
  wait_step(1);
  for (int i = 0; i < 10; i++) check_and_free(blocks[i]);
  set_step(2);
  wait_step(5); /* the owner exited */
  for (int i = 10; i < NB; i++) check_and_free(blocks[i]);
  return NULL;
}

static int case_abandon(void) {
  for (cached_consumer = 0; cached_consumer < 2; cached_consumer++) {
    jw_malloc_trim(0);
    long before = pages_live();
    jw_stats a = st();
    pthread_t to, tc;
    start_step_pair(&to, owner, &tc, abandon_consumer);
    pthread_join(to, NULL);
    jw_stats mid = st();
    CHECK(mid.abandoned_slabs == a.abandoned_slabs + 1, "abandon: the owner's slab was not abandoned (%llu)",
          (unsigned long long)(mid.abandoned_slabs - a.abandoned_slabs));
    set_step(5);
    pthread_join(tc, NULL);
    jw_malloc_trim(0);
    long after = pages_live();
    CHECK(after <= before, "abandon (%s consumer): %ld bytes of pages live after the abandoned slab's last block",
          cached_consumer ? "cached" : "uncached", after - before);
    /* The page can be used again: one slab's worth of blocks, each once. */
    for (int i = 0; i < NB; i++) blocks[i] = make(32, (uint64_t)i);
    for (int i = 0; i < NB; i++) live_add(blocks[i]);
    for (int i = 0; i < NB; i++) {
      live_remove(blocks[i]);
      check_and_free(blocks[i]);
    }
  }
  printf("abandon: chains pending when the owner exited came back (uncached and cached consumer)\n");
  return 0;
}

/* idle: the consumer frees all 60 blocks (pushes at the bound, the rest
 * left on its chain) and idles; the owner's trim cannot empty its slab (at
 * most that one page is held). Then the consumer trims (or exits), and the
 * owner's exit finds every block of its slab back: the page is given back,
 * not abandoned. */
static int consumer_exits;
static void *idle_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < NB; i++) check_and_free(blocks[i]);
  set_step(2);
  wait_step(3); /* idle, holding the chain, while the owner trims */
  if (consumer_exits) return NULL;
  jw_malloc_trim(0);
  set_step(4);
  wait_step(6);
  return NULL;
}

static void *idle_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(32, (uint64_t)i + 7);
  set_step(1);
  wait_step(2);
  jw_malloc_trim(0); /* the slab keeps the blocks of the pending chain */
  set_step(3);
  wait_step(4);
  return NULL; /* exit: a slab with every block back is given back, not abandoned */
}

static int case_idle(void) {
  for (consumer_exits = 0; consumer_exits < 2; consumer_exits++) {
    jw_malloc_trim(0);
    long base = pages_live();
    pthread_t to, tc;
    start_step_pair(&to, idle_owner, &tc, idle_consumer);
    wait_step(3);
    long pinned = pages_live() - base;
    /* What an idle freer holds: blocks of one slab, so one page at most. */
    long pg = 4096;
    jw_option_get("PAGE_SIZE", &pg); /* the 16 KiB test mode too */
    CHECK(pinned <= pg, "idle: %ld bytes of pages live while the consumer idles (one page at most)", pinned);
    jw_stats a = st();
    if (consumer_exits) {
      pthread_join(tc, NULL);
      set_step(4);
    } else {
      wait_step(4);
    }
    pthread_join(to, NULL);
    CHECK(st().abandoned_slabs == a.abandoned_slabs,
          "idle (%s): the owner's slab was abandoned at its exit: the consumer's chain was not pushed",
          consumer_exits ? "consumer exited" : "consumer trimmed");
    long after = pages_live() - base;
    CHECK(after <= 0, "idle: %ld bytes of pages live after every block came back", after);
    set_step(6);
    if (!consumer_exits) pthread_join(tc, NULL);
    printf("idle (%s): %ld bytes of pages live while the chain was pending, %ld after\n",
           consumer_exits ? "consumer exits" : "consumer trims", pinned, after);
  }
  return 0;
}

/* double: a block on a pending chain freed again. */
static void *dbl_same(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < 5; i++) check_and_free(blocks[i]); /* a chain of 5 */
  jw_stats a = st();
  jw_free(blocks[2]); /* still on this thread's chain */
  jw_stats b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "double: a second free of a block on the freer's own chain was "
                                                "not reported");
  set_step(2);
  wait_step(3); /* another thread and the owner free chained blocks again */
  for (int i = 5; i < NB; i++) check_and_free(blocks[i]);
  return NULL;
}

static void *dbl_other(void *arg) {
  (void)arg;
  jw_stats a = st();
  jw_free(blocks[3]); /* on the first consumer's chain */
  jw_stats b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "double: a free by another thread of a block on a pending chain "
                                                "was not reported");
  return NULL;
}

static void *dbl_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(32, (uint64_t)i + 7);
  set_step(1);
  wait_step(2);
  jw_stats a = st();
  jw_free(blocks[4]); /* the owner's own slab: its fast path sees FREE_KEY */
  jw_stats b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "double: the owner's free of a block on a pending chain was not "
                                                "reported");
  pthread_t t;
  pthread_create(&t, NULL, dbl_other, NULL);
  pthread_join(t, NULL);
  set_step(3);
  wait_step(4);
  return NULL;
}

static int case_double(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  jw_malloc_trim(0);
  long base = pages_live();
  pthread_t to, tc;
  start_step_pair(&to, dbl_owner, &tc, dbl_same);
  pthread_join(tc, NULL);
  set_step(4);
  pthread_join(to, NULL);
  jw_malloc_trim(0);
  long after = pages_live() - base;
  /* The reported frees were ignored: every block was freed once, the page is
   * back (a double free that reached a chain would corrupt the count). */
  CHECK(after <= 0, "double: %ld bytes of pages live after every block was freed once", after);
  jw_option_set("ABORT_ON_ERROR", 1);
  printf("double: frees of a chained block by the same thread, another thread and the owner reported\n");
  return 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"stress", case_stress}, {"abandon", case_abandon}, {"idle", case_idle}, {"double", case_double},
  };
  return TEST_MAIN(cases);
}
