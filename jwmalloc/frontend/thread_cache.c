/* See thread_cache.h and docs/design/frontend.md. */
#include "thread_cache.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "../common/backoff.h"
#include "../common/config.h"
#include "../common/counter.h"
#include "../common/log.h"
#include "../common/options.h"
#include "../pages/tier_pages.h"
#include "../reclaim/reclaim.h"
#include "page_pool.h"

static jw_atomic_u64 pool_aged;  /* statistics: pages the aging passes gave back */
static jw_atomic_u64 bc_aged;    /* statistics: block-cache blocks the aging passes gave back */

/* Room of a bin that keeps no freed block (frontend.md, "The bin": placement
 * on, or JWMALLOC_BIN=0): so negative that every free overflows, and the
 * overflow gives that one block back to its slab; mallocs (at most a refill's
 * worth, 64) do not bring it near zero. */
#define JW_ROOM_DIRECT (-16384)

/* Whether the bins keep freed blocks now: not with placement on, whose
 * refills must find the freed blocks on their slabs (frontend.md, "The bin"),
 * nor with JWMALLOC_BIN=0. */
static inline bool bins_keep(const jw_tcache *tc) { return tc->rq_shift == 63 && jw_opt(JW_OPT_BIN) != 0; }

/* ---- owner-only doubly linked lists (partial per class, full) ---- */

static void list_push(jw_slab **head, jw_slab *s) {
  s->prev = NULL;
  s->next = *head;
  if (*head) (*head)->prev = s;
  *head = s;
}

static void list_remove(jw_slab **head, jw_slab *s) {
  if (s->prev) s->prev->next = s->next;
  else *head = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
}

/* Partial slabs wait in a queue per class grouped by root, lowest root first
 * (pages/root_queue.h, frontend.md "Placement"): refills fill the slabs of
 * low roots, so the slabs of high roots drain and their roots can go back
 * whole; within a root a slab is reused after the longest wait, with as many
 * blocks freed into it as possible. */
static jw_slab *partial_min(jw_tcache *tc, unsigned cls) {
  jw_rq_node *n = tc->partial[cls];
  return n ? (jw_slab *)((char *)n - offsetof(jw_slab, qnode)) : NULL;
}

/* Root-grouped (out of line: inlined, the queue's code makes refill save
 * more registers on its every call) or, with placement off, the plain queue
 * of before (root_queue.h). */
static __attribute__((noinline)) void partial_add_rooted(jw_tcache *tc, jw_slab *s) {
  jw_rq_add(&tc->partial[s->cls], &s->qnode, tc->rq_shift);
}

static __attribute__((noinline)) void partial_remove_rooted(jw_tcache *tc, jw_slab *s) {
  jw_rq_remove(&tc->partial[s->cls], &s->qnode, tc->rq_shift);
}

static inline void partial_append(jw_tcache *tc, jw_slab *s) {
  if (JW_LIKELY(tc->rq_shift == 63)) jw_fifo_add(&tc->partial[s->cls], &s->qnode);
  else partial_add_rooted(tc, s);
}

static inline void partial_remove(jw_tcache *tc, jw_slab *s) {
  if (JW_LIKELY(tc->rq_shift == 63)) jw_fifo_remove(&tc->partial[s->cls], &s->qnode);
  else partial_remove_rooted(tc, s);
}

static void list_leave(jw_tcache *tc, jw_slab *s) {
  if (s->where == JW_WHERE_FULL) list_remove(&tc->full, s);
  else partial_remove(tc, s);
}

/* ---- registry (tc_registry.c): statistics ---- */

void jw_tc_fold(jw_tls *t, jw_tcache *tc) {
  if (t->n_malloc) jw_counter_add_owner(&tc->n_malloc, t->n_malloc);
  if (t->n_free) jw_counter_add_owner(&tc->n_free, t->n_free);
  t->n_malloc = t->n_free = 0;
  if (t->n_mid_malloc | t->n_mid_free | t->n_large_malloc | t->n_large_free) {
    jw_counter_add_owner(&tc->n_mid_malloc, t->n_mid_malloc);
    jw_counter_add_owner(&tc->n_mid_free, t->n_mid_free);
    jw_counter_add_owner(&tc->n_large_malloc, t->n_large_malloc);
    jw_counter_add_owner(&tc->n_large_free, t->n_large_free);
    t->n_mid_malloc = t->n_mid_free = t->n_large_malloc = t->n_large_free = 0;
  }
}

void jw_tc_totals_get(jw_tc_totals *o) {
  memset(o, 0, sizeof *o);
  for (jw_tcache *tc = jw_tc_first(); tc; tc = tc->all_next) {
    o->mallocs += jw_counter_get(&tc->n_malloc);
    o->frees += jw_counter_get(&tc->n_free);
    o->remote_frees += jw_counter_get(&tc->n_remote_free);
    o->pool_hits += jw_counter_get(&tc->pool_hits);
    o->pool_misses += jw_counter_get(&tc->pool_misses);
    o->pool_evictions += jw_counter_get(&tc->pool_evictions);
    o->abandoned += jw_counter_get(&tc->abandoned);
    o->adopted += jw_counter_get(&tc->adopted);
    o->mid_mallocs += jw_counter_get(&tc->n_mid_malloc);
    o->mid_frees += jw_counter_get(&tc->n_mid_free);
    o->large_mallocs += jw_counter_get(&tc->n_large_malloc);
    o->large_frees += jw_counter_get(&tc->n_large_free);
  }
  o->pool_aged = jw_counter_get(&pool_aged);
  o->bc_aged = jw_counter_get(&bc_aged);
}

/* Block cache blocks, with their bins: every entry of one cache fits. */
typedef struct bc_out {
  void *blk[JW_BC_BINS * JW_BC_SLOTS];
  uint8_t bin[JW_BC_BINS * JW_BC_SLOTS];
} bc_out;

/* Reclaimer: the blocks of tc's block cache unused since the previous pass
 * go back as aged frees. Returns the bytes still cached (1 when the owner
 * holds the pool lock: looked at again at the next pass). */
static uint64_t age_block_cache(jw_tcache *tc) {
  if (!JW_BC_ENABLED) return 0;
  bc_out o;
  uint64_t left = 1;
  size_t n = 0;
  if (jw_lock_try(&tc->pool_lock, JW_LK_POOL)) {
    n = jw_bc_age_locked(&tc->bc, o.blk, o.bin, &left);
    jw_lock_release(&tc->pool_lock);
  }
  /* Taken out under the pool lock, given back after it (never waits). */
  jw_bc_give_back(o.blk, o.bin, n, true);
  if (n) jw_counter_add(&bc_aged, n);
  return left;
}

/* Owner (thread exit, malloc_trim): every cached block back to its tier.
 * Waits for a reclaimer holding the pool lock (a bounded unlink). */
static size_t flush_block_cache(jw_tcache *tc) {
  if (!JW_BC_ENABLED) return 0;
  bc_out o;
  jw_lock_acquire(&tc->pool_lock, JW_LK_POOL);
  size_t n = jw_bc_take_all_locked(&tc->bc, o.blk, o.bin);
  jw_lock_release(&tc->pool_lock);
  jw_bc_give_back(o.blk, o.bin, n, false);
  return n;
}

/* ---- placement on demand (backend.md 7b, "Placement on demand") ---- */

/* Gives back what pins roots above the one the backend fills, among what
 * the pool lock guards: block-cache entries and pooled pages of such roots.
 * Owner (at a new epoch) or reclaimer (aging pass while placement is on);
 * tries the pool lock only. False when it was busy (nothing done). */
static bool trim_high_roots(jw_tcache *tc) {
  enum { CAP = 64 };
  bc_out o;
  jw_slab *pg[CAP];
  if (!jw_lock_try(&tc->pool_lock, JW_LK_POOL)) return false;
  size_t n = jw_bc_take_above_locked(&tc->bc, o.blk, o.bin);
  size_t np = jw_pool_take_above_locked(tc, pg, CAP);
  for (;;) {
    jw_lock_release(&tc->pool_lock);
    /* Given back after the lock (never waits: backend frees defer). */
    for (size_t i = 0; i < np; i++) jw_tier_release_pages(pg[i], 1);
    if (np < CAP || !jw_lock_try(&tc->pool_lock, JW_LK_POOL)) break;
    np = jw_pool_take_above_locked(tc, pg, CAP);
  }
  jw_bc_give_back(o.blk, o.bin, n, false);
  return true;
}

static void fifo_add(jw_rq_node **q, jw_rq_node *n, unsigned shift) {
  (void)shift;
  jw_fifo_add(q, n);
}

/* Every partial queue of tc converted to `shift`; with checks on, each is
 * verified before and after (a broken queue stops the process). */
static void convert_queues(jw_tcache *tc, unsigned shift) {
  bool check = jw_pages_checking();
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    long before = check ? jw_rq_check(&tc->partial[c], tc->rq_shift, 1) : 0;
    jw_rq_requeue(&tc->partial[c], shift == 63 ? fifo_add : jw_rq_add, shift);
    if (check && (before < 0 || jw_rq_check(&tc->partial[c], shift, 1) != before))
      jw_fatal("thread cache %p class %u: partial queue broken converting %u -> %u (%ld slabs before)", (void *)tc,
               c, tc->rq_shift, shift, before);
  }
  tc->rq_shift = shift;
}

/* The owner saw a new placement word at a slow refill: converts its queues
 * to the mode in force and, with placement on, trims (the trim epoch). The
 * word is recorded only when both are done (a busy pool lock: the next
 * refill tries again). */
static void flush_bin(jw_tls *t, jw_tcache *tc, unsigned c);

static JW_NOINLINE __attribute__((cold)) void place_resync(jw_tls *t, jw_tcache *tc) {
  uint32_t w = jw_load(&jw_place_word, JW_RELAXED); /* a setting */
  unsigned shift = (w & 1u) ? JW_ROOT_SHIFT : 63;
  if (shift != tc->rq_shift) {
    /* The bins' blocks back to their slabs first (in the queues' old mode),
     * and the bins set for the new one (frontend.md, "The bin"). */
    unsigned old = tc->rq_shift;
    for (unsigned c = 0; c < JW_NCLASSES; c++) flush_bin(t, tc, c);
    convert_queues(tc, shift);
    if (old == 63) /* now without bins */
      for (unsigned c = 0; c < JW_NCLASSES; c++) t->room[c] = (int16_t)JW_ROOM_DIRECT;
  }
  if ((w & 1u) && !trim_high_roots(tc)) return;
  tc->place_word = w;
}

static void release_all(jw_tls *t, jw_tcache *tc);

/* Reclaimer: a parked cache (JWMALLOC_LOW_MEMORY) that no thread took from
 * one aging pass to the next gives everything back, as a thread exit of the
 * default configuration does: the reclaimer takes it as its owner for the
 * time (the CAS a thread's adoption makes), with an empty TLS (the parking
 * thread gave its bins back). One to two intervals, the countdown of every
 * cache. */
static uint64_t age_parked(jw_tcache *tc) {
  uint32_t expected = JW_TC_FREE;
  /* Relaxed peek, then acquire CAS: what the parking thread wrote. */
  if (jw_load(&tc->state, JW_RELAXED) != JW_TC_FREE || !jw_cas(&tc->state, &expected, JW_TC_LIVE, JW_ACQUIRE, JW_RELAXED))
    return 0;
  uint64_t held = 0;
  if (tc->parked && tc->parked_seen) {
    tc->parked = 0;
    jw_tls t;
    memset(&t, 0, sizeof t);
    t.key = tc->key;
    t.tc = tc;
    t.state = JW_TLS_ACTIVE;
    release_all(&t, tc); /* ends FREE */
    return 0;
  }
  if (tc->parked) {
    tc->parked_seen = 1;
    held = (uint64_t)tc->nslabs * JW_SLAB_SIZE; /* held: keeps the reclaimer running to the next pass */
  }
  jw_store(&tc->state, JW_TC_FREE, JW_RELEASE); /* as it was, for the next thread */
  return held;
}

uint64_t jw_tc_age_pools(void) {
  enum { CAP = 64 };
  jw_slab *out[CAP];
  uint64_t held = 0;
  /* Caches are never freed: safe to visit in any state; a released cache's
   * pool is empty. */
  for (jw_tcache *tc = jw_tc_first(); tc; tc = tc->all_next) {
    /* A fork child's caches of threads that do not exist there are left
     * alone: one may have been in the middle of a pool operation (its pool
     * lock held for ever, its list half changed). Relaxed: set once, in the
     * single-threaded child. */
    if (jw_load(&tc->state, JW_RELAXED) == JW_TC_ORPHANED) continue;
    held += age_parked(tc);
    int more;
    do {
      size_t left;
      size_t n = jw_pool_age(tc, out, CAP, &left, &more);
      if (n) jw_reclaim_test_point_aging(); /* test hook: one load when not testing */
      /* Unlinked under the pool lock, given back after it (never waits:
       * deferred when the backend lock is busy). */
      for (size_t i = 0; i < n; i++) jw_tier_release_aged(out[i], 1);
      if (n) jw_counter_add(&pool_aged, n);
      if (!more) held += (uint64_t)left * JW_SLAB_SIZE;
    } while (more);
    held += age_block_cache(tc);
    /* Placement on: what pins high roots goes back now, not when stale. */
    if (jw_place_on()) trim_high_roots(tc);
  }
  return held;
}

#ifdef JW_DEBUG
#include "../common/log.h"
static unsigned local_len(jw_slab *s) {
  unsigned n = 0;
  for (jw_block *b = s->local; b; b = jw_block_next(b)) n++;
  return n;
}
#define JW_CHECK_LOCAL(s, want, what)                                                                        \
  do {                                                                                                       \
    unsigned got_ = local_len(s);                                                                            \
    if (got_ != (want)) jw_fatal("%s: slab %p class %u local %u want %u live %u", what, (void *)(s), (s)->cls, \
                                 got_, (unsigned)(want), (s)->live);                                         \
  } while (0)
#else
#define JW_CHECK_LOCAL(s, want, what) ((void)0)
#endif

/* ---- slab movements (owner) ---- */

/* An empty slab leaves its class: current slabs stay (see frontend.md),
 * NOTIFIED ones wait for the ready-stack drain, the rest go to the pool. */
void jw_tc_slab_emptied(jw_tcache *tc, jw_slab *s) {
  if (s->where == JW_WHERE_CURRENT) return;
  if (s->where == JW_WHERE_FULL && (jw_load(&s->remote, JW_RELAXED) & JW_RS_MASK) == JW_RS_NOTIFIED) return;
  JW_CHECK_LOCAL(s, s->capacity, "emptied");
  list_leave(tc, s);
  tc->nslabs--;
  jw_pool_put(tc, s, false);
}

/* A parked slab got free blocks: back to its class's partial list. */
static inline void slab_unpark(jw_tcache *tc, jw_slab *s) {
  list_remove(&tc->full, s);
  s->where = JW_WHERE_PARTIAL;
  partial_append(tc, s);
  jw_slab_set_tag(s, tc->key); /* only the owner acts on its key */
}

/* A refill moves at most this many notified slabs (frontend.md, "Refill"):
 * the rest wait, still NOTIFIED, for the next refills. */
#define JW_READY_BATCH 16

/* Moves up to `limit` slabs taken off the ready stack (taking the stack
 * when none is left from before). With `move`, each slab leaves the full
 * list (to the partial list or, if now empty, the pool); otherwise (thread
 * exit) only its state is reset. */
static JW_NOINLINE void drain_ready_list(jw_tcache *tc, bool move, unsigned limit) {
  /* Acquire exchange: the notifiers' ready_next links. A slab stays
   * NOTIFIED until moved, so no notifier pushes it again meanwhile and its
   * ready_next stays ours. */
  if (tc->ready_todo == NULL) tc->ready_todo = jw_xchg(&tc->ready, NULL, JW_ACQUIRE);
  for (unsigned n = 0; tc->ready_todo != NULL && n < limit; n++) {
    jw_slab *s = tc->ready_todo;
    tc->ready_todo = s->ready_next;
    jw_slab_unnotify(s);
    if (move) {
      jw_slab_collect(s);
      if (s->live == 0) {
        list_remove(&tc->full, s);
        tc->nslabs--;
        jw_pool_put(tc, s, true); /* its consumers emptied it: a producer's page */
      } else {
        slab_unpark(tc, s);
      }
    }
  }
}

/* Everything notified until now. */
static inline void drain_ready(jw_tcache *tc, bool move) {
  if (tc->ready_todo != NULL) drain_ready_list(tc, move, UINT32_MAX);
  /* Relaxed peek: an empty stack (the common case) costs no exchange. */
  if (jw_load(&tc->ready, JW_RELAXED) != NULL) drain_ready_list(tc, move, UINT32_MAX);
}

/* A refill's share: one batch. */
static inline void drain_ready_batch(jw_tcache *tc) {
  if (tc->ready_todo != NULL || jw_load(&tc->ready, JW_RELAXED) != NULL) /* relaxed peek, as above */
    drain_ready_list(tc, true, JW_READY_BATCH);
}

/* Moves the local list of s into the bin, at most the bin's bound of it
 * (the rest stays on the slab), and pops one block, ready to hand out
 * (unpoisoned, its key cleared, counted). The bin is empty. */
static jw_block *take_local(jw_tls *t, jw_tcache *tc, jw_slab *s) {
  JW_CHECK_LOCAL(s, s->capacity - s->live, "take_local");
  unsigned c = s->cls, k = s->capacity - s->live, lim = jw_class_bin_limit[c];
  jw_block *b = s->local;
  if (JW_LIKELY(k <= lim)) {
    s->local = NULL;
    s->live = s->capacity;
  } else { /* a class of more than 64 blocks a page: the first 64 */
    jw_block *tail = b;
    for (unsigned i = 1; i < lim; i++) tail = jw_block_next(tail);
    s->local = jw_block_next(tail);
    jw_block_set_next(tail, NULL);
    s->live += lim;
    k = lim;
  }
  t->bin[c] = jw_block_next(b);
  t->room[c] = JW_LIKELY(bins_keep(tc)) ? (int16_t)(lim - (k - 1)) : (int16_t)JW_ROOM_DIRECT;
  jw_unpoison(b, jw_class_size[c]);
  b->key = 0;
  t->n_malloc++;
  return b;
}

static JW_NOINLINE jw_block *refill_slow(jw_tls *t, jw_tcache *tc, unsigned cls);
static inline __attribute__((always_inline)) jw_block *refill_other(jw_tls *t, jw_tcache *tc, unsigned cls);

/* Placement (frontend.md): the current slab s, its bin empty, steps aside
 * for a partial slab of a lower root: into the partial queue when it has
 * free blocks, to the pool when every block is free, else parked full. */
static __attribute__((noinline, cold)) void current_step_aside(jw_tcache *tc, jw_slab *s) {
  tc->current[s->cls] = NULL;
  if (s->local == NULL) jw_slab_collect(s);
  if (s->local == NULL) {
    if (jw_slab_park(s, tc->key)) {
      s->where = JW_WHERE_FULL;
      list_push(&tc->full, s);
      return;
    }
    jw_slab_collect(s); /* a remote free arrived: it is ours now */
  }
  if (s->live == 0) {
    tc->nslabs--;
    jw_pool_put(tc, s, false);
    return;
  }
  s->where = JW_WHERE_PARTIAL;
  partial_append(tc, s);
}

jw_block *jw_tc_refill(jw_tls *t, jw_tcache *tc, unsigned cls) {
  /* The common case, with no call (so no stack frame): the current slab is
   * used up with no remote frees pending, no slab waits on the ready stack,
   * and the head of the partial queue has local blocks; it becomes current,
   * and the used-up slab goes to the queue's tail unparked (a lazy park:
   * frontend.md, "Refill"), so the owner's frees into it stay on the fast
   * path and it is parked only if a refill finds it at the head with
   * nothing free. No atomic. Anything else: the general path. */
  /* With placement on (rq_shift < 63) always the general path: its queue
   * operations are calls, and a call here would cost this path a frame. */
  jw_slab *s = tc->current[cls], *h = partial_min(tc, cls);
  if (JW_LIKELY(s != NULL && h != NULL && s->local == NULL && t->n_malloc < JW_TC_FOLD_EVERY &&
                tc->rq_shift == 63 && tc->ready_todo == NULL &&
                jw_load(&tc->ready, JW_RELAXED) == NULL) && /* relaxed peeks, as in drain_ready */
      (jw_load(&s->remote, JW_RELAXED) & ~JW_RS_MASK) == 0 && h->local != NULL) {
    jw_fifo_remove(&tc->partial[cls], &h->qnode);
    s->where = JW_WHERE_PARTIAL;
    jw_fifo_add(&tc->partial[cls], &s->qnode);
    h->where = JW_WHERE_CURRENT;
    tc->current[cls] = h;
    return take_local(t, tc, h);
  }
  return refill_slow(t, tc, cls);
}

static JW_NOINLINE jw_block *refill_slow(jw_tls *t, jw_tcache *tc, unsigned cls) {
  /* The fast paths' counts reach the statistics here, in batches (a reader
   * folds its own thread's, jw_stats_get). */
  if (t->n_malloc >= JW_TC_FOLD_EVERY) jw_tc_fold(t, tc);
  /* Placement switched or a trim asked for (backend.md 7b). Relaxed: a
   * setting, re-read by place_resync. */
  if (JW_UNLIKELY(tc->place_word != jw_load(&jw_place_word, JW_RELAXED))) place_resync(t, tc);
  jw_slab *s = tc->current[cls];
  if (s) {
    /* Placement: a partial slab in a lower root displaces the current slab
     * (frontend.md; never with oldest-first placement, shift 63). */
    if (JW_UNLIKELY(tc->rq_shift != 63) && tc->partial[cls] &&
        jw_rq_key(tc->partial[cls], tc->rq_shift) < jw_rq_key(&s->qnode, tc->rq_shift))
      return refill_other(t, tc, cls);
    if (s->local == NULL) jw_slab_collect(s);
    if (s->local) return take_local(t, tc, s);
    if (!jw_slab_park(s, tc->key)) {
      jw_slab_collect(s); /* a remote free arrived: it is ours now */
      return take_local(t, tc, s);
    }
    s->where = JW_WHERE_FULL;
    list_push(&tc->full, s);
    tc->current[cls] = NULL;
  }
  return refill_other(t, tc, cls);
}

/* The current slab is parked (or there is none): the head of the partial
 * queue, else a pool page, else a new page. Inline in refill_slow (its only
 * caller, out of line itself), so that with placement off the general refill
 * is the code of before, call for call. */
static inline __attribute__((always_inline)) jw_block *refill_other(jw_tls *t, jw_tcache *tc, unsigned cls) {
  jw_slab *s = tc->current[cls];
  if (JW_UNLIKELY(s != NULL)) current_step_aside(tc, s); /* still current only when it steps aside */
  drain_ready_batch(tc);
  while ((s = partial_min(tc, cls)) != NULL) {
    partial_remove(tc, s);
    if (s->local == NULL) jw_slab_collect(s);
    s->where = JW_WHERE_CURRENT;
    tc->current[cls] = s;
    if (s->local) return take_local(t, tc, s);
    /* Defensive: a partial slab always has local blocks. */
    if (!jw_slab_park(s, tc->key)) {
      jw_slab_collect(s);
      return take_local(t, tc, s);
    }
    s->where = JW_WHERE_FULL;
    list_push(&tc->full, s);
    tc->current[cls] = NULL;
  }
  s = jw_pool_take(tc);
  bool pooled = s != NULL;
  if (pooled) {
    jw_counter_add_owner(&tc->pool_hits, 1);
  } else {
    s = jw_tier_take_pages(1, JW_KIND_SMALL_SLAB, NULL, NULL);
    if (s == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    jw_counter_add_owner(&tc->pool_misses, 1);
  }
  /* Only a pooled page's header is ours to trust: a page from the backend
   * may have served any tier since. */
  if (pooled && jw_slab_list_whole(s, cls)) jw_slab_reuse(s, tc, tc->key); /* an emptied slab of this class */
  else jw_slab_init(s, cls, tc, tc->key);
  tc->nslabs++;
  tc->current[cls] = s;
  return take_local(t, tc, s);
}

bool jw_tc_adopt(jw_tcache *tc, jw_slab *s) {
  if (!jw_slab_adopt(s)) return false;
  /* Relaxed: notifiers read the owner only after the FULL state, which a
   * later park publishes with release. */
  jw_store(&s->owner, (void *)tc, JW_RELAXED);
  s->next = s->prev = s->ready_next = NULL;
  s->where = JW_WHERE_PARTIAL;
  partial_append(tc, s);
  jw_slab_set_tag(s, tc->key); /* our frees into it take the fast path from now on */
  tc->nslabs++;
  jw_counter_add_owner(&tc->adopted, 1);
  return true;
}

/* jw_tc_freed's unpark with placement on (root-grouped queue). */
static JW_NOINLINE void unpark_rooted(jw_tcache *tc, jw_slab *s) {
  slab_unpark(tc, s);
  if (s->live == 0) jw_tc_slab_emptied(tc, s);
}

void jw_tc_freed(jw_tcache *tc, jw_slab *s) {
  if (s->where == JW_WHERE_FULL) {
    jw_remote_word w = jw_load(&s->remote, JW_RELAXED);
    /* FULL -> ACTIVE, list kept; NOTIFIED slabs are moved by the drain. */
    while ((w & JW_RS_MASK) == JW_RS_FULL &&
           !jw_cas_weak(&s->remote, &w, w & ~JW_RS_MASK, JW_RELAXED, JW_RELAXED)) {
    }
    if ((w & JW_RS_MASK) == JW_RS_FULL) {
      /* Placement on: out of line and a tail call, so that this free path
       * keeps no stack frame in either mode. */
      if (JW_UNLIKELY(tc->rq_shift != 63)) return unpark_rooted(tc, s);
      list_remove(&tc->full, s);
      s->where = JW_WHERE_PARTIAL;
      jw_fifo_add(&tc->partial[s->cls], &s->qnode);
      jw_slab_set_tag(s, tc->key); /* as in slab_unpark */
    }
  }
  if (s->live == 0) jw_tc_slab_emptied(tc, s);
}

void jw_tc_free_own(jw_tcache *tc, jw_slab *s, jw_block *b, uint64_t fkey) {
  jw_block_set_free(b, s->local, fkey);
  s->local = b;
  s->live--;
  jw_tc_freed(tc, s);
}

/* Gives the blocks of the list b (of bin c) back, each to the local list of
 * its own slab (jw_tc_freed moves the slab as a free would); room grows by
 * their number. */
static void give_back_list(jw_tls *t, jw_tcache *tc, unsigned c, jw_block *b) {
  while (b != NULL) {
    jw_block *next = jw_block_next(b);
    jw_slab *s = jw_slab_of(b);
    jw_block_set_next(b, s->local); /* its key says free already */
    s->local = b;
    s->live--;
    t->room[c]++;
    jw_tc_freed(tc, s);
    b = next;
  }
}

/* Keeps the first `keep` blocks of bin c (the ones freed last) and gives the
 * rest back (the oldest: so that a block cannot stay in the bin for ever while
 * frees go on, pinning its slab). */
static void bin_keep(jw_tls *t, jw_tcache *tc, unsigned c, unsigned keep) {
  jw_block *b = t->bin[c];
  if (keep == 0) {
    t->bin[c] = NULL;
    give_back_list(t, tc, c, b);
    return;
  }
  for (unsigned i = 1; i < keep && b != NULL; i++) b = jw_block_next(b);
  if (b == NULL) return;
  jw_block *old = jw_block_next(b);
  jw_block_set_next(b, NULL);
  give_back_list(t, tc, c, old);
}

void jw_tc_bin_overflow(jw_tls *t, jw_tcache *tc, unsigned c) {
  /* Placement switched (the reclaimer saw a trough): every bin goes back
   * first (place_resync), so that the slabs of high roots can drain. */
  if (JW_UNLIKELY(tc->place_word != jw_load(&jw_place_word, JW_RELAXED))) place_resync(t, tc);
  if (t->room[c] < JW_ROOM_DIRECT / 2) {
    if (!bins_keep(tc)) { /* no bin: the block just freed goes to its slab */
      jw_block *b = t->bin[c];
      if (b == NULL) return; /* place_resync gave it back */
      t->bin[c] = jw_block_next(b);
      jw_block_set_next(b, NULL);
      give_back_list(t, tc, c, b);
      return;
    }
    /* Bins are back on: this bin's length, then the usual bound. */
    int16_t n = 0;
    for (jw_block *b = t->bin[c]; b != NULL; b = jw_block_next(b)) n++;
    t->room[c] = (int16_t)(jw_class_bin_limit[c] - n);
    if (t->room[c] >= 0) return;
  }
  if (!bins_keep(tc)) {
    bin_keep(t, tc, c, 0);
    t->room[c] = JW_ROOM_DIRECT;
    return;
  }
  bin_keep(t, tc, c, jw_class_bin_limit[c] / 2u);
}

/* Every block of bin c back to its slab; an empty bin has its whole bound as
 * room (or the no-bin room). */
static void flush_bin(jw_tls *t, jw_tcache *tc, unsigned c) {
  bin_keep(t, tc, c, 0);
  t->room[c] = bins_keep(tc) ? (int16_t)jw_class_bin_limit[c] : (int16_t)JW_ROOM_DIRECT;
}

bool jw_tc_free(jw_tls *t, jw_tcache *tc, jw_slab *s, jw_block *b) {
  uint64_t fkey = jw_load(&jw_free_key, JW_RELAXED);
  uint64_t tag = jw_load(&s->tag, JW_RELAXED); /* own key: written by us */
  if (tc && t->key && (tag == t->key || tag == (t->key | 1))) {
    jw_tc_free_own(tc, s, b, fkey);
    return true;
  }
  return jw_tc_free_remote(tc, s, b);
}

void jw_tc_release(jw_tls *t, jw_tcache *tc) {
  if (!jw_low_memory()) {
    release_all(t, tc);
    return;
  }
  jw_tc_fold(t, tc);
  flush_block_cache(tc);
  {
    /* Parked: the slabs stay this cache's, partly used as they are, and the
     * next thread to take it fills them (an abandoned slab's free blocks
     * serve nobody until its last block is freed). Remote frees meanwhile
     * join their slabs' lists and the ready stack, as for a live owner. */
    for (unsigned c = 0; c < JW_NCLASSES; c++) flush_bin(t, tc, c);
    t->key = 0;
    t->tag_last = 0; /* as in release_all */
    t->tc = NULL;
    t->state = JW_TLS_DEAD;
    tc->parked = 1;
    tc->parked_seen = 0;
    jw_store(&tc->state, JW_TC_FREE, JW_RELEASE); /* the next user's acquire CAS sees it all */
    jw_reclaim_kick(); /* it ages from now on, if no thread takes it */
  }
}

/* Everything back (the thread exit of the default configuration; a parked
 * cache that no thread took, for the reclaimer). */
static void release_all(jw_tls *t, jw_tcache *tc) {
  jw_tc_fold(t, tc);
  flush_block_cache(tc);
  t->key = 0; /* our slabs no longer pass the fast-path check */
  t->tag_last = 0; /* nor any page: the fast path compares words only with a key (page_tag.h) */
  /* Every slab onto one list (owner links), then each is abandoned or,
   * if empty, given back. */
  jw_slab *todo = NULL;
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    flush_bin(t, tc, c);
    if (tc->current[c]) list_push(&todo, tc->current[c]);
    tc->current[c] = NULL;
    jw_slab *s;
    while ((s = partial_min(tc, c)) != NULL) {
      partial_remove(tc, s);
      list_push(&todo, s);
    }
  }
  while (tc->full) {
    jw_slab *s = tc->full;
    list_remove(&tc->full, s);
    list_push(&todo, s);
  }
  drain_ready(tc, false);
  uint64_t abandoned = 0;
  while (todo) {
    jw_slab *s = todo;
    list_remove(&todo, s);
    jw_abandon_result r;
    jw_backoff b = JW_BACKOFF_INIT;
    while ((r = jw_slab_abandon(s)) == JW_ABANDON_BUSY) {
      /* A notifier is between its two steps (concurrency.md), maybe
       * descheduled there: spin, yield, then short sleeps. */
      drain_ready(tc, false);
      jw_backoff_pause(&b);
    }
    if (r == JW_ABANDON_EMPTY) {
      jw_store(&s->remote, (jw_remote_word)JW_RS_POOLED, JW_RELAXED); /* ours alone */
      jw_slab_set_tag(s, 0);
      jw_tier_release_pages(s, 1);
    } else {
      abandoned++;
    }
  }
  if (abandoned) jw_counter_add_owner(&tc->abandoned, abandoned);
  jw_pool_drain(tc);
  tc->nslabs = 0;
  t->tc = NULL;
  t->state = JW_TLS_DEAD;
  /* Release: the next user of this cache (acquire CAS) sees it emptied. */
  jw_store(&tc->state, JW_TC_FREE, JW_RELEASE);
}

/* malloc_trim: slab s, on no list now, has no live block: back to the page
 * source (no valid free can reach it any more). */
static void trim_release(jw_tcache *tc, jw_slab *s) {
  tc->nslabs--;
  jw_store(&s->remote, (jw_remote_word)JW_RS_POOLED, JW_RELAXED); /* owner-only now: relaxed */
  jw_slab_set_tag(s, 0);
  jw_tier_release_pages(s, 1);
}

/* malloc_trim's look at the partial queues: a queued slab is not notified of
 * remote frees (the lazy park, frontend.md "Refill"), so its remote list is
 * collected here, and a slab left with no live block goes back to the page
 * source. Returns how many pages went back. */
static size_t trim_partial(jw_tcache *tc) {
  size_t n = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    for (jw_rq_node *q = tc->partial[c], *next; q != NULL; q = next) {
      next = q->next; /* read first: removal clears the node */
      jw_slab *s = (jw_slab *)((char *)q - offsetof(jw_slab, qnode));
      jw_slab_collect(s);
      if (s->live != 0) continue;
      partial_remove(tc, s);
      trim_release(tc, s);
      n++;
    }
  }
  return n;
}

bool jw_tc_trim(jw_tls *t, jw_tcache *tc) {
  jw_tc_fold(t, tc);
  drain_ready(tc, true);
  size_t n = flush_block_cache(tc);
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    flush_bin(t, tc, c); /* its blocks may be of any slab of the class */
    jw_slab *s = tc->current[c];
    if (s == NULL) continue;
    jw_slab_collect(s);
    tc->current[c] = NULL;
    if (s->live == 0) {
      trim_release(tc, s);
      n++;
    } else if (s->local == NULL && jw_slab_park(s, tc->key)) {
      s->where = JW_WHERE_FULL;
      list_push(&tc->full, s);
    } else {
      jw_slab_collect(s); /* a remote free may have beaten the park */
      s->where = JW_WHERE_PARTIAL;
      partial_append(tc, s);
    }
  }
  n += trim_partial(tc);
  n += jw_pool_drain(tc);
  return n > 0;
}
