/* Preemption injection (harness.h, "pauses"; docs/design/bench.md,
 * "Preemption injection").
 *
 * The workers schedule the pauses themselves: after a timed call (every
 * call is timed in this benchmark), the thread that finds the time of the
 * next tick passed moves it on by --pause-every microseconds and, in random
 * mode, sends the pause signal to a worker drawn from its own seeded stream
 * (itself included). No injector thread: one that wakes 2,000 times a second
 * takes the CPU from a worker in the middle of a call each time, and that
 * worker then waits for its next turn (several ms at 10 threads per core):
 * tried, it made some 900 slow calls per 2-second run, whatever was paused.
 * Per-worker timers (timer_create) avoid that but tick only when their
 * thread runs, a third of the rate asked for at 10 threads per core.
 * In random mode the handler sleeps --pause-ms, so the worker is descheduled
 * wherever it was, inside the allocator or not. In section mode the tick arms a
 * flag instead; the next thread that enters one of the allocator's
 * lock-holding sections (reached through a section hook) takes the flag and
 * sleeps there, holding the lock. Each arm names one kind of section, in
 * turn among the kinds entered so far (and allowed by --pause-kinds), so
 * that every lock gets pauses, not only the most frequent one (jwmalloc's
 * per-thread page-pool lock is entered far more often than its shared
 * locks); an arm not taken by the next tick is replaced. The section hooks
 * are found with dlsym: jwmalloc's test-hooks
 * variant (every lock, the backend's hand-over points), and the pause shim
 * (bench/preload/pause_shim.c: pthread_mutex_lock/trylock, which jemalloc and
 * Scudo take through the PLT). They are installed in every mode, so the
 * count of sections reached is known in the runs without pauses too.
 *
 * A pause records its window in the paused worker's context: a timed call of
 * that worker which overlaps its own pause is counted apart (lat_slow_own),
 * so the slow calls left are those of the other workers.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "harness.h"

#define PAUSE_SIGNAL SIGUSR2
#define SHARDS 16

/* Hook kinds: jwmalloc's lock kinds (the order of jw_lock_kind,
 * jwmalloc/common/lock.h), its named points (the order of jw_test_point,
 * jwmalloc/common/test_hooks.h), and the shim's wrapped functions. */
enum { K_JW_LOCK = 0, K_JW_POINT = 8, K_SHIM = 16, K_COUNT = 24 };
static const char *const kind_names[K_COUNT] = {
    [K_JW_LOCK + 0] = "jw.backend", [K_JW_LOCK + 1] = "jw.midend", [K_JW_LOCK + 2] = "jw.pool",
    [K_JW_LOCK + 3] = "jw.aging",   [K_JW_LOCK + 4] = "jw.token",  [K_JW_LOCK + 5] = "jw.huge",
    [K_JW_POINT + 0] = "jw.be_unlock", [K_JW_POINT + 1] = "jw.be_defer",
    [K_JW_POINT + 2] = "jw.be_checking", [K_JW_POINT + 3] = "jw.rc_batch", [K_JW_POINT + 4] = "jw.be_sibling",
    [K_SHIM + 0] = "mutex_lock",    [K_SHIM + 1] = "mutex_trylock",
};

/* --pause-kinds: the kinds of section that get pauses (all when empty). */
static uint32_t wanted_mask;
static int kind_wanted(int k) { return !wanted_mask || (wanted_mask >> k & 1); }

static __thread jwb_thread *self;   /* the worker context this thread runs, or NULL */
static __thread unsigned shard_of;  /* 1 + this thread's counter shard, 0 until assigned */
static atomic_uint next_shard;
static struct {
  _Alignas(64) atomic_ullong calls[K_COUNT];
} shards[SHARDS];
static atomic_ullong kind_pauses[K_COUNT];
static atomic_ullong pauses_worker, pauses_other, pause_missed, pause_ticks, arms_unused;
static atomic_int armed;            /* section mode: 0, or 1 + the kind whose next entry pauses (ANY: any) */
#define ANY (K_COUNT + 1)
static uint64_t pause_ns;
static char installed[96];          /* which hooks were found */

/* -------------------------------------------------------------- the pause */

/* The last RECENT pauses (kind, start, end), so that a slow call of another
 * thread can be put beside the section pauses it overlapped: at most
 * pause_ms / pause_every of them are in progress at once (4 by default). A
 * slot is claimed by a ticket; its fields are written with relaxed atomics
 * and `seq` last, so a reader sees a window whole or skips it (an
 * attribution, not a figure the run depends on). */
#define RECENT 16
static struct {
  atomic_ullong seq, t0, t1;
  atomic_int kind;
} recent[RECENT];
static atomic_ullong recent_next;
static atomic_ullong slow_beside[K_COUNT + 1]; /* [K_COUNT]: beside no section pause */

static void recent_add(int kind, uint64_t t0, uint64_t t1) {
  uint64_t n = atomic_fetch_add_explicit(&recent_next, 1, memory_order_relaxed);
  unsigned i = (unsigned)(n % RECENT);
  atomic_store_explicit(&recent[i].seq, 0, memory_order_relaxed);
  atomic_store_explicit(&recent[i].kind, kind, memory_order_relaxed);
  atomic_store_explicit(&recent[i].t0, t0, memory_order_relaxed);
  atomic_store_explicit(&recent[i].t1, t1, memory_order_relaxed);
  atomic_store_explicit(&recent[i].seq, n + 1, memory_order_release); /* the fields before it */
}

void jwb_pause_slow_other(uint64_t t0, uint64_t t1) {
  if (jwb.pause_mode != JWB_PAUSE_SECTION) return;
  int kind = K_COUNT;
  for (unsigned i = 0; i < RECENT; i++) {
    if (!atomic_load_explicit(&recent[i].seq, memory_order_acquire)) continue; /* pairs with the release */
    int k = atomic_load_explicit(&recent[i].kind, memory_order_relaxed);
    uint64_t p0 = atomic_load_explicit(&recent[i].t0, memory_order_relaxed);
    uint64_t p1 = atomic_load_explicit(&recent[i].t1, memory_order_relaxed);
    if (k >= 0 && p0 < t1 && p1 > t0) {
      kind = k;
      break;
    }
  }
  atomic_fetch_add_explicit(&slow_beside[kind], 1, memory_order_relaxed);
}

/* Sleeps pause_ns in the calling thread and records the window in its worker
 * context, and in the ring of recent pauses with the kind of section it was
 * taken in (kind -1: a signal, anywhere). Async-signal-safe: clock_gettime,
 * nanosleep and atomics only. */
static void pause_here(int kind) {
  uint64_t t0 = jwb_now_ns();
  struct timespec ts = {(time_t)(pause_ns / 1000000000u), (long)(pause_ns % 1000000000u)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
  uint64_t t1 = jwb_now_ns();
  recent_add(kind, t0, t1);
  jwb_thread *t = self;
  if (t) {
    atomic_store_explicit(&t->pause_t0, t0, memory_order_relaxed);
    atomic_store_explicit(&t->pause_t1, t1, memory_order_relaxed);
    t->pauses++;
    atomic_fetch_add_explicit(&pauses_worker, 1, memory_order_relaxed);
  } else {
    atomic_fetch_add_explicit(&pauses_other, 1, memory_order_relaxed); /* e.g. an allocator's own thread */
  }
}

/* ----------------------------------------------------------- the ticks */

static _Atomic uint64_t next_tick;  /* monotonic ns of the next tick; 0 until the first timed call */
static __thread jwb_rng tick_rng;   /* this thread's stream of targets */
static __thread int tick_rng_set;
static atomic_uint turns;           /* threads that drew a target: one stream each */
static atomic_int last_kind = K_COUNT - 1;

static uint64_t kind_calls(int k);
static int next_kind(int last);

/* Section mode: the next kind in turn is armed. */
static void arm_next(void) {
  int k = next_kind(atomic_load_explicit(&last_kind, memory_order_relaxed));
  if (k >= 0) atomic_store_explicit(&last_kind, k, memory_order_relaxed);
  if (atomic_exchange(&armed, k >= 0 ? k + 1 : ANY)) atomic_fetch_add_explicit(&arms_unused, 1, memory_order_relaxed);
}

/* Random mode: a worker drawn from this thread's stream gets the signal. */
static void signal_one(void) {
  if (!tick_rng_set) {
    tick_rng = jwb_rng_for(jwb.seed, atomic_fetch_add_explicit(&turns, 1, memory_order_relaxed), 7);
    tick_rng_set = 1;
  }
  jwb_thread *t = jwb_ctx_peek((unsigned)jwb_below(&tick_rng, jwb.threads));
  int tid = t ? atomic_load_explicit(&t->tid, memory_order_relaxed) : 0;
  if (!tid || syscall(SYS_tgkill, getpid(), tid, PAUSE_SIGNAL) != 0)
    atomic_fetch_add_explicit(&pause_missed, 1, memory_order_relaxed); /* between turns, or exited */
}

void jwb_pause_tick(uint64_t now) {
  uint64_t at = atomic_load_explicit(&next_tick, memory_order_relaxed);
  if (now < at) return;
  uint64_t every = jwb.pause_every_us * 1000;
  /* Behind by more than a tick (no timed call for a while): no burst of
   * catch-up ticks. */
  uint64_t next = at + every > now ? at + every : now + every;
  if (!atomic_compare_exchange_strong(&next_tick, &at, next)) return; /* another thread took this tick */
  if (at == 0) return;                                                /* the first call only starts the clock */
  atomic_fetch_add_explicit(&pause_ticks, 1, memory_order_relaxed);
  if (jwb.pause_mode == JWB_PAUSE_SECTION) arm_next();
  else signal_one();
}

static void on_signal(int sig) {
  (void)sig;
  int e = errno;
  if (self) pause_here(-1);
  else atomic_fetch_add_explicit(&pause_missed, 1, memory_order_relaxed); /* its turn had just ended */
  errno = e;
}

/* Every section hook ends here: count the entry, and pause if armed. Runs in
 * whatever thread entered the section, holding the allocator's lock: no
 * allocation, no lock. */
static void section_entered(int kind) {
  if (kind < 0 || kind >= K_COUNT) return;
  unsigned s = shard_of;
  if (!s) s = shard_of = 1 + atomic_fetch_add_explicit(&next_shard, 1, memory_order_relaxed) % SHARDS;
  atomic_fetch_add_explicit(&shards[s - 1].calls[kind], 1, memory_order_relaxed);
  /* A relaxed peek first: the common case (not armed) writes nothing shared. */
  int a = atomic_load_explicit(&armed, memory_order_relaxed);
  if ((a == kind + 1 || (a == ANY && kind_wanted(kind))) && atomic_compare_exchange_strong(&armed, &a, 0)) {
    atomic_fetch_add_explicit(&kind_pauses[kind], 1, memory_order_relaxed);
    pause_here(kind);
  }
}

static void jw_lock_hook(int kind) { section_entered(K_JW_LOCK + (kind & 7)); }
static void jw_point_hook(int point) { section_entered(K_JW_POINT + (point & 7)); }
static void shim_hook(int what) { section_entered(K_SHIM + (what & 7)); }

/* ----------------------------------------------------------- set-up */

const char *jwb_pause_kind_list(void) {
  static char list[320];
  if (!list[0])
    for (int k = 0; k < K_COUNT; k++)
      if (kind_names[k]) {
        size_t len = strlen(list);
        snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", kind_names[k]);
      }
  return list;
}

static void parse_kinds(void) {
  if (!jwb.pause_kinds || !*jwb.pause_kinds) return;
  char buf[256];
  snprintf(buf, sizeof buf, "%s", jwb.pause_kinds);
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    int found = 0;
    for (int k = 0; k < K_COUNT; k++)
      if (kind_names[k] && strcmp(kind_names[k], tok) == 0) {
        wanted_mask |= 1u << k;
        found = 1;
      }
    if (!found) {
      fprintf(stderr, "%s: --pause-kinds: unknown kind '%s' (%s)\n", jwb.name, tok, jwb_pause_kind_list());
      exit(2);
    }
  }
}

static void install(const char *sym, void (*hook)(int), const char *name) {
  void (*set)(void (*)(int));
  void *p = dlsym(RTLD_DEFAULT, sym);
  if (!p) return;
  memcpy(&set, &p, sizeof set); /* object to function pointer, as POSIX dlsym allows */
  set(hook);
  size_t len = strlen(installed);
  snprintf(installed + len, sizeof installed - len, "%s%s", len ? "," : "", name);
}

void jwb_pause_setup(void) {
  pause_ns = (uint64_t)(jwb.pause_ms * 1e6);
  parse_kinds();
  install("jw_test_preload_set_lock_hook", jw_lock_hook, "jw-locks");
  install("jw_test_preload_set_point_hook", jw_point_hook, "jw-points");
  install("jwb_pause_shim_set_hook", shim_hook, "shim");
  if (jwb.pause_mode != JWB_PAUSE_NONE && jwb.lat_every == 0) {
    fprintf(stderr, "%s: --pause needs timed calls (--lat-every above 0): the workers tick after them\n",
            jwb.name);
    exit(2);
  }
  if (jwb.pause_mode == JWB_PAUSE_RANDOM) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_RESTART; /* the workload's and the allocator's system calls resume */
    sigemptyset(&sa.sa_mask);
    if (sigaction(PAUSE_SIGNAL, &sa, NULL) != 0) {
      fprintf(stderr, "%s: cannot install the pause signal handler: %s\n", jwb.name, strerror(errno));
      exit(2);
    }
  }
  if (jwb.pause_mode == JWB_PAUSE_SECTION && !installed[0]) {
    fprintf(stderr, "%s: --pause section: no section hook is reachable (preload libjwmalloc_hooks.so, or "
                    "libjwb_pause.so before the allocator)\n", jwb.name);
    exit(2);
  }
}

void jwb_pause_thread_begin(jwb_thread *t) {
  self = t;
  atomic_store_explicit(&t->tid, (int)syscall(SYS_gettid), memory_order_relaxed);
}

void jwb_pause_thread_end(jwb_thread *t) {
  /* A successor (jwb_hand_over) may already have put its own id there. */
  int mine = (int)syscall(SYS_gettid);
  atomic_compare_exchange_strong(&t->tid, &mine, 0);
  self = NULL;
}

int jwb_pause_own(jwb_thread *t, uint64_t t0, uint64_t t1) {
  if (!t->pauses) return 0;
  uint64_t p0 = atomic_load_explicit(&t->pause_t0, memory_order_relaxed);
  uint64_t p1 = atomic_load_explicit(&t->pause_t1, memory_order_relaxed);
  return p0 < t1 && p1 > t0;
}

/* ----------------------------------------------------------- kinds in turn */

static uint64_t kind_calls(int k) {
  uint64_t v = 0;
  for (int s = 0; s < SHARDS; s++) v += atomic_load_explicit(&shards[s].calls[k], memory_order_relaxed);
  return v;
}

/* The kind the next arm names: the next one entered so far after `last`, in
 * turn; ANY before any section was entered. */
static int next_kind(int last) {
  for (int i = 1; i <= K_COUNT; i++) {
    int k = (last + i) % K_COUNT;
    if (kind_calls(k) && kind_wanted(k)) return k;
  }
  return -1;
}

/* ----------------------------------------------------------- the report */

static size_t kinds_format(char *buf, size_t cap, const char *key, int pauses) {
  size_t len = (size_t)snprintf(buf, cap, " %s=", key);
  int any = 0;
  for (int k = 0; k < K_COUNT && len < cap; k++) {
    uint64_t v = pauses == 2 ? atomic_load(&slow_beside[k]) : pauses ? atomic_load(&kind_pauses[k]) : kind_calls(k);
    if (!v) continue;
    len += (size_t)snprintf(buf + len, cap - len, "%s%s:%" PRIu64, any ? "," : "",
                            kind_names[k] ? kind_names[k] : "other", v);
    any = 1;
  }
  if (pauses == 2 && len < cap) {
    len += (size_t)snprintf(buf + len, cap - len, "%snone:%llu", any ? "," : "",
                            (unsigned long long)atomic_load(&slow_beside[K_COUNT]));
    any = 1;
  }
  if (!any && len < cap) len += (size_t)snprintf(buf + len, cap - len, "none");
  return len < cap ? len : cap;
}

size_t jwb_pause_format(char *buf, size_t cap) {
  static const char *const modes[] = {"none", "random", "section"};
  if (jwb.pause_mode == JWB_PAUSE_NONE && !installed[0]) return 0; /* nothing to say */
  uint64_t hook_calls = 0;
  for (int k = 0; k < K_COUNT; k++) hook_calls += kind_calls(k);
  size_t len = (size_t)snprintf(
      buf, cap,
      "pause=%s pause_every_us=%" PRIu64 " pause_ms=%.3f pause_ticks=%llu pauses=%llu pauses_worker=%llu "
      "pauses_other=%llu pause_missed=%llu pause_arms_unused=%llu hooks_installed=%s hook_calls=%" PRIu64,
      modes[jwb.pause_mode], jwb.pause_every_us, jwb.pause_ms, (unsigned long long)atomic_load(&pause_ticks),
      (unsigned long long)(atomic_load(&pauses_worker) + atomic_load(&pauses_other)),
      (unsigned long long)atomic_load(&pauses_worker), (unsigned long long)atomic_load(&pauses_other),
      (unsigned long long)atomic_load(&pause_missed), (unsigned long long)atomic_load(&arms_unused),
      installed[0] ? installed : "none", hook_calls);
  if (len < cap) len += kinds_format(buf + len, cap - len, "hooks", 0);
  if (len < cap) len += kinds_format(buf + len, cap - len, "hook_pauses", 1);
  if (jwb.pause_mode == JWB_PAUSE_SECTION && len < cap)
    len += kinds_format(buf + len, cap - len, "slow_beside", 2);
  if (jwb.pause_kinds && len < cap) len += (size_t)snprintf(buf + len, cap - len, " pause_kinds=%s", jwb.pause_kinds);
  return len < cap ? len : cap;
}
