/* Android's extensions to the malloc interface (bionic's
 * docs/native_allocator.md): malloc_disable / malloc_enable (the gate,
 * gate.h), mallopt's M_DECAY_TIME, M_PURGE and M_PURGE_ALL, and a mallinfo
 * cheap enough to call often. malloc_iterate walks the heap in iterate.c.
 *
 * Design and the decisions behind each: docs/design/api.md, "Android's
 * extensions"; the disable lock in docs/design/concurrency.md. The jw_ names
 * are exported here; override.c gives them their standard names.
 */
#include <errno.h>
#include <stdlib.h>
#include <linux/futex.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../include/jwmalloc.h"
#include "../backend/backend.h"
#include "../pages/page_source.h"
#include "../backend/release.h"
#include "../backend/roots.h"
#include "../common/counter.h"
#include "../common/lock.h"
#include "../common/options.h"
#include "../os/os_mem.h"
#include "../reclaim/reclaim.h"
#include "android.h"
#include "core.h"
#include "counters.h"
#include "gate.h"
#include "runtime.h"

jw_gate jw_gate_state = {
    .fast_limit = JW_ATOMIC_INIT(JW_GATE_OPEN_LIMIT),
    .free_mask = JW_ATOMIC_INIT(JW_GATE_OPEN_MASK),
};

/* Held from malloc_disable to malloc_enable (which may run on another
 * thread), and by fork from prepare to parent/child: disablers and forks take
 * turns. Never taken on a malloc or free path. */
static jw_lock disable_lock = JW_LOCK_INIT;
/* 1 between a malloc_disable and the malloc_enable that ends it. */
static jw_atomic_u32 disabled;

static void futex_wake_all(jw_atomic_u32 *w) {
  syscall(SYS_futex, &w->v, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

void jw_gate_wait(void) {
  /* Counted while waiting, and gone only after the count is lowered and the
   * gate is then seen open: in the single order of these sequentially
   * consistent operations, a disabler that closed the gate and then counted
   * this thread makes it see the gate closed again, so a thread that
   * jw_malloc_paused counted stays paused until the next enable (what lets
   * a caller of malloc_iterate know every thread it waits for is stopped).
   * The kernel compares the word again before it sleeps: an enable between
   * the load and the wait is never missed. The library's own reclaim thread
   * waits uncounted: it reaches the gate only in its exit (its thread cache
   * given back in glibc's teardown), at a time no caller can foresee, and a
   * count that includes it would let a caller waiting for its N threads
   * stop early, with one of them still running. */
  uint32_t one = jw_reclaim_on_thread() ? 0 : 1;
  for (;;) {
    jw_fetch_add(&jw_gate_state.waiters, one, JW_SEQ_CST);
    while (jw_load(&jw_gate_state.closed, JW_SEQ_CST) != 0)
      syscall(SYS_futex, &jw_gate_state.closed.v, FUTEX_WAIT_PRIVATE, 1, NULL, NULL, 0);
    jw_fetch_sub(&jw_gate_state.waiters, one, JW_SEQ_CST);
    if (jw_load(&jw_gate_state.closed, JW_SEQ_CST) == 0) return;
  }
}

/* Closes or opens the gate: `closed` first on the way in (a call whose fast
 * path misses then finds it closed), last on the way out. Sequentially
 * consistent stores: visible to every later call (a store is ordered before
 * the caller's next read-modify-write). */
static void set_gate(int close) {
  if (close) jw_store(&jw_gate_state.closed, 1, JW_SEQ_CST);
  jw_store(&jw_gate_state.fast_limit, close ? 0 : JW_GATE_OPEN_LIMIT, JW_SEQ_CST);
  jw_store(&jw_gate_state.free_mask, close ? ~(uintptr_t)0 : JW_GATE_OPEN_MASK, JW_SEQ_CST);
  if (!close) {
    jw_store(&jw_gate_state.closed, 0, JW_SEQ_CST); /* see jw_gate_wait */
    futex_wake_all(&jw_gate_state.closed);
  }
}

JW_EXPORT void jw_malloc_disable(void) {
  jw_global_init(); /* the fork handlers are registered, the options read */
  jw_lock_acquire(&disable_lock, JW_LK_DISABLE);
  set_gate(1);
  /* Then the reclaimer: its cycle in progress ends, and none starts until
   * the enable, so no aging pass moves a cached block (a range's FREE_KEY
   * is cleared before the backend takes it back) and no release batch
   * unmaps a root while malloc_iterate walks the heap. No other lock: calls
   * already past the gate complete on their own non-blocking paths. */
  jw_reclaim_hold();
  jw_store(&disabled, 1, JW_RELEASE); /* pairs with malloc_enable's CAS */
}

JW_EXPORT void jw_malloc_enable(void) {
  uint32_t one = 1;
  /* Acquire: the disabler's state, whichever thread enables. Only the call
   * that ends a disable does anything (bionic: a no-op otherwise). */
  if (!jw_cas(&disabled, &one, 0, JW_ACQUIRE, JW_RELAXED)) return;
  jw_reclaim_unhold();
  set_gate(0);
  jw_lock_release(&disable_lock);
}

/* Sequentially consistent: see jw_gate_wait. */
JW_EXPORT unsigned jw_malloc_paused(void) { return jw_load(&jw_gate_state.waiters, JW_SEQ_CST); }

int jw_malloc_is_disabled(void) { return jw_load(&disabled, JW_ACQUIRE) != 0; /* pairs with disable's release */ }

void jw_gate_atfork_prepare(void) { jw_lock_acquire(&disable_lock, JW_LK_DISABLE); }
void jw_gate_atfork_parent(void) { jw_lock_release(&disable_lock); }
void jw_gate_atfork_child(void) {
  /* One thread, and the fork held the lock: the gate was open. */
  jw_lock_reset(&disable_lock);
  jw_store(&jw_gate_state.waiters, 0, JW_RELAXED);
}

/* ---- mallopt ---- */

/* The release settings in force before the first mallopt(M_DECAY_TIME, 0)
 * or -1, which M_DECAY_TIME 1 puts back (the start-up configuration:
 * JWMALLOC_LOW_MEMORY's when it is on). Guarded by decay_lock. */
static struct {
  int saved;
  int mode; /* 1 (the default), 0 or -1 */
  jw_reclaim_config rc;
  long pool_percent, pool_min, huge_mb;
} decay = {.mode = 1};
static jw_lock decay_lock = JW_LOCK_INIT;

static void save_settings(void) {
  if (decay.saved) return;
  jw_reclaim_get_config(&decay.rc);
  jw_option_get("POOL_PERCENT", &decay.pool_percent);
  jw_option_get("POOL_MIN", &decay.pool_min);
  jw_option_get("HUGE_CACHE_MB", &decay.huge_mb);
  decay.saved = 1;
}

void jw_release_immediately(void) {
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  c.enabled = 1;
  c.watermark = 1;       /* every backend free past one cached byte releases at once */
  c.watermark_max = 0;   /* fixed: no adaptation */
  c.grace_ms = 0;        /* and at once, not after a grace */
  jw_reclaim_set_config(&c);
  jw_option_set("POOL_PERCENT", 0); /* an emptied slab goes to the backend, not the pool */
  jw_option_set("POOL_MIN", 0);
  jw_option_set("HUGE_CACHE_MB", 0); /* a freed direct mapping is unmapped */
}

/* ---- JWMALLOC_LOW_MEMORY ---- */

/* backend/backend_internal.h (whose class count clashes with the
 * frontend's name): the backend's one-time initialization, which reads the
 * reclamation options from the environment. */
void jw_backend_init_once(void);

void jw_low_memory_start(void) {
  if (!jw_low_memory()) return;
  /* docs/design/api.md, "Low-memory configuration". Each setting only where
   * its own variable does not say otherwise. */
  jw_backend_init_once(); /* the reclamation options read from the environment first */
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  if (!jw_opt_in_env(JW_OPT_RECLAIM_WATERMARK)) c.watermark = JW_LOW_MEMORY_WATERMARK;
  if (!jw_opt_in_env(JW_OPT_RECLAIM_INTERVAL_MS)) c.interval_ms = JW_LOW_MEMORY_INTERVAL_MS;
  if (!jw_opt_in_env(JW_OPT_RECLAIM_WATERMARK_MAX)) c.watermark_max = 0;
  if (!jw_opt_in_env(JW_OPT_RECLAIM_GRACE_MS)) c.grace_ms = 0;
  jw_reclaim_set_config(&c);
  if (!jw_opt_in_env(JW_OPT_POOL_PERCENT)) jw_option_set("POOL_PERCENT", 0);
  if (!jw_opt_in_env(JW_OPT_POOL_MIN)) jw_option_set("POOL_MIN", 0);
  if (!jw_opt_in_env(JW_OPT_HUGE_CACHE_MB)) jw_option_set("HUGE_CACHE_MB", 0);
}

static int set_decay(int value) {
  int mode = value > 0 ? 1 : value;
  if (mode < -1) return 0;
  jw_lock_acquire(&decay_lock, JW_LK_DISABLE);
  if (mode != decay.mode) {
    save_settings();
    if (mode == 0) {
      jw_release_immediately();
    } else {
      jw_reclaim_config c = decay.rc;
      if (mode == -1) c.enabled = 0; /* nothing is given back (JWMALLOC_RECLAIM=0) */
      jw_reclaim_set_config(&c);
      jw_option_set("POOL_PERCENT", decay.pool_percent);
      jw_option_set("POOL_MIN", decay.pool_min);
      jw_option_set("HUGE_CACHE_MB", decay.huge_mb);
    }
    decay.mode = mode;
  }
  jw_lock_release(&decay_lock);
  if (mode == 0) jw_purge(0); /* what is cached now goes too */
  return 1;
}

void jw_purge(int all_threads) {
  jw_trim_impl(); /* the calling thread's caches, the midend's, the kept mappings */
  jw_reclaim_purge(all_threads);
}

JW_EXPORT int jw_mallopt(int param, int value) {
  jw_gate_pass(); /* an allocation call like the others (paused by malloc_disable) */
  switch (param) {
    case JW_M_DECAY_TIME:
      return set_decay(value);
    case JW_M_PURGE:
      jw_purge(0);
      return 1;
    case JW_M_PURGE_ALL:
      jw_purge(1);
      return 1;
    default:
      /* glibc's parameters (arenas, thresholds, top pad) have no meaning
       * here: accepted and ignored, as glibc's "success", so that programs
       * tuning glibc run unchanged. */
      return 1;
  }
}

/* ---- mallinfo ---- */

void jw_mallinfo_fill(struct mallinfo2 *m) {
  /* A handful of relaxed counters: no lock, no system call, no walk of
   * threads, classes or heap (jw_stats_get reads /proc and every thread
   * cache; this is for callers that ask often, ART at every collection). */
  jw_roots_stats rs;
  jw_roots_get_stats(&rs);
  jw_os_counts os;
  jw_os_get_counts(&os);
  jw_api_counter_set *a = &jw_api_counters;
  uint64_t huge = jw_counter_get(&a->huge_bytes), roots = rs.roots * (uint64_t)JW_ROOT;
  uint64_t live = jw_backend_live_bytes();
  memset(m, 0, sizeof *m);
  m->arena = roots;
  m->hblks = jw_counter_get(&a->huge_mallocs) - jw_counter_get(&a->huge_frees);
  m->hblkhd = huge;
  m->uordblks = live + huge;
  m->fordblks = roots > live ? roots - live : 0; /* racy counters: never negative */
  m->keepcost = jw_release_cached_bytes();
  m->usmblks = os.peak_mapped_bytes;
}
