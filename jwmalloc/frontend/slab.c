/* See slab.h and docs/design/frontend.md ("Frees from other threads"). */
#include "slab.h"

#include "../common/log.h"
#include "thread_cache.h"

void jw_slab_init(jw_slab *s, unsigned cls, struct jw_tcache *owner, uint64_t tag) {
  /* The remote word keeps its count above bit 48 (slab.h). */
  if (JW_UNLIKELY((jw_remote_word)(uintptr_t)s >> JW_RS_COUNT_SHIFT)) jw_fatal("slab at %p: above 2^48, beyond the remote word", (void *)s);
  jw_tag_prepare((uintptr_t)s); /* once per GiB: its free fast path reads the table */
  unsigned size = jw_class_size[cls];
  unsigned cap = JW_SLAB_USABLE / size;
  char *base = jw_slab_blocks(s);
  jw_poison(base, JW_SLAB_USABLE);
  /* Linked from the last block down, so the list runs in address order.
   * Every block is marked free (FREE_KEY, set once at init: relaxed), so
   * that a free of a block never handed out (one waiting in a thread's bin)
   * is reported like a double free instead of being handed out twice. */
  uint64_t fkey = jw_load(&jw_free_key, JW_RELAXED);
  jw_block *head = NULL;
  for (unsigned i = cap; i-- > 0;) {
    jw_block *b = (jw_block *)(base + (size_t)i * size);
    jw_block_set_free(b, head, fkey);
    head = b;
  }
  s->local = head;
  s->live = 0;
  s->capacity = (uint16_t)cap;
  s->cls = (uint8_t)cls;
  jw_slab_reuse(s, owner, tag);
}

void jw_slab_reuse(jw_slab *s, struct jw_tcache *owner, uint64_t tag) {
  s->where = JW_WHERE_CURRENT;
  s->next = s->prev = s->ready_next = NULL;
  /* Relaxed: the owner field is read by notifiers only after they saw the
   * FULL state, which jw_slab_park publishes with release. */
  jw_store(&s->owner, (void *)owner, JW_RELAXED);
  /* Relaxed: no other thread acts on this slab until it hands out blocks,
   * and those hand-offs synchronize through the program's own means. */
  jw_store(&s->remote, (jw_remote_word)JW_RS_ACTIVE, JW_RELAXED);
  /* Relaxed: only the owner acts on a tag equal to its own key. */
  jw_slab_set_tag(s, tag);
}

unsigned jw_slab_give_back(jw_slab *s, jw_block *list) {
  if (list == NULL) return 0;
  unsigned n = 1;
  jw_block *tail = list;
  for (jw_block *nx; (nx = jw_block_next(tail)) != NULL; tail = nx) n++;
  jw_block_set_next(tail, s->local);
  s->local = list;
  s->live -= n;
  return n;
}

unsigned jw_slab_give_back_n(jw_slab *s, jw_block *list, unsigned n) {
  if (s->local != NULL) return jw_slab_give_back(s, list);
  s->local = list;
  s->live -= n;
  return n;
}

unsigned jw_slab_collect_list(jw_slab *s) {
  jw_remote_word old = jw_load(&s->remote, JW_RELAXED);
  if (jw_slab_list_of(old) == NULL) return 0;
  /* Acquire: the pushers' writes of links and keys are visible. The state
   * bits are kept, the list and its count taken. */
  while (!jw_cas_weak(&s->remote, &old, old & JW_RS_MASK, JW_ACQUIRE, JW_RELAXED)) {
  }
  return jw_slab_give_back_n(s, jw_slab_list_of(old), jw_slab_count_of(old));
}


void jw_slab_unnotify(jw_slab *s) {
  /* NOTIFIED (2) -> ACTIVE (0), list kept. Relaxed: the transition
   * publishes nothing; blocks pushed later are synchronized by collect. */
  jw_fetch_and(&s->remote, ~JW_RS_MASK, JW_RELAXED);
}

jw_abandon_result jw_slab_abandon(jw_slab *s) {
  /* Acquire: the pushed blocks' links are read by the collect below. */
  jw_remote_word old = jw_load(&s->remote, JW_ACQUIRE);
  for (;;) {
    jw_remote_word st = old & JW_RS_MASK;
    if (st == JW_RS_NOTIFIED) return JW_ABANDON_BUSY;
    if (jw_slab_list_of(old) != NULL) {
      /* The pending remote frees join the local list first (state kept). */
      jw_slab_collect_list(s);
      old = jw_load(&s->remote, JW_ACQUIRE);
      continue;
    }
    /* Everything is free: the slab stays ours (no freer can reach it). */
    if (s->live == 0) return JW_ABANDON_EMPTY;
    /* The local list (capacity - live blocks) moves into the word. */
    jw_remote_word w = (jw_remote_word)(s->capacity - s->live) << JW_RS_COUNT_SHIFT |
                       (jw_remote_word)(uintptr_t)s->local | JW_RS_ABANDONED;
    jw_slab_set_tag(s, 0);
    /* Release: the local list's links and the header, for an adopter or
     * the last freer (their acquire). A failure is a push that arrived. */
    if (jw_cas(&s->remote, &old, w, JW_RELEASE, JW_ACQUIRE)) return JW_ABANDON_DONE;
  }
}
