/* See midend.h and docs/design/midend.md. */
#include "midend.h"

#include <errno.h>
#include <stddef.h>

#include "../common/config.h"
#include "../common/counter.h"
#include "../common/lock.h"
#include "../common/log.h"
#include "../common/options.h"
#include "../pages/tier_pages.h"

/* The free-block key (frontend/thread_cache.h), set once at init. */
#include "../reclaim/reclaim.h"
#include "ptr_cache.h"

const uint16_t jw_mid_class_size[JW_MID_NCLASSES] = {2048, 2560, 3072, 3584, 4096, 5120, 6144,
                                                      7168, 8192, 10240, 12288, 14336, 16384};
/* Smallest slab (granules) with waste <= 1/16 and at least four blocks,
 * among the backend's range size classes (at most three significant bits,
 * brief "Backend"), so the backend serves it without rounding up. */
const uint8_t jw_mid_class_granules[JW_MID_NCLASSES] = {8, 4, 4, 8, 16, 8, 8, 16, 32, 16, 16, 32, 64};
const uint16_t jw_mid_recip[JW_MID_NCLASSES] = {16384, 13108, 10923, 9363, 8192, 6554, 5462,
                                                4682,  4096,  3277,  2731,  2341, 2048};
const uint8_t jw_mid_class_of_table[32] = {0, 0, 0, 0, 1, 2,  3,  4,  5,  5,  6,  6,  7,  7,  8,  8,
                                           9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12};

#ifdef JW_VERIFY_MID_CACHE_BYTES /* model-checking clients shrink it (docs/design/verification.md) */
#define CACHE_BYTES ((size_t)JW_VERIFY_MID_CACHE_BYTES)
#else
#define CACHE_BYTES ((size_t)128 << 10) /* at most this much cached per class */
#endif
#define BATCH 4                         /* blocks moved into the cache per locked refill */
/* Pauses a malloc spins on a busy class lock before its one yield (lock.h,
 * jw_lock_try_after_yield; JWMALLOC_LOCK_YIELD=1): a holder on another CPU
 * is done within them.
 * A scheduling point each under the model checker: tiny there. */
#ifdef JW_VERIFY
#define JW_MID_GRACE_SPINS 1
#else
#define JW_MID_GRACE_SPINS 64
#endif

typedef struct mid_class {
  jw_ptr_cache cache;
  jw_atomic_ptr deferred; /* blocks freed while the lock was busy */
  jw_lock lock;
  jw_rq_node *partial;  /* lock: slabs with free blocks (see partial_add) */
  jw_mid_slab *spare;   /* lock: one empty slab kept */
  unsigned rq_shift;    /* lock: the partial list's mode (root_queue.h), set while it is empty */
  /* Placement (midend.md): 1 + the root (address >> JW_ROOT_SHIFT) of the
   * head partial slab; 0 when there is none or placement is off. Written
   * under the lock, read by frees without it: a hint, a stale value only
   * sends a block to its slab or to the cache when the other was due. */
  jw_atomic_uptr low_root;
  jw_atomic_u64 n_alloc, n_free, n_fallback;
  /* Aging (jw_mid_age): the class's malloc+free count at the previous pass.
   * Written by the reclaimer only (one at a time: the reclaimer token). */
  jw_atomic_u64 aging_seen;
} __attribute__((aligned(64))) mid_class;

static jw_atomic_u64 slabs_aged; /* statistics: slabs the aging passes gave back */

/* Class mc's shard i is classes[mc * JW_MID_SHARDS + i] (midend.md "Shards"). */
static mid_class classes[JW_MID_NCLASSES * JW_MID_SHARDS];
#define NK (JW_MID_NCLASSES * JW_MID_SHARDS)

static inline mid_class *shard_of(unsigned mc, unsigned i) { return &classes[mc * JW_MID_SHARDS + i]; }
static inline unsigned class_of_shard(const mid_class *k) { return (unsigned)(k - classes) / JW_MID_SHARDS; }

/* Shards in use: one under JWMALLOC_LOW_MEMORY (the footprint is the point). */
static inline unsigned shards_in_use(void) { return jw_low_memory() ? 1 : JW_MID_SHARDS; }

/* 1 + the thread's home shard; 0 until its first midend malloc. */
static __thread uint8_t mid_home __attribute__((tls_model("initial-exec")));
static jw_atomic_u32 next_home; /* deals home shards round-robin */

static inline unsigned home_shard(unsigned n) {
  unsigned h = mid_home;
  if (JW_UNLIKELY(h == 0)) {
    h = 1 + (jw_fetch_add(&next_home, 1, JW_RELAXED) & (JW_MID_SHARDS - 1)); /* only spreads threads */
    mid_home = (uint8_t)h;
  }
  return (h - 1) & (n - 1);
}


/* JWMALLOC_LOW_MEMORY: a class caches at most this much (one 16 KiB block,
 * eight of 2 KiB; docs/design/api.md, "Low-memory configuration"). */
#define LOW_MEMORY_CACHE_BYTES ((size_t)16 << 10)

/* A shard's cache: the class's bytes divided among the shards in use. */
static uint64_t cache_mask(unsigned mc) {
  size_t slots = (jw_low_memory() ? LOW_MEMORY_CACHE_BYTES : CACHE_BYTES) / shards_in_use() / jw_mid_class_size[mc];
  if (slots >= JW_PTR_CACHE_SLOTS) return ~(uint64_t)0;
  return ((uint64_t)1 << slots) - 1;
}

static char *slab_blocks(jw_mid_slab *s) { return (char *)s + JW_MID_HEADER; }

static inline uintptr_t root_of(const void *p) { return jw_root_rank(p); }

/* ---- under the class lock ---- */

/* The partial list: with placement off (rq_shift 63) a stack, the slab that
 * last got a block back first, as before placement; with JWMALLOC_PLACEMENT=1
 * a queue grouped by root, lowest root first (root_queue.h), so blocks are
 * taken from the slabs of low roots and those of high roots drain. */
static jw_mid_slab *partial_head(mid_class *k) {
  return k->partial ? (jw_mid_slab *)((char *)k->partial - offsetof(jw_mid_slab, node)) : NULL;
}

static void publish_low_root(mid_class *k) {
  jw_mid_slab *h = partial_head(k);
  /* Relaxed: a hint for mid_free (see low_root). */
  jw_store(&k->low_root, h && k->rq_shift != 63 ? root_of(h) + 1 : 0, JW_RELAXED);
}

/* The stack's push (jw_rq_add_fn's shape: the shift is unused). */
static void stack_push(jw_rq_node **q, jw_rq_node *n, unsigned shift) {
  (void)shift;
  n->prev = NULL;
  n->next = *q;
  if (*q) (*q)->prev = n;
  *q = n;
}

static void partial_add(mid_class *k, jw_mid_slab *s) {
  if (k->partial == NULL) k->rq_shift = jw_rq_shift(JW_ROOT_SHIFT);
  if (k->rq_shift == 63) {
    stack_push(&k->partial, &s->node, 63);
  } else {
    jw_rq_add(&k->partial, &s->node, k->rq_shift);
    publish_low_root(k);
  }
  s->on_partial = 1;
}

/* Placement on demand (backend.md 7b): the partial list converted to the
 * mode in force, under the class lock; with checks on, verified before and
 * after. */
static JW_NOINLINE void convert_partial(mid_class *k, unsigned shift) {
  bool check = jw_pages_checking();
  long before = check ? jw_rq_check(&k->partial, k->rq_shift, 0) : 0;
  jw_rq_requeue(&k->partial, shift == 63 ? stack_push : jw_rq_add, shift);
  if (check && (before < 0 || jw_rq_check(&k->partial, shift, 0) != before))
    jw_fatal("midend class %u: partial list broken converting %u -> %u (%ld slabs before)",
             class_of_shard(k), k->rq_shift, shift, before);
  k->rq_shift = shift;
  publish_low_root(k);
}

/* Every taker of the class lock: deferred frees first, then the partial
 * list in the mode in force (one relaxed load and a compare). */
static void drain_deferred(mid_class *k);
static inline void class_locked(mid_class *k) {
  drain_deferred(k);
  unsigned shift = jw_rq_shift(JW_ROOT_SHIFT);
  if (JW_UNLIKELY(shift != k->rq_shift)) convert_partial(k, shift);
}

static void partial_remove(mid_class *k, jw_mid_slab *s) {
  if (k->rq_shift == 63) {
    jw_rq_node *n = &s->node;
    if (n->prev) n->prev->next = n->next;
    else k->partial = n->next;
    if (n->next) n->next->prev = n->prev;
    n->next = n->prev = NULL;
  } else {
    jw_rq_remove(&k->partial, &s->node, k->rq_shift);
    publish_low_root(k);
  }
  s->on_partial = 0;
}

static jw_mid_slab *slab_new(mid_class *k, unsigned mc) {
  uint32_t granules = 0;
  jw_mid_slab *s = jw_tier_take_pages(jw_mid_class_pages(mc), JW_KIND_MID_SLAB, &granules, NULL);
  if (s == NULL) return NULL;
  s->granules = granules;
  jw_store(&s->zero, 0, JW_RELAXED); /* read racily by frontend fast paths */
  s->free = NULL;
  s->node.next = s->node.prev = s->node.group = NULL;
  jw_store(&s->bump, 0, JW_RELAXED); /* read by validation; written under the lock */
  /* A page source that rounds the range up gives us more blocks. */
  s->capacity = (uint32_t)((((size_t)granules << JW_GRANULE_SHIFT) - JW_MID_HEADER) / jw_mid_class_size[mc]);
  s->nfree = s->capacity;
  s->cls = (uint8_t)mc;
  s->shard = (uint8_t)((unsigned)(k - classes) % JW_MID_SHARDS);
  s->on_partial = 0;
  jw_poison(slab_blocks(s), ((size_t)granules << JW_GRANULE_SHIFT) - JW_MID_HEADER);
  return s;
}

static jw_block *slab_take(mid_class *k, unsigned mc) {
  jw_mid_slab *s = partial_head(k);
  /* Placement: the spare, when it lies in a lower root than every partial slab. */
  if (s != NULL && k->spare != NULL && k->rq_shift != 63 && root_of(k->spare) < root_of(s)) {
    s = k->spare;
    k->spare = NULL;
    partial_add(k, s);
  } else if (s != NULL && k->rq_shift != 63 && jw_pages_above_place(s)) {
    /* Placement: every partial slab lies above the root the backend fills
     * (the lowest is the head): a new slab, which the backend places low,
     * rather than blocks that keep a high root alive; the high slabs only
     * get blocks back now, empty and go back. */
    jw_mid_slab *n = slab_new(k, mc);
    if (n != NULL) partial_add(k, s = n);
  }
  if (s == NULL) {
    s = k->spare;
    if (s) k->spare = NULL;
    else if ((s = slab_new(k, mc)) == NULL) return NULL;
    partial_add(k, s);
  }
  jw_block *b = s->free;
  if (b) {
    s->free = jw_block_next(b);
  } else {
    uint32_t i = jw_load(&s->bump, JW_RELAXED);
    b = (jw_block *)(slab_blocks(s) + (size_t)i * jw_mid_class_size[mc]);
    /* Marked free before it passes the bump index: a block that waits in
     * the class's pointer cache is free, and a free() naming it must be
     * reported (the free path's FREE_KEY check), not cached and handed out
     * twice. Blocks on s->free carry the key from their free already. */
    jw_block_set_free(b, NULL, jw_load(&jw_free_key, JW_RELAXED)); /* set once at init */
    jw_store(&s->bump, i + 1, JW_RELAXED); /* validation reads it racily: any value seen is safe */
  }
  if (--s->nfree == 0) partial_remove(k, s);
  return b;
}

/* Returns b to its slab. A slab left empty becomes the class's spare if it
 * has none; otherwise it is returned to the caller, to give back. */
static jw_mid_slab *slab_put(mid_class *k, jw_mid_slab *s, jw_block *b) {
  jw_block_set_next(b, s->free);
  s->free = b;
  s->nfree++;
  if (!s->on_partial) partial_add(k, s);
  if (s->nfree == s->capacity) {
    partial_remove(k, s);
    if (k->spare == NULL) {
      k->spare = s;
    } else if (k->rq_shift != 63 && root_of(s) < root_of(k->spare)) {
      /* Placement: the lower empty slab is kept, the higher one goes back. */
      jw_mid_slab *e = k->spare;
      k->spare = s;
      return e;
    } else {
      return s;
    }
  }
  return NULL;
}

/* slab_put, giving an emptied slab back at once. */
static void slab_put_release(mid_class *k, jw_mid_slab *s, jw_block *b) {
  jw_mid_slab *e = slab_put(k, s, b);
  if (e) jw_tier_release_pages(e, e->granules);
}

static jw_mid_slab *slab_of(const void *p) {
  jw_range_info info;
  if (!jw_pages_lookup(p, &info)) return NULL; /* cannot happen for our blocks */
  return info.start;
}

static void drain_deferred(mid_class *k) {
  /* Relaxed peek; acquire exchange: the freers' link and key writes. */
  if (jw_load(&k->deferred, JW_RELAXED) == NULL) return;
  jw_block *b = jw_xchg(&k->deferred, NULL, JW_ACQUIRE);
  while (b) {
    jw_block *next = jw_block_next(b);
    slab_put_release(k, slab_of(b), b);
    b = next;
  }
}

/* The hand-over of deferred frees, as in the backend (backend.md 7c, "The
 * deferred hand-over"): a push can land after the holder's last drain, or
 * after its release (the pusher's try-lock failed just before), and nothing
 * would drain it until the class lock is taken again: the block's slab
 * stays in use, in a class that may never be used again. So the holder
 * looks again after its release and the pusher after its push; whoever sees
 * blocks waiting and the lock free drains them (a try-lock: nobody waits).
 * The look is a read-modify-write when the list is empty (a compare-and-
 * swap of NULL for NULL, acq_rel), so that with the pushes (acq_rel) and the
 * drain (an exchange) every change of the list is one, and of a push and a
 * release the one that comes second sees the other. A failed compare-and-
 * swap saw blocks: then the try-lock decides. */
static bool deferred_waiting(mid_class *k) {
#ifdef JW_MUTATE_NO_MID_HANDOFF /* planted bug (verify: deferred): the look left out */
  (void)k;
  return false;
#else
  void *none = NULL;
  return !jw_cas(&k->deferred, &none, NULL, JW_ACQ_REL, JW_ACQUIRE);
#endif
}

static void class_unlock(mid_class *k) {
  jw_lock_release(&k->lock);
  while (deferred_waiting(k) && jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    drain_deferred(k);
    jw_lock_release(&k->lock);
  }
}

bool jw_mid_deferred_empty(void) {
  for (unsigned i = 0; i < NK; i++)
    if (jw_load(&classes[i].deferred, JW_ACQUIRE) != NULL) return false; /* a check: the links it would read */
  return true;
}

/* A block of class mc with its class lock held (taken by the caller): one
 * from a slab, and a batch more into the class cache; the lock is released.
 * NULL with errno = ENOMEM when no slab can be had. */
static jw_block *alloc_locked(mid_class *k, unsigned mc) {
  class_locked(k);
  jw_block *b = slab_take(k, mc);
  uint64_t mask = cache_mask(mc);
  for (int i = 0; b && i < BATCH; i++) {
    jw_block *x = slab_take(k, mc);
    if (x == NULL) break;
    if (!jw_ptr_cache_put(&k->cache, x, mask)) {
      slab_put_release(k, slab_of(x), x);
      break;
    }
  }
  class_unlock(k);
  if (b == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  jw_counter_add(&k->n_alloc, 1);
  return b;
}

/* ---- public ---- */

/* jw_mid_alloc from shard h of n in use; `home`: h is the thread's home,
 * which moves to a shard whose lock it gets. */
static jw_block *alloc_from(unsigned mc, unsigned h, unsigned n, bool home, bool *fallback) {
  mid_class *k = shard_of(mc, h);
  *fallback = false;
  jw_block *b = jw_ptr_cache_take(&k->cache);
  if (b == NULL) {
    if (jw_lock_try(&k->lock, JW_LK_MIDEND)) return alloc_locked(k, mc);
    /* Never wait: another shard's cache or lock, which becomes the home
     * (midend.md "Shards"), else a cached block of a larger class, else
     * (opt-in) the lock after one yield (concurrency.md, "One yield before
     * a fallback"), else a page range. */
    for (unsigned i = 1; i < n; i++) {
      unsigned o = (h + i) & (n - 1);
      mid_class *ko = shard_of(mc, o);
      if ((b = jw_ptr_cache_take(&ko->cache)) != NULL) {
        jw_counter_add(&ko->n_alloc, 1);
        return b;
      }
      if (jw_lock_try(&ko->lock, JW_LK_MIDEND)) {
        if (home) mid_home = (uint8_t)(o + 1);
        return alloc_locked(ko, mc);
      }
    }
    unsigned up = mc + 1;
    for (; up < JW_MID_NCLASSES && up <= mc + 2; up++)
      if ((b = jw_ptr_cache_take(&shard_of(up, h)->cache)) != NULL) break;
    if (b == NULL) {
      if (jw_opt(JW_OPT_LOCK_YIELD) && jw_lock_try_after_yield(&k->lock, JW_LK_MIDEND, JW_MID_GRACE_SPINS))
        return alloc_locked(k, mc);
      jw_counter_add(&k->n_fallback, 1);
      *fallback = true;
      return NULL;
    }
    /* ASan: the caller unpoisons the size of class mc; the rest of the
     * larger block is the caller's too (malloc_usable_size reports the
     * slab's class: test_breakit6 swing under ASan). */
    jw_unpoison((char *)b + jw_mid_class_size[mc], (size_t)(jw_mid_class_size[up] - jw_mid_class_size[mc]));
  }
  jw_counter_add(&k->n_alloc, 1);
  return b;
}

jw_block *jw_mid_alloc(unsigned mc, bool *fallback) {
  unsigned n = shards_in_use();
  return alloc_from(mc, home_shard(n), n, true, fallback);
}

jw_block *jw_mid_alloc_uncached(bool *fallback) { return alloc_from(0, 0, shards_in_use(), false, fallback); }


/* Pushes b on the class's deferred list (the lock is busy). */
static void deferred_push(mid_class *k, jw_block *b) {
  void *head = jw_load(&k->deferred, JW_RELAXED);
#ifdef JW_MUTATE_DEFERRED_LOST /* planted bug (verification.md): a store instead of the CAS */
  jw_block_set_next(b, head);
  jw_store(&k->deferred, b, JW_RELEASE);
#else
  do {
    jw_block_set_next(b, head);
    /* Release: the link and key, for the draining lock holder; acquire:
     * the hand-over's look (above) sees a holder's release before it. */
  } while (!jw_cas_weak(&k->deferred, &head, b, JW_ACQ_REL, JW_RELAXED));
#endif
#ifndef JW_MUTATE_NO_MID_HANDOFF
  /* The pusher's look (see deferred_waiting): the holder that made this
   * push wait may have drained and released already. */
  if (jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    drain_deferred(k);
    class_unlock(k);
  }
#endif
}

/* Frees b of slab s: the class cache, else its slab under the class lock,
 * else the deferred list. Memory that stays cached in the class (the cache
 * was empty before, or the slab became the spare) must age: the reclaim
 * thread is kicked then, not on every free (an aging pass that sees the
 * class holding blocks keeps the thread going). */
static void mid_free(mid_class *k, jw_mid_slab *s, jw_block *b) {
  /* Placement: a block of a slab above the lowest partial slab's root goes
   * back to its slab rather than into the class cache, where the next
   * malloc would take it in place; so the slabs of high roots drain. Only
   * under the lock's try: when it is busy, the cache as before. */
  uintptr_t low = jw_load(&k->low_root, JW_RELAXED);
  if (low != 0 && root_of(s) >= low && jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    class_locked(k);
    jw_mid_slab *spare = k->spare;
    slab_put_release(k, s, b);
    bool kick = k->spare != spare;
    class_unlock(k);
    if (kick) jw_reclaim_kick();
    return;
  }
  int r = jw_ptr_cache_put(&k->cache, b, cache_mask(s->cls));
  bool kick = r == JW_PTR_CACHE_PUT_FIRST;
  if (r) {
  } else if (jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    class_locked(k);
    jw_mid_slab *spare = k->spare;
    slab_put_release(k, s, b);
    kick = k->spare != spare;
    class_unlock(k);
  } else {
    deferred_push(k, b);
  }
  if (kick) jw_reclaim_kick();
}

/* The shard that guards slab s (its header names it). */
static inline mid_class *slab_shard(const jw_mid_slab *s) { return shard_of(s->cls, s->shard & (JW_MID_SHARDS - 1)); }

void jw_mid_free(jw_mid_slab *s, jw_block *b) {
  mid_class *k = slab_shard(s);
  jw_counter_add(&k->n_free, 1);
  mid_free(k, s, b);
}

void jw_mid_give_back(jw_block *b, bool aged) {
  jw_mid_slab *s = slab_of(b);
  mid_class *k = slab_shard(s);
  if (!aged) {
    mid_free(k, s, b);
    return;
  }
  /* Aged in a thread cache: straight back to its slab (not into the class
   * cache, where it would wait another interval); a slab it empties goes
   * back as an aged range unless it becomes the class's spare. */
  if (!jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    deferred_push(k, b);
    return;
  }
  class_locked(k);
  jw_mid_slab *e = slab_put(k, s, b);
  class_unlock(k);
  if (e) {
    jw_tier_release_aged(e, e->granules);
    jw_counter_add(&slabs_aged, 1);
  }
}

size_t jw_mid_usable(const jw_range_info *info) {
  return jw_mid_class_size[((jw_mid_slab *)info->start)->cls];
}

bool jw_mid_trim(void) {
  bool released = false;
  for (unsigned i = 0; i < NK; i++) {
    mid_class *k = &classes[i];
    /* Waits: malloc_trim promises every cached block back, and a class the
     * reclaimer's aging pass holds would keep its cache, which can pin a
     * few MiB of partly used slabs. The holder (a malloc, a free, an aging
     * pass or fork prepare) never waits for a trimming thread, which holds
     * no lock here. */
    jw_lock_acquire(&k->lock, JW_LK_MIDEND);
    class_locked(k);
    jw_block *b;
    while ((b = jw_ptr_cache_take(&k->cache)) != NULL) {
      jw_mid_slab *e = slab_put(k, slab_of(b), b);
      if (e) {
        jw_tier_release_pages(e, e->granules);
        released = true;
      }
    }
    if (k->spare) {
      jw_tier_release_pages(k->spare, k->spare->granules);
      k->spare = NULL;
      released = true;
    }
    class_unlock(k);
  }
  return released;
}

uint64_t jw_mid_age(void) {
  uint64_t held = 0;
  for (unsigned i = 0; i < NK; i++) {
    mid_class *k = &classes[i];
    unsigned mc = class_of_shard(k);
    /* Relaxed: statistics counters, compared with our own last reading. */
    uint64_t act = jw_counter_get(&k->n_alloc) + jw_counter_get(&k->n_free);
    uint64_t seen = jw_load(&k->aging_seen, JW_RELAXED);
    jw_store(&k->aging_seen, act, JW_RELAXED); /* reclaimer only (token) */
    uint64_t cached = (uint64_t)__builtin_popcountll(jw_load(&k->cache.full, JW_RELAXED)) * jw_mid_class_size[mc];
    if (act != seen) {
      /* Used during the last interval: its cache and spare are its working
       * set. Held (approximately) for the reclaim thread's idle test. */
      held += cached + (act != 0 ? 1 : 0);
      continue;
    }
    if (!jw_lock_try(&k->lock, JW_LK_MIDEND)) { /* a malloc or free holds it: next pass */
      held += cached + 1;
      continue;
    }
    /* Idle for a whole interval: every cached block back to its slab; the
     * slabs left empty and the spare go back as aged ranges. */
    jw_mid_slab *out[JW_PTR_CACHE_SLOTS + 2];
    unsigned n = 0;
    class_locked(k);
    jw_block *b;
    while (n < JW_PTR_CACHE_SLOTS && (b = jw_ptr_cache_take(&k->cache)) != NULL) {
      jw_mid_slab *e = slab_put(k, slab_of(b), b);
      if (e) out[n++] = e;
    }
    if (k->spare) {
      out[n++] = k->spare;
      k->spare = NULL;
    }
    class_unlock(k);
    for (unsigned i = 0; i < n; i++) jw_tier_release_aged(out[i], out[i]->granules);
    if (n) jw_counter_add(&slabs_aged, n);
  }
  return held;
}

void jw_mid_atfork_prepare(void) {
  for (unsigned i = 0; i < NK; i++) jw_lock_acquire(&classes[i].lock, JW_LK_MIDEND);
}

void jw_mid_atfork_parent(void) {
  for (unsigned i = 0; i < NK; i++) jw_lock_release(&classes[i].lock);
}

void jw_mid_atfork_child(void) {
  for (unsigned i = 0; i < NK; i++) jw_lock_reset(&classes[i].lock);
}

void jw_mid_totals_get(jw_mid_totals *o) {
  o->mallocs = o->frees = o->fallbacks = 0;
  for (unsigned i = 0; i < NK; i++) {
    o->mallocs += jw_counter_get(&classes[i].n_alloc);
    o->frees += jw_counter_get(&classes[i].n_free);
    o->fallbacks += jw_counter_get(&classes[i].n_fallback);
  }
  o->slabs_aged = jw_counter_get(&slabs_aged);
}
