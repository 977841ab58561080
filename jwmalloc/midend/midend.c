/* See midend.h and docs/design/midend.md. */
#include "midend.h"

#include <errno.h>

#include "../common/counter.h"
#include "../common/lock.h"
#include "../common/tier_pages.h"
#include "../reclaim/reclaim.h"
#include "ptr_cache.h"

const uint16_t jw_mid_class_size[JW_MID_NCLASSES] = {2048, 2560, 3072, 3584, 4096, 5120, 6144,
                                                      7168, 8192, 10240, 12288, 14336, 16384};
/* Smallest slab (granules) with waste <= 1/16 and at least four blocks,
 * among the backend's range size classes (at most three significant bits,
 * brief "Backend"), so the backend serves it without rounding up. */
const uint8_t jw_mid_class_granules[JW_MID_NCLASSES] = {8, 4, 4, 8, 16, 8, 8, 16, 32, 16, 16, 32, 64};
const uint8_t jw_mid_class_of_table[32] = {0, 0, 0, 0, 1, 2,  3,  4,  5,  5,  6,  6,  7,  7,  8,  8,
                                           9, 9, 9, 9, 10, 10, 10, 10, 11, 11, 11, 11, 12, 12, 12, 12};

#ifdef JW_VERIFY_MID_CACHE_BYTES /* model-checking clients shrink it (docs/design/verification.md) */
#define CACHE_BYTES ((size_t)JW_VERIFY_MID_CACHE_BYTES)
#else
#define CACHE_BYTES ((size_t)128 << 10) /* at most this much cached per class */
#endif
#define BATCH 4                         /* blocks moved into the cache per locked refill */

typedef struct mid_class {
  jw_ptr_cache cache;
  jw_atomic_ptr deferred; /* blocks freed while the lock was busy */
  jw_lock lock;
  jw_mid_slab *partial; /* lock: slabs with free blocks */
  jw_mid_slab *spare;   /* lock: one empty slab kept */
  jw_atomic_u64 n_alloc, n_free, n_fallback;
  /* Aging (jw_mid_age): the class's malloc+free count at the previous pass.
   * Written by the reclaimer only (one at a time: the reclaimer token). */
  jw_atomic_u64 aging_seen;
} __attribute__((aligned(64))) mid_class;

static jw_atomic_u64 slabs_aged; /* statistics: slabs the aging passes gave back */

static mid_class classes[JW_MID_NCLASSES];

static uint64_t cache_mask(unsigned mc) {
  size_t slots = CACHE_BYTES / jw_mid_class_size[mc];
  if (slots >= JW_PTR_CACHE_SLOTS) return ~(uint64_t)0;
  return ((uint64_t)1 << slots) - 1;
}

static char *slab_blocks(jw_mid_slab *s) { return (char *)s + JW_MID_HEADER; }

/* ---- under the class lock ---- */

static void partial_add(mid_class *k, jw_mid_slab *s) {
  s->prev = NULL;
  s->next = k->partial;
  if (k->partial) k->partial->prev = s;
  k->partial = s;
  s->on_partial = 1;
}

static void partial_remove(mid_class *k, jw_mid_slab *s) {
  if (s->prev) s->prev->next = s->next;
  else k->partial = s->next;
  if (s->next) s->next->prev = s->prev;
  s->next = s->prev = NULL;
  s->on_partial = 0;
}

static jw_mid_slab *slab_new(unsigned mc) {
  uint32_t granules = 0;
  jw_mid_slab *s = jw_tier_take_pages(jw_mid_class_granules[mc], JW_KIND_MID_SLAB, &granules, NULL);
  if (s == NULL) return NULL;
  s->granules = granules;
  jw_store(&s->zero, 0, JW_RELAXED); /* read racily by frontend fast paths */
  s->free = NULL;
  s->next = s->prev = NULL;
  jw_store(&s->bump, 0, JW_RELAXED); /* read by validation; written under the lock */
  /* A page source that rounds the range up gives us more blocks. */
  s->capacity = ((uint32_t)granules * 4096u - JW_MID_HEADER) / jw_mid_class_size[mc];
  s->nfree = s->capacity;
  s->cls = (uint8_t)mc;
  s->on_partial = 0;
  jw_poison(slab_blocks(s), (size_t)granules * 4096 - JW_MID_HEADER);
  return s;
}

static jw_block *slab_take(mid_class *k, unsigned mc) {
  jw_mid_slab *s = k->partial;
  if (s == NULL) {
    s = k->spare;
    if (s) k->spare = NULL;
    else if ((s = slab_new(mc)) == NULL) return NULL;
    partial_add(k, s);
  }
  jw_block *b = s->free;
  if (b) {
    s->free = jw_block_next(b);
  } else {
    uint32_t i = jw_load(&s->bump, JW_RELAXED);
    b = (jw_block *)(slab_blocks(s) + (size_t)i * jw_mid_class_size[mc]);
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
    if (k->spare == NULL) k->spare = s;
    else return s;
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

/* ---- public ---- */

jw_block *jw_mid_alloc(unsigned mc, bool *fallback) {
  mid_class *k = &classes[mc];
  *fallback = false;
  jw_block *b = jw_ptr_cache_take(&k->cache);
  if (b == NULL) {
    if (jw_lock_try(&k->lock, JW_LK_MIDEND)) {
      drain_deferred(k);
      b = slab_take(k, mc);
      uint64_t mask = cache_mask(mc);
      for (int i = 0; b && i < BATCH; i++) {
        jw_block *x = slab_take(k, mc);
        if (x == NULL) break;
        if (!jw_ptr_cache_put(&k->cache, x, mask)) {
          slab_put_release(k, slab_of(x), x);
          break;
        }
      }
      jw_lock_release(&k->lock);
      if (b == NULL) {
        errno = ENOMEM;
        return NULL;
      }
    } else {
      /* Never wait: a cached block of a larger class, else a page range. */
      for (unsigned up = mc + 1; up < JW_MID_NCLASSES && up <= mc + 2 && b == NULL; up++)
        b = jw_ptr_cache_take(&classes[up].cache);
      if (b == NULL) {
        jw_counter_add(&k->n_fallback, 1);
        *fallback = true;
        return NULL;
      }
    }
  }
  jw_counter_add(&k->n_alloc, 1);
  return b;
}

bool jw_mid_is_block(const jw_range_info *info, const void *p) {
  jw_mid_slab *s = info->start;
  if (s->cls >= JW_MID_NCLASSES || info->granules != s->granules) return false;
  uintptr_t base = (uintptr_t)slab_blocks(s), a = (uintptr_t)p;
  if (a < base) return false;
  size_t size = jw_mid_class_size[s->cls];
  uintptr_t off = a - base;
  /* Relaxed: a stale bump only makes the check stricter for a block being
   * handed out right now, which no valid free can name. */
  return off % size == 0 && off / size < jw_load(&s->bump, JW_RELAXED);
}

void jw_mid_free(const jw_range_info *info, jw_block *b) {
  jw_mid_slab *s = info->start;
  mid_class *k = &classes[s->cls];
  jw_counter_add(&k->n_free, 1);
  if (jw_ptr_cache_put(&k->cache, b, cache_mask(s->cls))) {
  } else if (jw_lock_try(&k->lock, JW_LK_MIDEND)) {
    drain_deferred(k);
    slab_put_release(k, s, b);
    jw_lock_release(&k->lock);
  } else {
    void *head = jw_load(&k->deferred, JW_RELAXED);
#ifdef JW_MUTATE_DEFERRED_LOST /* planted bug (verification.md): a store instead of the CAS */
    jw_block_set_next(b, head);
    jw_store(&k->deferred, b, JW_RELEASE);
#else
    do {
      jw_block_set_next(b, head);
      /* Release: the link and key, for the draining lock holder. */
    } while (!jw_cas_weak(&k->deferred, &head, b, JW_RELEASE, JW_RELAXED));
#endif
  }
  jw_reclaim_kick(); /* cached free memory ages (two relaxed loads when the thread runs) */
}

size_t jw_mid_usable(const jw_range_info *info) {
  return jw_mid_class_size[((jw_mid_slab *)info->start)->cls];
}

bool jw_mid_trim(void) {
  bool released = false;
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) {
    mid_class *k = &classes[mc];
    if (!jw_lock_try(&k->lock, JW_LK_MIDEND)) continue;
    drain_deferred(k);
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
    jw_lock_release(&k->lock);
  }
  return released;
}

uint64_t jw_mid_age(void) {
  uint64_t held = 0;
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) {
    mid_class *k = &classes[mc];
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
    drain_deferred(k);
    jw_block *b;
    while (n < JW_PTR_CACHE_SLOTS && (b = jw_ptr_cache_take(&k->cache)) != NULL) {
      jw_mid_slab *e = slab_put(k, slab_of(b), b);
      if (e) out[n++] = e;
    }
    if (k->spare) {
      out[n++] = k->spare;
      k->spare = NULL;
    }
    jw_lock_release(&k->lock);
    for (unsigned i = 0; i < n; i++) jw_tier_release_aged(out[i], out[i]->granules);
    if (n) jw_counter_add(&slabs_aged, n);
  }
  return held;
}

void jw_mid_atfork_prepare(void) {
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) jw_lock_acquire(&classes[mc].lock, JW_LK_MIDEND);
}

void jw_mid_atfork_parent(void) {
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) jw_lock_release(&classes[mc].lock);
}

void jw_mid_atfork_child(void) {
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) jw_lock_reset(&classes[mc].lock);
}

void jw_mid_totals_get(jw_mid_totals *o) {
  o->mallocs = o->frees = o->fallbacks = 0;
  for (unsigned mc = 0; mc < JW_MID_NCLASSES; mc++) {
    o->mallocs += jw_counter_get(&classes[mc].n_alloc);
    o->frees += jw_counter_get(&classes[mc].n_free);
    o->fallbacks += jw_counter_get(&classes[mc].n_fallback);
  }
  o->slabs_aged = jw_counter_get(&slabs_aged);
}
