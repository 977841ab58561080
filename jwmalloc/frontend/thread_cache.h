/* The thread cache: per-thread bins, current/partial/full slabs, the page
 * pool, the ready stack; the registry that recycles caches of exited threads.
 *
 * Brief: "Frontend: uniform, pooled slabs"; design: docs/design/frontend.md.
 *
 * Library style (for the model-checking clients of part 5): every function
 * takes its state explicitly. `t` is the calling thread's jw_tls, `tc` the
 * thread cache attached to it; the owner-only parts of both are touched only
 * by that thread. Nothing here allocates through malloc or takes a lock.
 */
#ifndef JW_FRONTEND_THREAD_CACHE_H
#define JW_FRONTEND_THREAD_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/atomic.h"
#include "../common/config.h"
#include "../common/counter.h"
#include "../common/lock.h"
#include "../pages/tier_pages.h"
#include "block_cache.h"
#include "slab.h"

/* TLS part: what the fast paths touch. Zero means "no cache". */
enum { JW_TLS_NONE = 0, JW_TLS_ACTIVE, JW_TLS_SETUP, JW_TLS_DEAD };

typedef struct jw_tls {
  /* jw_class_bin_limit[c] minus the blocks in bin[c]: a free that takes it
   * below zero gives blocks back to their slabs (jw_tc_bin_overflow). */
  int16_t room[JW_NCLASSES];
  /* Per class, the thread's free blocks of its own slabs, any of them
   * (frontend.md, "The bin"): what a refill took off a slab, and what the
   * owner freed since. Counted live by their slabs. */
  jw_block *bin[JW_NCLASSES];
  /* The tag table of the GiB this thread freed into last (page_tag.h,
   * jw_tag_cache): its last page index (0: none), and the table biased so
   * that tag_words[a >> 12] is the word of address a in that GiB. */
  uintptr_t tag_last;
  jw_atomic_u64 *tag_words;
  uint64_t key;               /* tag of this thread's slabs; 0 without a cache */
  uint64_t fkey;              /* copy of jw_free_key (one TLS load on the free path) */
  uint64_t n_malloc, n_free;  /* fast-path calls since the last fold */
  /* Midend and range calls served by the block cache since the last fold. */
  uint64_t n_mid_malloc, n_mid_free, n_large_malloc, n_large_free;
  struct jw_tcache *tc;
  uint32_t state; /* JW_TLS_* */
  /* Cross-thread frees made without a cache since the last fold into the
   * process-wide counter (a shared counter per free would bounce its cache
   * line between every consumer thread). */
  uint32_t n_free_uncached;
  /* Return address of the public call now on a slow path (free, delete,
   * realloc), set only off the fast path: who called the allocator, so that
   * the reclaim thread is not created inside glibc's dynamic linker
   * (docs/design/reclamation.md, section 5). */
  const void *caller;
  /* The pending chains of cross-thread frees (frontend.md, "Batched remote
   * frees"), one per size class: rf_n[c] blocks of the slab of rf_head[c]
   * (NULL: none), linked rf_head[c] -> ... -> rf_tail[c], each marked free;
   * each pushed with one CAS. rf_mask: the classes with a chain. */
  jw_block *rf_head[JW_NCLASSES], *rf_tail[JW_NCLASSES];
  uint8_t rf_n[JW_NCLASSES];
  uint32_t rf_mask;
  /* Chains allowed: this thread's exit hook is registered (it pushes the
   * chain); cleared by the hook. */
  uint32_t rf_ok;
} jw_tls;

/* Thread-cache states (jw_tcache.state). */
enum { JW_TC_FREE = 0, JW_TC_LIVE = 1, JW_TC_ORPHANED = 2 };

typedef struct jw_tcache {
  struct jw_tcache *all_next; /* registry link; immutable once published */
  jw_atomic_u32 state;        /* JW_TC_* */
  uint32_t nslabs;            /* owner: pages used as slabs (not pooled) */
  uint32_t rq_shift;          /* owner: key shift of the partial queues (root_queue.h), changed by converting them */
  uint32_t place_word;        /* owner: jw_place_word as of the last conversion/trim (backend.md 7b) */
  uint32_t parked;            /* owner: released with its slabs kept, for the next thread (JWMALLOC_LOW_MEMORY) */
  uint32_t parked_seen;       /* owner: an aging pass found it parked (the next one gives it all back) */
  uint32_t pool_len;          /* pool lock */
  uint32_t pool_stale;        /* pool lock: LRU-end pages pooled since the last aging pass (page_pool.h) */
  uint32_t pool_peak;         /* pool lock: most slabs held since the last aging pass (returned pages' watermark) */
  jw_lock pool_lock;          /* owner and reclaimer, try-lock on malloc/free paths (page_pool.h, block_cache.h) */
  uint64_t key;               /* owner: this incarnation's slab tag */
  jw_slab *current[JW_NCLASSES];
  jw_rq_node *partial[JW_NCLASSES]; /* owner: slabs with local free blocks, lowest root first (root_queue.h) */
  jw_slab *full;                 /* owner: doubly linked, parked slabs */
  jw_slab *pool_head, *pool_tail; /* pool lock: LRU pool, head = most recently used */
  jw_atomic_ptr ready;            /* slabs notified by remote frees (push-only, owner takes all) */
  struct jw_slab *ready_todo;     /* owner: slabs taken off `ready`, not yet moved (bounded batches) */
  jw_bcache bc;                   /* pool lock: freed midend blocks and ranges (block_cache.h) */
  /* Statistics; written only by the thread using the cache (relaxed
   * load+store), read by anyone. */
  jw_atomic_u64 n_malloc, n_free, n_remote_free, pool_hits, pool_misses, pool_evictions, abandoned, adopted;
  jw_atomic_u64 n_mid_malloc, n_mid_free, n_large_malloc, n_large_free; /* served by the block cache */
} jw_tcache;

/* The registry's first cache (tc_registry.c); the rest follow all_next. Any
 * thread, lock-free: the list only grows and a cache is never freed, so a
 * walk may visit a cache in any state. Acquire: the links and contents of
 * published caches (their publishing CAS is a release). */
extern jw_atomic_ptr jw_tc_registry JW_HIDDEN;
static inline jw_tcache *jw_tc_first(void) { return jw_load(&jw_tc_registry, JW_ACQUIRE); }

/* Adopts a free thread cache from the registry or creates one; returns it
 * LIVE with a fresh key, or NULL with errno=ENOMEM. Lock-free. */
jw_tcache *jw_tc_acquire(void);

/* Attaches tc to the calling thread's t (fast paths start hitting). */
void jw_tc_attach(jw_tls *t, jw_tcache *tc);

/* Malloc slow path of class cls: refills the bin and returns one block,
 * ready to hand out (unpoisoned, key cleared, counted in t->n_malloc), or
 * NULL with errno=ENOMEM. */
jw_block *jw_tc_refill(jw_tls *t, jw_tcache *tc, unsigned cls);

/* Free slow path for block b of slab s (validated: a block start, not
 * already free). tc may be NULL (thread without a cache). Marks b free.
 * Returns false when s turns out to be a pooled page (b was not live). */
bool jw_tc_free(jw_tls *t, jw_tcache *tc, jw_slab *s, jw_block *b);

/* Owner: frees block b (validated, not free) of its own slab s (current,
 * partial or parked), marking it free with fkey. */
void jw_tc_free_own(jw_tcache *tc, jw_slab *s, jw_block *b, uint64_t fkey);

/* Owner (the free fast path took room[c] below zero): gives half of the
 * bin's bound back, the blocks freed last first, each to its own slab's local
 * list (a parked slab goes back to its partial queue, an emptied one leaves
 * its class: jw_tc_freed). */
void jw_tc_bin_overflow(jw_tls *t, jw_tcache *tc, unsigned c);

/* Owner: a block was just put on the local list of its own slab s (live
 * lowered): a parked slab goes back to its partial list, an emptied one
 * leaves its class (jw_tc_slab_emptied). */
void jw_tc_freed(jw_tcache *tc, jw_slab *s);

/* Adoption (frontend.md, "Thread exit, abandoned slabs and adoption"): the
 * calling thread, owner of the live cache tc, is freeing a live block of s,
 * a slab whose tag reads 0; if s is abandoned it becomes tc's (a partial
 * slab of its class, tagged with tc's key, its free blocks the local list)
 * and true is returned: the caller frees the block as the owner. False when
 * s is not abandoned (another thread adopted it, or it is no live slab).
 * Lock-free: one CAS. */
bool jw_tc_adopt(jw_tcache *tc, jw_slab *s);

/* What a remote free does after the push when the slab needs more than it
 * (notify the owner, adopt an abandoned slab's page, report a pooled page):
 * the rare outcomes of jw_tc_free_remote. Returns its result. */
bool jw_tc_remote_outcome(jw_tcache *tc, jw_slab *s, jw_remote_result r);

/* The part of jw_tc_free for a slab s that is not the caller's (tc: the
 * caller's cache, or NULL): b is marked free and joins s's remote list
 * (lock-free). For a caller that already knows s is not its own (frontend.md,
 * "Frees from other threads"). Same result as jw_tc_free. Inline: with the
 * push it is the whole of a remote free after validation. */
static inline bool jw_tc_free_remote(jw_tcache *tc, jw_slab *s, jw_block *b) {
  jw_block_set_free(b, NULL, jw_load(&jw_free_key, JW_RELAXED));
  if (tc) jw_counter_add_owner(&tc->n_remote_free, 1);
  jw_remote_result r = jw_slab_remote_free(s, b);
  return r == JW_REMOTE_PUSHED || r == JW_REMOTE_ABANDONED || jw_tc_remote_outcome(tc, s, r);
}

/* Longest pending chain: the bound's push happens at the free that makes
 * it this long (frontend.md, "Batched remote frees": chosen by measurement). */
#ifndef JW_RF_BOUND
#define JW_RF_BOUND 16
#endif
_Static_assert(JW_RF_BOUND >= 1 && JW_RF_BOUND <= 255, "rf_n is a byte");
_Static_assert(JW_NCLASSES <= 32, "rf_mask has a bit per class");

/* Pushes t's pending chain of class c (one CAS) and completes its outcome
 * (notify the owner, adopt an abandoned slab's page into tc's pool, or give
 * it back when tc is NULL); that chain is empty afterwards. tc: the calling
 * thread's cache or NULL. Returns NULL, or the chain's first block when its
 * slab is a pooled page (every block of it was already free: the caller
 * reports a double free). Calling thread only; lock-free. */
void *jw_tc_remote_flush_class(jw_tls *t, jw_tcache *tc, unsigned c);

/* Every pending chain of t (rf_mask != 0), as above; returns the first
 * block to report, if any (every chain is pushed either way). */
void *jw_tc_remote_flush(jw_tls *t, jw_tcache *tc);

/* The common case of a batched cross-thread free (frontend.md, "Batched
 * remote frees"): t already has a chain of block b's slab s, below the bound
 * after b; b (validated, not free, not the caller's) is marked free with
 * fkey and linked on with plain stores. Returns false, having done nothing,
 * in every other case (jw_tc_chain_add then). A non-empty chain implies
 * t->rf_ok. Inline: a few loads and stores. */
static inline bool jw_tc_chain_append(jw_tls *t, jw_slab *s, jw_block *b, uint64_t fkey) {
  unsigned c = s->cls; /* owner-stable while the slab is live (validated) */
  jw_block *h = t->rf_head[c];
  if (h == NULL || jw_slab_of(h) != s || t->rf_n[c] >= JW_RF_BOUND - 1) return false;
  jw_block_set_free(b, h, fkey);
  t->rf_head[c] = b;
  t->rf_n[c]++;
  return true;
}

/* The rest of a batched cross-thread free (t->rf_ok set; block b of slab s
 * as above, where jw_tc_chain_append declined): b is marked free; a chain of
 * s that reaches JW_RF_BOUND with b is pushed, a chain of another slab of
 * the class is pushed and b starts a new one, or b starts the class's
 * chain. tc: the caller's cache or NULL. Returns NULL, or a block to report
 * as a double free (jw_tc_remote_flush_class). */
void *jw_tc_chain_add(jw_tls *t, jw_tcache *tc, jw_slab *s, jw_block *b, uint64_t fkey);

/* Owner: slab s of tc reached live == 0 (every block free): unless it is
 * current or waiting on the ready stack, it leaves for the pool. */
void jw_tc_slab_emptied(jw_tcache *tc, jw_slab *s);

/* Thread exit: hands everything back (bins, slabs, pool, block cache) and
 * returns tc to the registry; t ends DEAD. With JWMALLOC_LOW_MEMORY=1 the
 * cache is parked instead: bins and block cache given back, slabs and pool
 * kept with the cache's key, for the next thread that takes the cache
 * (docs/design/api.md, "Low-memory configuration"). */
void jw_tc_release(jw_tls *t, jw_tcache *tc);

/* malloc_trim: empties the pool and the block cache and gives back empty
 * current slabs. Returns true when pages were given back. */
bool jw_tc_trim(jw_tls *t, jw_tcache *tc);

/* A refill folds the fast paths' counters once this many mallocs are
 * unfolded (statistics of other threads lag by at most about this much). */
#define JW_TC_FOLD_EVERY 1024
/* Folds t's fast-path counters into tc's statistics. */
void jw_tc_fold(jw_tls *t, jw_tcache *tc);

/* Reclaimer (the aging pass, docs/design/reclamation.md section 6): gives
 * back the pages that stayed unused in any thread's pool, and the blocks that
 * stayed unused in its block cache, since the previous pass, trying each pool
 * lock only. Returns the bytes still pooled or cached. */
uint64_t jw_tc_age_pools(void);

/* fork child: every other LIVE cache becomes ORPHANED (never reused). */
void jw_tc_orphan_others(jw_tcache *self);

/* Sums of every cache's statistics (exited ones included). */
typedef struct jw_tc_totals {
  uint64_t mallocs, frees, remote_frees, pool_hits, pool_misses, pool_evictions, abandoned, adopted;
  uint64_t pool_aged; /* pool pages given back by the reclaimer's aging passes */
  uint64_t mid_mallocs, mid_frees, large_mallocs, large_frees; /* served by block caches */
  uint64_t bc_aged;   /* blocks given back by the aging passes */
} jw_tc_totals;
void jw_tc_totals_get(jw_tc_totals *out);

/* Test hook: the slabs that caches released by their threads (free, not
 * parked) still point to (current, partial, full, ready, slab count): 0
 * unless a release went wrong. Call it while no thread starts or ends (a
 * cache taken meanwhile is read as it changes). */
uint64_t jw_tc_released_held(void);


#endif
