/* See runtime.h and docs/design/api.md "Process life". */
#include "runtime.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/auxv.h>

#include "../pages/page_source.h"
#include "../common/config.h"
#include "../common/counter.h"
#include "../common/log.h"
#include "../common/options.h"
#include "../common/page.h"
#include "../common/random.h"
#include "../midend/midend.h"
#include "../os/os_swap.h"
#include "../reclaim/reclaim.h"
#include "android.h"
#include "huge_cache.h"
#include "core.h"
#include "counters.h"
#include "gate.h"
#include "stats.h"

__thread jw_tls jw_tls_state __attribute__((tls_model("initial-exec")));

jw_api_counter_set jw_api_counters;

enum { INIT_NONE, INIT_RUNNING, INIT_DONE };
static jw_atomic_u32 init_state;
static pthread_key_t exit_key;
/* 1 when exit_key was created: without it exit_key is no key of ours (0,
 * which may be the program's), so it is never set or read. Stored before the
 * release store of INIT_DONE, read after it was seen: relaxed. */
static jw_atomic_u32 exit_hooked;

/* ---- thread exit ---- */

void jw_uncached_frees_flush(jw_tls *t) {
  if (t->n_free_uncached == 0) return;
  jw_counter_add(&jw_api_counters.small_frees_no_cache, t->n_free_uncached);
  t->n_free_uncached = 0;
}

/* The exit hook's value for a thread that frees without a cache (any
 * non-NULL value runs the hook; a cache attached later replaces it). */
static char uncached_marker;

void jw_uncached_frees_step(jw_tls *t) {
  if (t->n_free_uncached < JW_UNCACHED_FOLD_EVERY && t->state == JW_TLS_NONE) {
    /* Relaxed: see exit_hooked. */
    if (jw_load(&exit_hooked, JW_RELAXED) && pthread_getspecific(exit_key) == NULL) {
      /* With the hook registered, its cross-thread frees may wait on a
       * pending chain (the hook pushes it: frontend.md "Batched remote frees"). */
      if (pthread_setspecific(exit_key, &uncached_marker) == 0) t->rf_ok = 1;
      /* A key past the first 32 allocates its array: a cache set up by that
       * recursive malloc is what the hook must release. */
      if (t->state == JW_TLS_ACTIVE) pthread_setspecific(exit_key, t->tc);
    }
    return;
  }
  jw_uncached_frees_flush(t); /* a full batch, or a thread whose exit hook already ran */
}

static void thread_exit(void *arg) {
  /* An allocation call like the others: it gives the thread's cached blocks
   * back, which malloc_iterate must not see half done. */
  jw_gate_pass();
  jw_tls *t = &jw_tls_state;
  jw_uncached_frees_flush(t);
  /* The pending chain of cross-thread frees goes out before the cache is
   * released (an adopted page joins its pool, drained below); later frees
   * (other keys' destructors) push at once. */
  t->rf_ok = 0;
  if (t->rf_mask != 0) jw_free_remote_flush(t);
  /* A thread that only freed: as after a cache's release, later frees (other
   * keys' destructors) count at once and a malloc is served without a cache. */
  if (t->state == JW_TLS_NONE) t->state = JW_TLS_DEAD;
  if (t->state == JW_TLS_ACTIVE && t->tc == arg) {
    jw_tc_release(t, t->tc);
    jw_counter_add(&jw_api_counters.threads_exited, 1);
    /* No other thread with a cache is known to live: if this was the
     * process's last thread (pthread_exit from every thread), the reclaim
     * thread must not keep it alive for an interval. */
    if (jw_counter_get(&jw_api_counters.threads_started) == jw_counter_get(&jw_api_counters.threads_exited))
      jw_reclaim_last_thread_hint();
  }
}

/* The reclaimer's aging pass over the tiers' caches (reclaim/reclaim.h):
 * every thread's page pool, then the midend's idle classes, then the kept
 * direct mappings. */
static uint64_t age_tier_caches(void) { return jw_tc_age_pools() + jw_mid_age() + jw_huge_cache_age(); }

/* ---- fork ---- */

static void fork_prepare(void) {
  jw_gate_atfork_prepare(); /* first: waits while malloc is disabled (gate.h) */
  jw_mid_atfork_prepare(); /* class locks before the page source's: their order on every path */
  jw_pages_atfork_prepare();
  jw_huge_cache_atfork_prepare(); /* its holder takes no other lock */
}

static void fork_parent(void) {
  jw_huge_cache_atfork_release();
  jw_pages_atfork_parent();
  jw_mid_atfork_parent();
  jw_gate_atfork_parent();
}

static void fork_child(void) {
  jw_huge_cache_atfork_release();
  jw_pages_atfork_child();
  jw_mid_atfork_child();
  jw_gate_atfork_child();
  jw_tls *t = &jw_tls_state;
  jw_tc_orphan_others(t->state == JW_TLS_ACTIVE ? t->tc : NULL);
}

/* ---- where the reclaim thread may be created ---- */

/* The dynamic linker's mapping [lo, hi): glibc frees thread TLS from there
 * while holding its stack-cache lock, which pthread_create needs. Stored
 * before the guard is registered (a release store in reclaim/); the guard
 * reads them after its acquire load: relaxed. 0, 0 when there is no
 * separate dynamic linker (static programs; ld.so run as the program). */
static jw_atomic_u64 ldso_lo, ldso_hi;

static void find_dynamic_linker(void) {
  uintptr_t base = (uintptr_t)getauxval(AT_BASE);
  if (base == 0) return;
  const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)base; /* its first segment maps its headers */
  if (memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0) return;
  const ElfW(Phdr) *ph = (const ElfW(Phdr) *)(base + eh->e_phoff);
  uintptr_t end = 0;
  for (unsigned i = 0; i < eh->e_phnum; i++)
    if (ph[i].p_type == PT_LOAD && ph[i].p_vaddr + ph[i].p_memsz > end) end = ph[i].p_vaddr + ph[i].p_memsz;
  jw_store(&ldso_lo, (uint64_t)base, JW_RELAXED); /* published by the guard's registration */
  jw_store(&ldso_hi, (uint64_t)(base + end), JW_RELAXED);
}

/* The reclaim thread's start guard (reclaim.h): not when the public call on
 * a slow path came from the dynamic linker (pthread_join's and thread exit's
 * TLS frees, under glibc's stack-cache lock). Anywhere else: yes. */
static int may_start_thread(void) {
  uint64_t c = (uint64_t)(uintptr_t)jw_tls_state.caller;
  return !(c >= jw_load(&ldso_lo, JW_RELAXED) && c < jw_load(&ldso_hi, JW_RELAXED)); /* see ldso_lo */
}

/* The reclaim thread's creation scope (reclaim.h): while pthread_create runs
 * on a thread with a cache, that thread allocates as one whose cache is
 * being set up (its mallocs past the bins go to the midend) and with no key
 * (its frees take the cross-thread path), so no call re-enters the cache in
 * the middle of the operation that kicked the reclaimer. Without it, a
 * thread exit's release that started the thread left a slab the nested
 * refill took in the released cache, and the next thread to take the cache
 * used an abandoned slab (docs/design/concurrency.md). */
static __thread uint64_t scope_key;
static __thread int scope_active;

static void create_scope(int entering) {
  jw_tls *t = &jw_tls_state;
  if (entering) {
    scope_active = t->state == JW_TLS_ACTIVE;
    if (!scope_active) return;
    scope_key = t->key;
    t->state = JW_TLS_SETUP;
    t->key = 0;
    t->tag_last = 0; /* no key, no cached tag table (page_tag.h); the next free caches it again */
    return;
  }
  if (!scope_active) return;
  t->key = scope_key;
  t->state = JW_TLS_ACTIVE;
}

/* ---- initialization ---- */

/* Before IOSR swaps the heap out (jwmalloc run --swap): every tier's free
 * memory goes, as mallopt(M_PURGE_ALL) (docs/design/stack.md). */
static void swap_trim(void) { jw_purge(1); }

bool jw_global_init(void) {
  /* Acquire on both outcomes: a DONE state comes with everything the
   * initializing thread set up. */
  uint32_t s = jw_load(&init_state, JW_ACQUIRE);
  if (s == INIT_DONE) return true;
  if (s == INIT_RUNNING) return false;
  if (!jw_cas(&init_state, &s, INIT_RUNNING, JW_ACQUIRE, JW_ACQUIRE)) return s == INIT_DONE;
  jw_options_init();
  /* Before any tier maps memory: the page every slab and range is made of
   * (JWMALLOC_PAGE_SIZE); then the backend's placement mode (it also runs
   * without the tiers, where it keeps its own default). */
  jw_page_init((size_t)jw_opt(JW_OPT_PAGE_SIZE));
  jw_pages_set_place_mode((unsigned)jw_opt(JW_OPT_PLACEMENT));
  jw_low_memory_start(); /* JWMALLOC_LOW_MEMORY=1: its release settings (android.c) */
  jw_stats_at_start();
  /* Relaxed: published by the release store of INIT_DONE, and no block was
   * freed through a thread cache yet. */
  jw_store(&jw_free_key, jw_random_key(), JW_RELAXED);
  if (pthread_key_create(&exit_key, thread_exit) == 0)
    jw_store(&exit_hooked, 1, JW_RELAXED); /* published by the release store of INIT_DONE */
  else
    jw_dprintf(2, "jwmalloc: warning: no thread-exit hook; thread caches will not be recycled\n");
  pthread_atfork(fork_prepare, fork_parent, fork_child);
  jw_reclaim_set_tier_hook(age_tier_caches);
  find_dynamic_linker();
  jw_reclaim_set_start_guard(may_start_thread);
  jw_reclaim_set_create_scope(create_scope);
  jw_os_swap_set_trim(swap_trim);
  jw_store(&init_state, INIT_DONE, JW_RELEASE);
  return true;
}

/* Runs before main in every process that loads the library (options and
 * keys are ready even if the program never allocates). */
__attribute__((constructor)) static void on_load(void) { jw_global_init(); }

/* Prints the statistics at exit when JWMALLOC_STATS=1. */
__attribute__((destructor)) static void on_exit_stats(void) {
  if (jw_opt(JW_OPT_STATS)) jw_stats_emit_at_exit();
}

jw_tcache *jw_thread_cache(jw_tls *t) {
  if (JW_LIKELY(t->state == JW_TLS_ACTIVE)) return t->tc;
  if (t->state != JW_TLS_NONE) return NULL; /* being set up (recursion) or exited */
  if (!jw_global_init()) return NULL;
  t->state = JW_TLS_SETUP;
  jw_tcache *tc = jw_tc_acquire();
  if (tc == NULL) {
    t->state = JW_TLS_NONE;
    return NULL;
  }
  /* No allocation for the first 32 keys; a recursive malloc from it would
   * see JW_TLS_SETUP and be served by the midend. */
  bool hooked = jw_load(&exit_hooked, JW_RELAXED) && pthread_setspecific(exit_key, tc) == 0; /* see exit_hooked */
  jw_tc_attach(t, tc);
  t->rf_ok = hooked; /* the hook pushes a pending chain (frontend.md "Batched remote frees") */
  jw_counter_add(&jw_api_counters.threads_started, 1);
  return tc;
}

void jw_report_bad(const char *op, const char *problem, const void *p) {
  jw_counter_add(&jw_api_counters.invalid, 1);
  if (jw_opt(JW_OPT_ABORT_ON_ERROR)) jw_fatal("%s(): %s (%p)", op, problem, p);
  jw_dprintf(2, "jwmalloc: warning: %s(): %s (%p), call ignored\n", op, problem, p);
}
