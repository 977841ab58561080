/* Lifetime-based reclamation: the reclaim thread, its cycle, the watermark,
 * the fixed-delay baseline and their options.
 *
 * Brief: "Lifetime-based reclamation" (and "Non-blocking interface": the
 * reclaim thread drains deferred frees and never holds a lock across a wait
 * or a system call). Design: docs/design/reclamation.md. The countdown rule
 * is the backend's (backend/filing.h: reclaim/ picks the policy); the release
 * mechanism in the backend is backend/release.h. The functions the backend
 * calls up into (initialization, after a free, roots mapped ahead, a cycle,
 * fork) are declared in backend/upcalls.h and defined here.
 *
 * Options (environment, read once at the first backend call; README):
 *   JWMALLOC_RECLAIM=0|1              reclamation on (default 1)
 *   JWMALLOC_RECLAIM_INTERVAL_MS=N    cycle interval, 1..600000 ms (default 500)
 *   JWMALLOC_RECLAIM_WATERMARK=N[KMG] cached free bytes past which a freeing
 *                                     thread releases synchronously (default
 *                                     64M; 0: none); the floor of the
 *                                     watermark in force, which doubles when
 *                                     a release is refaulted (reclamation.md 4a)
 *   JWMALLOC_RECLAIM_WATERMARK_MAX=N[KMG] its ceiling (default 0: the
 *                                     watermark, fixed; opt-in, see 4a)
 *   JWMALLOC_RECLAIM_GRACE_MS=N       how long cached bytes may stay above
 *                                     the watermark before they are released,
 *                                     0..600000 ms (default 50; 0: at once;
 *                                     section 4, "The grace")
 *   JWMALLOC_RECLAIM_POLICY=lifetime|fixed-delay (default lifetime)
 *   JWMALLOC_RECLAIM_THREAD=0|1       background thread (default 1); 0: freeing
 *                                     threads run due cycles themselves
 * A malformed value prints one line on stderr and keeps the default.
 *
 * Thread-safety: every function may be called from any thread; none
 * allocates (thread creation aside: pthread_create may call malloc, which is
 * then served normally).
 */
#ifndef JW_RECLAIM_RECLAIM_H
#define JW_RECLAIM_RECLAIM_H

#include <stdint.h>

#include "../backend/filing.h"
#include "../backend/upcalls.h"
#include "../common/option_table.h"

typedef struct jw_reclaim_config {
  int enabled;           /* JWMALLOC_RECLAIM */
  uint32_t interval_ms;  /* JWMALLOC_RECLAIM_INTERVAL_MS, 1..600000 */
  uint64_t watermark;    /* JWMALLOC_RECLAIM_WATERMARK, bytes; 0: none */
  unsigned policy;       /* jw_filing_policy (backend/filing.h) */
  int thread;            /* JWMALLOC_RECLAIM_THREAD */
  uint64_t watermark_max; /* JWMALLOC_RECLAIM_WATERMARK_MAX, bytes; 0 (default): fixed at watermark */
  uint32_t grace_ms;      /* JWMALLOC_RECLAIM_GRACE_MS, 0..600000 */
} jw_reclaim_config;

/* The configuration in force. */
void jw_reclaim_get_config(jw_reclaim_config *out);

/* Whether reclamation is on (JWMALLOC_RECLAIM): a tier keeps free memory
 * for reuse only when something ages it. Any thread; a relaxed read. */
int jw_reclaim_enabled(void);
/* Replaces it from now on (tests, tools). Returns 0, or -1 with errno =
 * EINVAL when a value is out of range (nothing changes). A running thread
 * picks up a new interval at its next sleep and exits when disabled. */
int jw_reclaim_set_config(const jw_reclaim_config *c);

/* The reclamation options for jw_option_get/set (include/jwmalloc.h), by
 * their row of the options table (common/option_table.h): RECLAIM (0/1),
 * RECLAIM_INTERVAL_MS, RECLAIM_WATERMARK (bytes), RECLAIM_WATERMARK_MAX
 * (bytes), RECLAIM_POLICY (0 lifetime, 1 fixed-delay), RECLAIM_THREAD (0/1),
 * RECLAIM_GRACE_MS (0..600000).
 * With set == 0 stores the value in force in *value; else sets it to
 * *value. Returns 0, -1 with errno = EINVAL (bad value), or -2 when `id` is
 * not one of them. */
int jw_reclaim_option(jw_option_id id, long *value, int set);

/* The tiers' caches (docs/design/reclamation.md, section 6): a function that
 * ages them (gives back, through jw_pages_free_aged, what stayed idle in
 * them since its previous call, never waiting for a lock) and returns the
 * bytes they still hold that a later call could give back. The library
 * registers one at initialization; the standalone backend has none. Called
 * by the reclaimer at the start of every cycle, under the aging lock. */
typedef uint64_t (*jw_reclaim_tier_fn)(void);
void jw_reclaim_set_tier_hook(jw_reclaim_tier_fn fn);

/* A tier put pages in its own cache: makes sure the reclaim thread runs to
 * age them (or, without a thread, runs a due cycle). Two relaxed loads when
 * it runs. Call outside the tier's locks (it may create the thread, whose
 * creation may call malloc). */
void jw_reclaim_kick(void);

/* Whether the calling context may create the reclaim thread: the library
 * registers one at initialization; without one (the standalone backend)
 * every context may. glibc calls free() while holding the lock of its stack
 * cache (freeing a thread's TLS in pthread_join and at thread exit, from the
 * dynamic linker), and pthread_create takes that lock: a thread created
 * there deadlocks. When the guard says no, the free runs a due cycle itself
 * (as without a thread) and a later free or allocation starts the thread.
 * The reclaim thread never starts one (its own exit frees). */
typedef int (*jw_reclaim_start_guard_fn)(void);
void jw_reclaim_set_start_guard(jw_reclaim_start_guard_fn fn);

/* Brackets the reclaim thread's creation on the creating thread: called with
 * 1 just before pthread_create and with 0 just after. pthread_create
 * allocates on that thread (the new thread's DTV), which may be in the
 * middle of an operation on its own thread cache (the kick comes from a page
 * put in a pool, a thread exit's release among others): the library's scope
 * keeps those allocation calls off the cache (api/runtime.c). Registered once
 * at initialization; NULL (the standalone backend): no scope. */
typedef void (*jw_reclaim_create_scope_fn)(int entering);
void jw_reclaim_set_create_scope(jw_reclaim_create_scope_fn fn);

/* 1 when the caller is the library's reclaim thread (a thread-local flag,
 * set for its whole life, exit included), else 0. Thread-safe. */
int jw_reclaim_on_thread(void);

/* An application thread ended and no other thread with a thread cache is
 * known to live: the reclaim thread checks at once (for a few milliseconds)
 * whether it is the last thread of the process, and if so ends, so that a
 * program whose last thread called pthread_exit ends without waiting for the
 * next interval (section 5). Cheap when no reclaim thread runs. */
void jw_reclaim_last_thread_hint(void);

/* Releases every backed free range of the backend now (madvise; Android's
 * mallopt M_PURGE). With `tiers`, first gives back everything the tiers'
 * caches hold that their aging passes can reach (every thread's page pool and
 * block cache, the midend's idle classes, the kept direct mappings: two
 * passes back to back), M_PURGE_ALL. Waits for the reclaimer token, the
 * aging lock and the backend lock (never on a malloc or free path). Returns
 * the bytes released. */
uint64_t jw_reclaim_purge(int tiers);

/* Holds the reclaimer token (waiting for a cycle or a synchronous release
 * to end): until jw_reclaim_unhold, no aging pass moves a tier's cached
 * block and no release batch unmaps a root (malloc_disable,
 * docs/design/api.md "Android's extensions"). The reclaim thread waits
 * meanwhile (it polls the token every millisecond); freeing threads skip
 * their synchronous releases. Any thread may unhold. */
void jw_reclaim_hold(void);
void jw_reclaim_unhold(void);

typedef struct jw_reclaim_stats {
  uint64_t cycles;                /* cycles completed (standby released, swapped) */
  uint64_t early_wakes;           /* cycles started early by the watermark */
  uint64_t sync_releases;         /* synchronous releases by freeing threads */
  uint64_t grace_waits;           /* crossings of the watermark that started a grace */
  uint64_t grace_releases;        /* releases by the reclaim thread at the end of a grace */
  uint64_t grace_reused;          /* graces that ended with the cached bytes back at or below the
                                     watermark (allocations took the excess): nothing released */
  uint64_t inline_cycles;         /* cycles run by freeing threads (no thread) */
  uint64_t thread_starts, thread_exits, thread_start_failures;
  uint64_t batches, ranges_released, bytes_released; /* backend/release.h */
  uint64_t madvise_calls, roots_unmapped, release_failures;
  uint64_t merges, merges_after_release; /* all merges; those joining released memory */
  uint64_t allocs_refault;        /* allocations of ranges given back: they fault in again */
  uint64_t cached_bytes;          /* now: backed free bytes (active + standby) */
  uint64_t tier_passes;           /* aging passes over the tiers' caches */
  uint64_t tier_held_bytes;       /* after the last pass: bytes the tiers' caches still hold */
  uint64_t last_thread_checks;    /* wake-ups by jw_reclaim_last_thread_hint */
  uint64_t placement_on, placement_off; /* switches by the trough detector (JWMALLOC_PLACEMENT=auto) */
  uint64_t placement_contended;   /* full cycles with more than 8 roots mapped without the lock: placement
                                     held off (reclamation.md 6a, the contention guard) */
  uint64_t placement_stalled;     /* switches off because no root came back for 16 full cycles of a trough
                                     (reclamation.md 6a, the stall bound) */
  int placement_active;           /* now: lowest-root-first placement on (backend.md 7b) */
  uint64_t watermark_now;         /* the watermark in force (reclamation.md 4a); 0: none */
  uint64_t watermark_raises, watermark_lowers; /* its doublings (a release refaulted) and halvings */
  int thread_running;             /* now */
} jw_reclaim_stats;
void jw_reclaim_get_stats(jw_reclaim_stats *out);

/* Test hook: while on, a reclaimer that has taken a batch stops before its
 * system calls (holding no lock: the batch is in flight) until it is turned
 * off. jw_reclaim_test_held() counts the stops so far. */
void jw_reclaim_test_hold(int on);
uint64_t jw_reclaim_test_held(void);
/* The same in an aging pass: while on, a pass that unlinked pages from a
 * pool stops (the aging lock held, the pages not yet given back) until it is
 * turned off. The tiers call jw_reclaim_test_point_aging() at that point. */
void jw_reclaim_test_hold_aging(int on);
void jw_reclaim_test_point_aging(void);

#endif
