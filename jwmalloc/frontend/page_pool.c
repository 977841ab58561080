/* See page_pool.h. */
#include "page_pool.h"

#include "../common/counter.h"
#include "../common/options.h"
#include "../common/tier_pages.h"

size_t jw_pool_watermark(const jw_tcache *tc) {
  size_t prop = (size_t)tc->nslabs * (size_t)jw_opt(JW_OPT_POOL_PERCENT) / 100;
  size_t floor = (size_t)jw_opt(JW_OPT_POOL_MIN);
  return prop > floor ? prop : floor;
}

void jw_pool_put(jw_tcache *tc, jw_slab *s) {
  /* Relaxed: a pooled page has no block any other thread may validly free;
   * an invalid free that reads POOLED is reported. */
  jw_store(&s->remote, (uintptr_t)JW_RS_POOLED, JW_RELAXED);
  jw_store(&s->tag, 0, JW_RELAXED); /* only the owner acts on its own key */
  jw_poison(jw_slab_blocks(s), JW_SLAB_USABLE);
  s->where = JW_WHERE_POOL;
  s->prev = NULL;
  s->next = tc->pool_head;
  if (tc->pool_head) tc->pool_head->prev = s;
  else tc->pool_tail = s;
  tc->pool_head = s;
  tc->pool_len++;
  size_t mark = jw_pool_watermark(tc);
  if (tc->pool_len > mark) jw_pool_shrink(tc, mark);
}

jw_slab *jw_pool_take(jw_tcache *tc) {
  jw_slab *s = tc->pool_head;
  if (s == NULL) return NULL;
  tc->pool_head = s->next;
  if (s->next) s->next->prev = NULL;
  else tc->pool_tail = NULL;
  tc->pool_len--;
  return s;
}

size_t jw_pool_shrink(jw_tcache *tc, size_t keep) {
  size_t n = 0;
  while (tc->pool_len > keep) {
    jw_slab *s = tc->pool_tail; /* least recently used */
    tc->pool_tail = s->prev;
    if (s->prev) s->prev->next = NULL;
    else tc->pool_head = NULL;
    tc->pool_len--;
    jw_tier_release_pages(s, 1);
    n++;
  }
  if (n) jw_counter_add_owner(&tc->pool_evictions, n);
  return n;
}
