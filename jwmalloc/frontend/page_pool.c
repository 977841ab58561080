/* See page_pool.h. */
#include "page_pool.h"

#include "../common/counter.h"
#include "../common/options.h"
#include "../pages/tier_pages.h"
#include "../reclaim/reclaim.h"

size_t jw_pool_watermark(const jw_tcache *tc, bool returned) {
  size_t prop = (size_t)tc->nslabs * (size_t)jw_opt(JW_OPT_POOL_PERCENT) / 100;
  size_t floor = (size_t)jw_opt(JW_OPT_POOL_MIN);
  size_t mark = prop > floor ? prop : floor;
  /* A page its consumers emptied comes back to a producer: keep up to the
   * slabs it recently held (frontend.md, "The page pool"). */
  return returned && tc->pool_peak > mark ? tc->pool_peak : mark;
}

/* A page leaves the thread: it is nobody's slab any more. */
static void give_back(jw_slab *s) {
  /* Relaxed: a pooled page has no block any other thread may validly free;
   * an invalid free that reads POOLED is reported. */
  jw_store(&s->remote, (jw_remote_word)JW_RS_POOLED, JW_RELAXED);
  jw_slab_set_tag(s, 0); /* only the owner acts on its own key */
  jw_tier_release_pages(s, 1);
}

/* Pool lock held: unlinks the least recently used page. */
static jw_slab *unlink_tail(jw_tcache *tc) {
  jw_slab *s = tc->pool_tail;
  tc->pool_tail = s->prev;
  if (s->prev) s->prev->next = NULL;
  else tc->pool_head = NULL;
  tc->pool_len--;
  /* The stale pages are the LRU end: an eviction takes one of them first. */
  if (tc->pool_stale) tc->pool_stale--;
  return s;
}

/* Pool lock held: evicts LRU pages until at most `keep` remain. */
static size_t shrink_locked(jw_tcache *tc, size_t keep) {
  size_t n = 0;
  for (; tc->pool_len > keep; n++) give_back(unlink_tail(tc));
  if (n) jw_counter_add_owner(&tc->pool_evictions, n);
  return n;
}

void jw_pool_put(jw_tcache *tc, jw_slab *s, bool returned) {
  jw_store(&s->remote, (jw_remote_word)JW_RS_POOLED, JW_RELAXED); /* see give_back */
  jw_slab_set_tag(s, 0);
  jw_poison(jw_slab_blocks(s), JW_SLAB_USABLE);
  s->where = JW_WHERE_POOL;
  /* Placement (frontend.md): a page of a root above the one the backend
   * fills goes back rather than into the pool, where a refill of any class
   * would reuse it and keep its root mapped. */
  if (tc->rq_shift != 63 && jw_pages_above_place(s)) {
    jw_tier_release_pages(s, 1);
    jw_counter_add_owner(&tc->pool_evictions, 1);
    return;
  }
  if (!jw_lock_try(&tc->pool_lock, JW_LK_POOL)) {
    /* The reclaimer is unlinking aged pages: never wait for it. */
    jw_tier_release_pages(s, 1);
    jw_counter_add_owner(&tc->pool_evictions, 1);
    return;
  }
  s->prev = NULL;
  s->next = tc->pool_head;
  if (tc->pool_head) tc->pool_head->prev = s;
  else tc->pool_tail = s;
  tc->pool_head = s;
  tc->pool_len++;
  /* The slab count peaks just before a put (only puts, trims and exit lower
   * it), so recording it here sees every peak; s was counted until now. */
  if (tc->nslabs + 1 > tc->pool_peak) tc->pool_peak = tc->nslabs + 1;
  size_t mark = jw_pool_watermark(tc, returned);
  if (tc->pool_len > mark) shrink_locked(tc, mark);
  jw_lock_release(&tc->pool_lock);
  jw_reclaim_kick(); /* the page ages from now on (outside the pool lock: it may start the thread) */
}

jw_slab *jw_pool_take(jw_tcache *tc) {
  if (!jw_lock_try(&tc->pool_lock, JW_LK_POOL)) return NULL; /* the reclaimer holds it: a miss */
  jw_slab *s = tc->pool_head;
  if (s != NULL) {
    tc->pool_head = s->next;
    if (s->next) s->next->prev = NULL;
    else tc->pool_tail = NULL;
    tc->pool_len--;
    /* Taking from the MRU end dips into the stale pages only when the pool
     * is shorter than their count: the rest are all stale. */
    if (tc->pool_stale > tc->pool_len) tc->pool_stale = tc->pool_len;
  }
  jw_lock_release(&tc->pool_lock);
  return s;
}

size_t jw_pool_drain(jw_tcache *tc) {
  jw_lock_acquire(&tc->pool_lock, JW_LK_POOL);
  size_t n = shrink_locked(tc, 0);
  tc->pool_peak = 0; /* trim or exit: the watermark starts again from the slabs still held */
  jw_lock_release(&tc->pool_lock);
  return n;
}

size_t jw_pool_take_above_locked(jw_tcache *tc, jw_slab **out, size_t cap) {
  size_t n = 0;
  for (jw_slab *s = tc->pool_head, *next; s && n < cap; s = next) {
    next = s->next;
    if (!jw_pages_above_place(s)) continue;
    if (s->prev) s->prev->next = s->next;
    else tc->pool_head = s->next;
    if (s->next) s->next->prev = s->prev;
    else tc->pool_tail = s->prev;
    tc->pool_len--;
    out[n++] = s;
  }
  /* Pages left from anywhere in the list: the stale count stays a count of
   * LRU-end pages (at worst one of them ages a pass early). */
  if (tc->pool_stale > tc->pool_len) tc->pool_stale = tc->pool_len;
  return n;
}

size_t jw_pool_age(jw_tcache *tc, jw_slab **out, size_t cap, size_t *left, int *more) {
  *more = 0;
  if (!jw_lock_try(&tc->pool_lock, JW_LK_POOL)) {
    *left = 1; /* in use: looked at again at the next pass */
    return 0;
  }
  size_t n = 0;
  while (n < cap && tc->pool_stale > 0) out[n++] = unlink_tail(tc);
  if (tc->pool_stale == 0) {
    tc->pool_stale = tc->pool_len; /* every page left is a candidate for the next pass */
    tc->pool_peak = 0;             /* the watermark follows the slab count of the next interval */
  } else
    *more = 1; /* out[] is full: the rest of the stale pages in the next call */
  *left = tc->pool_len;
  jw_lock_release(&tc->pool_lock);
  return n;
}
