/* The thread-local fast paths of malloc and free, inlined into every public
 * entry point (docs/design/frontend.md "Fast paths"). No lock, no atomic
 * read-modify-write, no call: a table lookup and a list pop or push.
 * Each returns NULL/false when the slow path must run. */
#ifndef JW_API_FASTPATH_H
#define JW_API_FASTPATH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/config.h"
#include "core.h"
#include "gate.h"
#include "runtime.h"

/* Reads the first word of the page of any pointer given to free(). When
 * the page is not a frontend slab (a midend block spanning a page start),
 * that word is program data, which the program may write concurrently: the
 * read may race, and is validated instead (it is acted on only when it equals
 * this thread's secret key, which only our own slabs carry). So the
 * sanitizers leave this one read alone (docs/design/concurrency.md). */
static inline __attribute__((no_sanitize("address", "thread"))) uint64_t jw_fast_tag(jw_slab *s) {
#ifdef JW_VERIFY /* the checker reads it unchecked (docs/design/verification.md) */
  return vrf_validated_load(&s->tag.v, sizeof s->tag.v, VRF_SITE);
#else
  return jw_load(&s->tag, JW_RELAXED); /* only a match with our own key is acted on */
#endif
}

static inline void *jw_fast_malloc(size_t n) {
  /* n <= JW_SMALL_MAX, the bound read from the gate (gate.h): 0 while malloc
   * is disabled. Relaxed: a setting; a call that sees it late completes. */
  if (JW_UNLIKELY(n >= jw_load(&jw_gate_state.fast_limit, JW_RELAXED))) return NULL;
  jw_tls *t = &jw_tls_state;
  unsigned c = jw_class_of(n);
  jw_block *b = t->bin[c];
  if (JW_UNLIKELY(b == NULL)) return NULL;
#if JW_ASAN
  t->bin[c] = jw_block_next(b);
  jw_unpoison(b, jw_class_size[c]);
#else
  t->bin[c] = b->next;
#endif
  b->key = 0;
  t->n_malloc++;
  return b;
}

/* Always inlined: the caller it notes on the emptied or parked branch is the
 * caller of the public function it is inlined into. A block of one of the
 * caller's own slabs is freed here: of a current or partial slab inline, of
 * a parked one (tag key | 1, frontend.md "Refill") out of line, where the
 * slab goes back to its partial list. */
static inline __attribute__((always_inline)) bool jw_fast_free(void *p) {
  uintptr_t a = (uintptr_t)p;
  /* Not in a slab's block area (offset < 64: header or page-aligned) or
   * misaligned: slow path. The alignment mask comes from the gate (gate.h):
   * all ones while malloc is disabled. Relaxed: a setting, as above. */
  if (JW_UNLIKELY((a & 0xfc0) == 0 || (a & jw_load(&jw_gate_state.free_mask, JW_RELAXED)) != 0)) return false;
  jw_tls *t = &jw_tls_state;
  uint64_t key = t->key;
  jw_slab *s = jw_slab_of(p);
  uint64_t tag = jw_fast_tag(s);
  if (JW_UNLIKELY(tag != key || key == 0)) {
    /* Parked: tag == key | 1 with a key (key 0 would make that tag 1). */
    if (tag != (key | 1) || tag == 1) return false;
    t->caller = __builtin_return_address(0);
    jw_free_parked(t, s, p); /* a tail call: no frame on the fast path */
    return true;
  }
  jw_block *b = p;
  uint64_t fkey = t->fkey;
  if (JW_UNLIKELY(jw_block_key(b) == fkey)) return false; /* double free: reported by the slow path */
#if JW_ASAN
  jw_poison(b, jw_class_size[s->cls]);
#endif
  jw_block_set_free(b, s->local, fkey);
  s->local = b;
  t->n_free++;
  if (JW_UNLIKELY(--s->live == 0)) {
    t->caller = __builtin_return_address(0);
    jw_fast_free_emptied(t, s);
  }
  return true;
}

#endif
