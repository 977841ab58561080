/* breakit4: hostile cases for batched cross-thread frees (docs/design/
 * frontend.md, "Batched remote frees") and placement on demand (backend.md
 * 7b, reclamation.md 6a). Each case asserts what a user relies on.
 *
 * Usage: test_breakit4 CASE [SCALE]
 *   keys       every pthread key taken before jwmalloc's constructor
 *              (BREAKIT4_EXHAUST_KEYS=1 in the environment: a constructor of
 *              priority 101 takes them): jwmalloc has no exit hook, so it
 *              must not touch the program's keys, and a thread's
 *              cross-thread frees must still reach their slab when it exits
 *   lastround  a thread's first cross-thread frees come from a key's
 *              destructor in glibc's last destructor round (after
 *              PTHREAD_DESTRUCTOR_ITERATIONS - 1 rounds of re-setting it):
 *              jwmalloc's exit hook registered then never runs; the frees
 *              must still reach their slab (its page comes back)
 *   placerace  jw_option_set("PLACEMENT", 0/1) from two threads at once,
 *              many rounds: afterwards the option, the backend's mode and
 *              the switch in force agree
 *   flipexit   threads that allocate in every tier, free across threads
 *              (chains pending), trim and exit, while three threads flip
 *              PLACEMENT and raise the trim epoch (run with JWMALLOC_CHECK=1:
 *              queues checked at every conversion, the backend's trees on
 *              every operation): every block's pattern intact, nothing live
 *              at the end, backend check clean
 *   fork       a thread forks with a chain pending on another thread's slab:
 *              in the child, a second free of a chained block is reported
 *              (abort off), the chain is pushed by malloc_trim, allocation
 *              works; in the parent the chain still reaches its slab
 *   dblabandon a block on a pending chain freed again (abort off) after its
 *              slab's owner exited: reported once, the abandoned slab's count
 *              not lowered by it (the other blocks' frees are valid, none
 *              reported), and the page comes back after the last block
 *   keys40     (the drop-in build, BREAKIT4_KEYS40=1: 40 keys taken before
 *              jwmalloc's, so its exit key needs glibc's second-level array,
 *              allocated by calloc, i.e. by jwmalloc itself, on each thread's
 *              first pthread_setspecific) a thread whose first call is a
 *              cross-thread free, and one whose first call is a malloc, each
 *              leave a chain at exit: both chains reach the slab
 *   dtorchain  a key's destructor that runs before jwmalloc's (its key made
 *              first) frees blocks of another thread's slab (a chain): the
 *              chain reaches its slab (jwmalloc's hook, later, pushes it)
 *   dtorexit   the same destructor then calls pthread_exit (undefined by
 *              POSIX): the chain should still reach its slab (not in the
 *              default run: glibc 2.36 runs no further destructor, so it does
 *              not; see the report)
 *   sigfree    cross-thread frees from a signal handler (SIGPROF at a high
 *              rate) while the interrupted thread makes cross-thread frees of
 *              the same class: async-signal frees are not allowed by POSIX;
 *              this shows whether they corrupt silently (not in the default
 *              run: see the report)
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "backend/page_source.h"
#include "checked_blocks.h"
#include "jwmalloc.h"
#include "thread_test.h"


static long pages_live(void) { return (long)st().page_source_live_bytes; }


/* One slab's worth of blocks of one class, handed out by an owner thread
 * (32 bytes: 126 blocks a slab; 60 stay in its current slab). */
#define NB 60
#define BSIZE 32
static void *blocks[NB];

/* The owner of `blocks`: allocates them (step 1), waits until the
 * consumer is done (step 3), frees the rest itself, trims, and measures
 * whether its slab went back (step 4 reports). */
static long owner_before, owner_after;
static int owner_first_free = 10; /* blocks [0, first) are the consumer's */
static void *owner_thread(void *arg) {
  (void)arg;
  jw_free(jw_malloc(BSIZE)); /* a cache, and a slab of the class */
  jw_malloc_trim(0);
  owner_before = pages_live();
  for (int i = 0; i < NB; i++) blocks[i] = make(BSIZE, (uint64_t)i + 11);
  set_step(1);
  wait_step(3);
  for (int i = owner_first_free; i < NB; i++) check_and_free(blocks[i]);
  jw_malloc_trim(0);
  owner_after = pages_live();
  set_step(4);
  wait_step(5);
  return NULL;
}

/* Runs owner_thread against `consumer` (which waits for step 1, frees
 * blocks [0, owner_first_free) and exits; `ready`, when not NULL, is
 * awaited before the owner starts); then the owner frees the rest, trims and
 * measures. Returns with owner_before/owner_after set. */
static void run_owner_consumer(void *(*consumer)(void *), atomic_int *ready) {
  step = 0;
  pthread_t to, tc;
  pthread_create(&tc, NULL, consumer, NULL);
  if (ready)
    TEST_WAIT_UNTIL(atomic_load(ready));
  pthread_create(&to, NULL, owner_thread, NULL);
  pthread_join(tc, NULL);
  set_step(3);
  wait_step(4);
  set_step(5);
  pthread_join(to, NULL);
}

/* ---- keys: no exit hook ---- */

static pthread_key_t prog_keys[PTHREAD_KEYS_MAX + 1];
static int prog_nkeys;
static atomic_int dtor_bad, dtor_calls;
static char sentinel[4];

static void prog_dtor(void *v) {
  atomic_fetch_add(&dtor_calls, 1);
  if (v != &sentinel[0] && v != &sentinel[1]) atomic_fetch_add(&dtor_bad, 1);
}

/* Before jwmalloc's own constructor (priority 101 runs before the default),
 * when asked: every key the process can have. */
static pthread_key_t early_key;
static void early_dtor(void *v);
__attribute__((constructor(101))) static void exhaust_keys(void) {
  if (getenv("BREAKIT4_EXHAUST_KEYS") == NULL) {
    pthread_key_create(&early_key, early_dtor); /* before jwmalloc's exit key: its destructor runs first */
    if (getenv("BREAKIT4_KEYS40"))
      while (prog_nkeys < 40 && pthread_key_create(&prog_keys[prog_nkeys], prog_dtor) == 0) prog_nkeys++;
    return;
  }
  while (prog_nkeys < PTHREAD_KEYS_MAX + 1 && pthread_key_create(&prog_keys[prog_nkeys], prog_dtor) == 0)
    prog_nkeys++;
}

static atomic_int consumer_ready;
static void *keys_consumer(void *arg) {
  (void)arg;
  for (int i = 0; i < prog_nkeys; i++) pthread_setspecific(prog_keys[i], &sentinel[0]);
  /* A thread cache first (without an exit hook it is never recycled: its
   * pages stay, so they are taken before the owner measures). */
  jw_free(jw_malloc(24));
  jw_free(jw_malloc(3000));
  atomic_store(&consumer_ready, 1);
  wait_step(1);
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]); /* cross-thread: a chain if hooked */
  for (int i = 0; i < prog_nkeys; i++)
    if (pthread_getspecific(prog_keys[i]) != &sentinel[0]) {
      FAIL("keys: jwmalloc changed the program's key %u (value %p)", (unsigned)prog_keys[i],
           pthread_getspecific(prog_keys[i]));
      break;
    }
  return NULL;
}

static int case_keys(void) {
  if (getenv("BREAKIT4_EXHAUST_KEYS") == NULL) {
    fprintf(stderr, "keys: run with BREAKIT4_EXHAUST_KEYS=1\n");
    return 2;
  }
  pthread_key_t extra;
  if (pthread_key_create(&extra, NULL) == 0) {
    printf("keys: SKIP: the keys could not all be taken (%d)\n", prog_nkeys);
    return 77;
  }
  run_owner_consumer(keys_consumer, &consumer_ready);
  CHECK(atomic_load(&dtor_bad) == 0, "keys: a program key's destructor got %d values it never set",
        atomic_load(&dtor_bad));
  CHECK(owner_after <= owner_before,
        "keys: the consumer's cross-thread frees never reached the slab: %ld bytes still live after the owner "
        "freed the rest and trimmed",
        owner_after - owner_before);
  if (!test_failures()) printf("keys: %d keys taken before jwmalloc; program keys untouched, %d destructor calls, frees reached the "
         "slab\n",
         prog_nkeys, atomic_load(&dtor_calls));
  return test_failures() ? 1 : 0;
}

/* ---- lastround: first frees in the last destructor round ---- */

static pthread_key_t late_key;
static int late_rounds;

static void late_dtor(void *v) {
  (void)v;
  if (++late_rounds < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(late_key, &sentinel[1]); /* run again next round */
    return;
  }
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]);
}

static void *late_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  pthread_setspecific(late_key, &sentinel[1]);
  return NULL; /* its first frees come from late_dtor */
}

static int case_lastround(void) {
  pthread_key_create(&late_key, late_dtor);
  run_owner_consumer(late_consumer, NULL);
  CHECK(late_rounds == PTHREAD_DESTRUCTOR_ITERATIONS, "lastround: the destructor ran %d rounds", late_rounds);
  CHECK(owner_after <= owner_before,
        "lastround: frees made in the last destructor round never reached the slab: %ld bytes still live after "
        "the owner freed the rest and trimmed",
        owner_after - owner_before);
  if (!test_failures()) printf("lastround: frees from the last destructor round reached the slab\n");
  return test_failures() ? 1 : 0;
}

/* ---- placerace: concurrent switches agree at the end ---- */

static pthread_barrier_t bar;
static long race_rounds;
static atomic_int race_stop;

static void *racer(void *arg) {
  long me = (long)arg;
  for (long r = 0; r < race_rounds; r++) {
    pthread_barrier_wait(&bar);
    /* Both threads set, one 0 and one 1 (which one alternates). */
    CHECK(jw_option_set("PLACEMENT", (me + r) & 1) == 0, "placerace: jw_option_set failed");
    pthread_barrier_wait(&bar);
    pthread_barrier_wait(&bar); /* main checks in between */
  }
  return NULL;
}

static int case_placerace(void) {
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
  CHECK(bad == 0, "placerace: %ld of %ld rounds ended with the mode and the switch in force disagreeing (first at "
        "round %ld): PLACEMENT reads one thing, the tiers do the other",
        bad, race_rounds, first_bad);
  CHECK(opt_mode_differ == 0, "placerace: %ld of %ld rounds ended with jw_option_get(PLACEMENT) and the backend's "
        "mode disagreeing", opt_mode_differ, race_rounds);
  printf("placerace: %ld rounds of two concurrent switches; %ld disagreements (switch), %ld (option vs mode)\n",
         race_rounds, bad, opt_mode_differ);
  return test_failures() ? 1 : 0;
}

/* ---- flipexit: flips during trims, chains and thread exits ---- */

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
    CHECK(jw_option_set("PLACEMENT", m) == 0, "flipexit: jw_option_set(%ld)", m);
    if (rnd(&s) & 1) jw_pages_place_trim();
    atomic_fetch_add(&flips, 1);
    if (me == 0 && rnd(&s) % 64 == 0) jw_malloc_trim(0);
    struct timespec ts = {0, 20000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static int case_flipexit(void) {
  pthread_t fl[3];
  for (long i = 0; i < 3; i++) pthread_create(&fl[i], NULL, flipper, (void *)i);
  long gens = scaled(12);
  for (long g = 0; g < gens; g++) {
    pthread_t w[3];
    for (long i = 0; i < 3; i++) pthread_create(&w[i], NULL, churner, (void *)(g * 3 + i + 1));
    for (int i = 0; i < 3; i++) pthread_join(w[i], NULL);
    char err[256];
    CHECK(jw_backend_check_all(err, sizeof err) == 0, "flipexit: backend check after generation %ld: %s", g, err);
  }
  atomic_store(&race_stop, 1);
  for (int i = 0; i < 3; i++) pthread_join(fl[i], NULL);
  void *o;
  while ((o = trade(NULL)) != NULL) check_and_free(o), atomic_fetch_add(&checked_blocks, 1);
  jw_option_set("PLACEMENT", 0);
  jw_malloc_trim(0);
  char err[256];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "flipexit: backend check at the end: %s", err);
  jw_stats e = st();
  CHECK(e.small_mallocs == e.small_frees, "flipexit: small mallocs %llu != frees %llu with every block freed",
        (unsigned long long)e.small_mallocs, (unsigned long long)e.small_frees);
  CHECK(e.page_source_live_bytes == 0 || e.page_source_live_bytes <= 64 * 4096,
        "flipexit: %llu bytes of pages live with every block freed and every thread gone",
        (unsigned long long)e.page_source_live_bytes);
  printf("flipexit: %ld generations of 3 threads, %ld flips, %ld blocks checked, %llu bytes live at the end\n",
         gens, atomic_load(&flips), atomic_load(&checked_blocks), (unsigned long long)e.page_source_live_bytes);
  return test_failures() ? 1 : 0;
}

/* ---- fork with a chain pending ---- */

static void *fork_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]); /* a chain of 10, pending */
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: a second free of a chained block is a double free. */
    jw_option_set("ABORT_ON_ERROR", 0);
    long inv0 = (long)st().invalid_frees;
    jw_free(blocks[3]);
    long inv1 = (long)st().invalid_frees;
    jw_malloc_trim(0); /* pushes the chain */
    for (int i = 0; i < 1000; i++) {
      void *p = make(16 + (size_t)i % 500, (uint64_t)i);
      if (p == NULL) _exit(3);
      check_and_free(p);
    }
    _exit(inv1 == inv0 + 1 && test_failures() == 0 ? 0 : 4);
  }
  int status = 0;
  CHECK(pid > 0 && waitpid(pid, &status, 0) == pid, "fork: fork/waitpid failed");
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
        "fork: the child failed (status %#x: 4 = double free of a chained block not reported)", status);
  return NULL; /* the chain is pushed at exit */
}

static int case_fork(void) {
  run_owner_consumer(fork_consumer, NULL);
  CHECK(owner_after <= owner_before, "fork: the forking thread's chain never reached the slab (%ld bytes live)",
        owner_after - owner_before);
  if (!test_failures()) printf("fork: chained block's second free reported in the child, chain pushed in both\n");
  return test_failures() ? 1 : 0;
}


/* ---- dblabandon: a chained block freed again after its owner exited ---- */

static void *exiting_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(BSIZE, (uint64_t)i + 5);
  set_step(1);
  wait_step(2);
  return NULL; /* exits: its slab is abandoned with every block out */
}

static void *dbl_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < 10; i++) check_and_free(blocks[i]); /* a chain of 10, pending */
  set_step(2);
  wait_step(3);
  jw_free(blocks[3]); /* again: on our own pending chain, owner gone */
  set_step(4);
  wait_step(5);
  for (int i = 10; i < NB; i++) check_and_free(blocks[i]);
  return NULL; /* its exit pushes the chain: the slab's last blocks */
}

static int case_dblabandon(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  jw_malloc_trim(0);
  long before = pages_live();
  jw_stats a = st();
  step = 0;
  pthread_t to, tc;
  pthread_create(&to, NULL, exiting_owner, NULL);
  pthread_create(&tc, NULL, dbl_consumer, NULL);
  pthread_join(to, NULL);
  set_step(3);
  wait_step(4);
  jw_free(blocks[5]); /* and from a third thread */
  jw_stats m = st();
  CHECK(m.invalid_frees == a.invalid_frees + 2, "dblabandon: %llu of 2 double frees of chained blocks reported",
        (unsigned long long)(m.invalid_frees - a.invalid_frees));
  set_step(5);
  pthread_join(tc, NULL);
  jw_malloc_trim(0);
  jw_stats e = st();
  CHECK(e.invalid_frees == m.invalid_frees, "dblabandon: %llu valid frees reported as bad after the double frees",
        (unsigned long long)(e.invalid_frees - m.invalid_frees));
  CHECK(e.abandoned_slabs >= a.abandoned_slabs + 1, "dblabandon: the owner's slab was not abandoned");
  CHECK((long)e.page_source_live_bytes <= before, "dblabandon: %ld bytes live after every block was freed",
        (long)e.page_source_live_bytes - before);
  jw_option_set("ABORT_ON_ERROR", 1);
  if (!test_failures()) printf("dblabandon: double frees of a chained block of an abandoned slab reported, page back\n");
  return test_failures() ? 1 : 0;
}

/* ---- keys40: jwmalloc's exit key beyond glibc's first 32 ---- */

static int k40_malloc_first;
static void *k40_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  if (k40_malloc_first) free(malloc(40));
  for (int i = 0; i < owner_first_free; i++) check_and_free(blocks[i]);
  return NULL; /* its exit pushes the chain */
}

static int case_keys40(void) {
  if (prog_nkeys < 40) {
    fprintf(stderr, "keys40: run with BREAKIT4_KEYS40=1\n");
    return 2;
  }
  for (k40_malloc_first = 0; k40_malloc_first < 2; k40_malloc_first++) {
    run_owner_consumer(k40_consumer, NULL);
    CHECK(owner_after <= owner_before,
          "keys40 (first call %s): the consumer's chain never reached the slab (%ld bytes live)",
          k40_malloc_first ? "malloc" : "a cross-thread free", owner_after - owner_before);
  }
  if (!test_failures()) printf("keys40: exit key past glibc's first 32: chains of both threads reached the slab\n");
  return test_failures() ? 1 : 0;
}

/* ---- dtorexit: pthread_exit inside a destructor, chain pending ---- */

static int dtor_do_exit;
static void early_dtor(void *v) {
  (void)v;
  for (int i = 1; i < owner_first_free; i++) check_and_free(blocks[i]); /* joins the chain of blocks[0] */
  if (dtor_do_exit) pthread_exit(NULL);
}

static void *dtorexit_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  check_and_free(blocks[0]); /* registers the exit hook (uncached), starts a chain */
  pthread_setspecific(early_key, &sentinel[2]);
  return NULL;
}

static int case_dtorexit(int do_exit) {
  dtor_do_exit = do_exit;
  run_owner_consumer(dtorexit_consumer, NULL);
  CHECK(owner_after <= owner_before,
        "%s: the chain of a thread that freed in a destructor run before jwmalloc's%s never reached the slab "
        "(%ld bytes live)",
        do_exit ? "dtorexit" : "dtorchain", do_exit ? " and called pthread_exit there" : "",
        owner_after - owner_before);
  if (!test_failures())
    printf("%s: frees in a destructor run before jwmalloc's%s: the chain reached its slab\n",
           do_exit ? "dtorexit" : "dtorchain", do_exit ? ", then pthread_exit" : "");
  return test_failures() ? 1 : 0;
}

/* ---- sigfree: frees from a signal handler ---- */

#define SIG_NB 4096
static void *sig_blocks[SIG_NB];
static volatile sig_atomic_t sig_next, sig_count;
static void **main_blocks;
static long main_nb;

static void on_prof(int sig) {
  (void)sig;
  int i = sig_next;
  if (i < SIG_NB) {
    sig_next = i + 1;
    jw_free(sig_blocks[i]); /* another thread's block, the class the main thread frees */
    sig_count++;
  }
}

static pthread_t main_thread;
static atomic_int sig_stop;
/* Signals the main thread as fast as it can (a timer's rate is too low to
 * land inside a chain's few instructions often). */
static void *sig_killer(void *arg) {
  (void)arg;
  while (!atomic_load(&sig_stop) && sig_next < SIG_NB) {
    pthread_kill(main_thread, SIGPROF);
    for (volatile int i = 0; i < 200; i++) {
    }
  }
  return NULL;
}

static void *sig_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < SIG_NB; i++) sig_blocks[i] = jw_malloc(BSIZE);
  for (long i = 0; i < main_nb; i++) main_blocks[i] = jw_malloc(BSIZE);
  set_step(1);
  wait_step(3);
  jw_malloc_trim(0);
  owner_after = pages_live();
  set_step(4);
  wait_step(5);
  return NULL;
}

static int case_sigfree(void) {
  main_nb = scaled(2000000);
  main_blocks = calloc((size_t)main_nb, sizeof *main_blocks);
  step = 0;
  long before = pages_live();
  jw_stats a = st();
  pthread_t to;
  pthread_create(&to, NULL, sig_owner, NULL);
  wait_step(1);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_prof;
  sigaction(SIGPROF, &sa, NULL);
  main_thread = pthread_self();
  pthread_t killer;
  pthread_create(&killer, NULL, sig_killer, NULL);
  for (long i = 0; i < main_nb; i++) jw_free(main_blocks[i]);
  atomic_store(&sig_stop, 1);
  pthread_join(killer, NULL);
  for (int i = sig_next; i < SIG_NB; i++) jw_free(sig_blocks[i]);
  jw_malloc_trim(0); /* pushes the main thread's chains */
  set_step(3);
  wait_step(4);
  set_step(5);
  pthread_join(to, NULL);
  jw_stats e = st();
  CHECK(e.small_mallocs - a.small_mallocs == e.small_frees - a.small_frees,
        "sigfree: %llu small mallocs, %llu frees", (unsigned long long)(e.small_mallocs - a.small_mallocs),
        (unsigned long long)(e.small_frees - a.small_frees));
  CHECK(owner_after <= before, "sigfree: %ld bytes of pages still live with every block freed (%d frees from the "
        "handler): blocks lost from a chain", owner_after - before, (int)sig_count);
  printf("sigfree: %ld frees, %d of them from the signal handler; %ld bytes live at the end\n", main_nb,
         (int)sig_count, owner_after - before);
  free(main_blocks);
  return test_failures() ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s keys|keys40|lastround|placerace|flipexit|fork|dblabandon|dtorchain|dtorexit|sigfree [SCALE]\n", argv[0]);
    return 2;
  }
  if (argc > 2) scale = atoi(argv[2]);
  if (scale <= 0) scale = 100;
  setvbuf(stdout, NULL, _IONBF, 0);
  if (!strcmp(argv[1], "keys")) return case_keys();
  if (!strcmp(argv[1], "lastround")) return case_lastround();
  if (!strcmp(argv[1], "placerace")) return case_placerace();
  if (!strcmp(argv[1], "flipexit")) return case_flipexit();
  if (!strcmp(argv[1], "fork")) return case_fork();
  if (!strcmp(argv[1], "dblabandon")) return case_dblabandon();
  if (!strcmp(argv[1], "keys40")) return case_keys40();
  if (!strcmp(argv[1], "dtorchain")) return case_dtorexit(0);
  if (!strcmp(argv[1], "dtorexit")) return case_dtorexit(1);
  if (!strcmp(argv[1], "sigfree")) return case_sigfree();
  fprintf(stderr, "%s: unknown case %s\n", argv[0], argv[1]);
  return 2;
}
