/* The cross-thread side of the thread cache: a slab's outcomes after a
 * remote push (notify its owner, take an abandoned slab's emptied page), and
 * the pending chains of batched remote frees. See thread_cache.h and
 * docs/design/frontend.md, "Frees from other threads" and "Thread exit,
 * abandoned slabs and adoption". */
#include "../common/counter.h"
#include "../pages/tier_pages.h"
#include "page_pool.h"
#include "thread_cache.h"

/* Pushes s on its owner's ready stack (after JW_REMOTE_NOTIFY). */
static void notify_owner(jw_slab *s) {
  /* Relaxed: the remote CAS that returned NOTIFY acquired the owner field. */
  jw_tcache *o = jw_load(&s->owner, JW_RELAXED);
  void *head = jw_load(&o->ready, JW_RELAXED);
  do {
    s->ready_next = head;
    /* Release: the owner reads ready_next after its acquire exchange. */
  } while (!jw_cas_weak(&o->ready, &head, s, JW_RELEASE, JW_RELAXED));
}

/* The freeing thread's push made an abandoned slab's page free (LAST): the
 * page is POOLED and the caller's, its remote list every block of the slab,
 * so it keeps that list for its class (a refill of the class reuses it
 * without formatting, as an emptied slab of the thread's own). */
static void take_empty_page(jw_tcache *tc, jw_slab *s) {
  /* Relaxed: the pushing CAS that returned LAST acquired every link. */
  s->local = jw_slab_list_of(jw_load(&s->remote, JW_RELAXED));
  s->live = 0;
  if (tc && jw_load(&tc->state, JW_RELAXED) == JW_TC_LIVE) {
    jw_pool_put(tc, s, false);
  } else {
    jw_tier_release_pages(s, 1); /* already POOLED: ours alone */
  }
}

bool jw_tc_remote_outcome(jw_tcache *tc, jw_slab *s, jw_remote_result r) {
  switch (r) {
    case JW_REMOTE_NOTIFY:
      notify_owner(s);
      break;
    case JW_REMOTE_LAST:
      take_empty_page(tc, s);
      break;
    case JW_REMOTE_INVALID:
      return false;
    default:
      break;
  }
  return true;
}

void *jw_tc_remote_flush_class(jw_tls *t, jw_tcache *tc, unsigned c) {
  jw_block *head = t->rf_head[c];
  if (head == NULL) return NULL;
  jw_slab *s = jw_slab_of(head);
  jw_remote_result r = jw_slab_remote_push(s, head, t->rf_tail[c], t->rf_n[c]);
  t->rf_head[c] = t->rf_tail[c] = NULL;
  t->rf_n[c] = 0;
  t->rf_mask &= ~(1u << c);
  if (r == JW_REMOTE_PUSHED || r == JW_REMOTE_ABANDONED || jw_tc_remote_outcome(tc, s, r)) return NULL;
  return head;
}

void *jw_tc_chain_add(jw_tls *t, jw_tcache *tc, jw_slab *s, jw_block *b, uint64_t fkey) {
  unsigned c = s->cls;
  jw_block *h = t->rf_head[c];
  if (h != NULL && jw_slab_of(h) == s) { /* the bound: b is the chain's last */
    jw_block_set_free(b, h, fkey);
    t->rf_head[c] = b;
    t->rf_n[c]++;
    return jw_tc_remote_flush_class(t, tc, c);
  }
  jw_block_set_free(b, NULL, fkey);
  void *bad = h != NULL ? jw_tc_remote_flush_class(t, tc, c) : NULL; /* another slab's chain */
  t->rf_head[c] = t->rf_tail[c] = b;
  t->rf_n[c] = 1;
  t->rf_mask |= 1u << c;
  return bad;
}

void *jw_tc_remote_flush(jw_tls *t, jw_tcache *tc) {
  void *bad = NULL;
  while (t->rf_mask != 0) {
    void *b = jw_tc_remote_flush_class(t, tc, (unsigned)__builtin_ctz(t->rf_mask));
    if (bad == NULL) bad = b;
  }
  return bad;
}
