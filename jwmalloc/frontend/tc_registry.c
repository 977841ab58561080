/* The registry of thread caches (thread_cache.h): every cache ever created,
 * on one lock-free list that only grows (a cache is never freed: an exiting
 * thread's cache is released and taken again by a later thread). A thread
 * takes a free cache from it or adds a new one; the reclaimer's aging pass,
 * the statistics and a fork child walk it (thread_cache.c).
 * Design: docs/design/frontend.md, "Thread exit". */
#include "thread_cache.h"

#include "../common/random.h"
#include "../os/os_meta.h"

jw_atomic_ptr jw_tc_registry; /* every thread cache ever created */

jw_tcache *jw_tc_acquire(void) {
  jw_tcache *tc;
  /* Acquire: the links and contents of published caches. */
  for (tc = jw_load(&jw_tc_registry, JW_ACQUIRE); tc; tc = tc->all_next) {
    uint32_t expected = JW_TC_FREE;
    /* Acquire: see everything the previous user wrote before its release. */
    if (jw_load(&tc->state, JW_RELAXED) == JW_TC_FREE &&
        jw_cas(&tc->state, &expected, JW_TC_LIVE, JW_ACQUIRE, JW_RELAXED))
      break;
  }
  if (tc == NULL) {
    tc = jw_os_meta_alloc(sizeof *tc);
    if (tc == NULL) return NULL;
    jw_bc_init(&tc->bc);
    jw_store(&tc->state, JW_TC_LIVE, JW_RELAXED); /* published by the CAS below */
    void *head = jw_load(&jw_tc_registry, JW_RELAXED);
    do {
      tc->all_next = head;
      /* Release: the cache's initial contents and link. */
    } while (!jw_cas_weak(&jw_tc_registry, &head, tc, JW_RELEASE, JW_RELAXED));
  }
  if (tc->parked) {
    /* A parked cache (JWMALLOC_LOW_MEMORY): its slabs carry its key (and
     * the tag table its key's words) and its queues their mode; the next
     * refill converts them if placement moved. */
    tc->parked = 0;
    tc->parked_seen = 0;
    return tc;
  }
  /* Low 8 bits clear: the tag table keeps the class and a valid bit there
   * (page_tag.h). */
  uint64_t key;
  while ((key = jw_random_key() & JW_TAG_KEY_MASK) == 0) {
  }
  tc->key = key;
  uint32_t w = jw_load(&jw_place_word, JW_RELAXED); /* a setting (page_source.h) */
  tc->rq_shift = (w & 1u) ? JW_ROOT_SHIFT : 63; /* its queues are empty: any mode */
  tc->place_word = w;
  return tc;
}

void jw_tc_attach(jw_tls *t, jw_tcache *tc) {
  t->tc = tc;
  t->key = tc->key;
  t->fkey = jw_load(&jw_free_key, JW_RELAXED); /* set once, before any cache exists */
  t->state = JW_TLS_ACTIVE;
}

void jw_tc_orphan_others(jw_tcache *self) {
  for (jw_tcache *tc = jw_load(&jw_tc_registry, JW_ACQUIRE); tc; tc = tc->all_next)
    if (tc != self && jw_load(&tc->state, JW_RELAXED) == JW_TC_LIVE)
      jw_store(&tc->state, JW_TC_ORPHANED, JW_RELAXED); /* child is single-threaded */
}

uint64_t jw_tc_released_held(void) {
  uint64_t n = 0;
  for (jw_tcache *tc = jw_load(&jw_tc_registry, JW_ACQUIRE); tc; tc = tc->all_next) {
    /* Acquire pairs with the release store of FREE: the released contents. */
    if (jw_load(&tc->state, JW_ACQUIRE) != JW_TC_FREE || tc->parked) continue;
    for (unsigned c = 0; c < JW_NCLASSES; c++) n += (tc->current[c] != NULL) + (tc->partial[c] != NULL);
    n += (tc->full != NULL) + (jw_load(&tc->ready, JW_RELAXED) != NULL) + tc->nslabs;
  }
  return n;
}
