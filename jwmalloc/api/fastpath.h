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

static inline void *jw_fast_malloc(size_t n) {
  /* n <= JW_SMALL_MAX, the bound read from the gate (gate.h): 0 while malloc
   * is disabled. Relaxed: a setting; a call that sees it late completes. */
  if (JW_UNLIKELY(jw_gate_malloc_slow(n))) return NULL;
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
  t->room[c]++;
  b->key = 0;
  t->n_malloc++;
  return b;
}

/* Always inlined: the caller it notes on the overflow branch is the caller
 * of the public function it is inlined into. A block of one of the caller's
 * own slabs (current, partial or parked) goes onto the bin of its class
 * (frontend.md, "The bin"); ownership and class come from the tag table
 * (frontend.md, "The tag table"), so no slab header is read. */
static inline __attribute__((always_inline)) bool jw_fast_free(void *p) {
  uintptr_t a = (uintptr_t)p;
  /* Not in a slab's block area (offset < 64: header or page-aligned) or
   * misaligned: slow path. The alignment mask comes from the gate (gate.h):
   * all ones while malloc is disabled. Relaxed: a setting, as above. */
  if (JW_UNLIKELY((a & 0xfc0) == 0 || jw_gate_free_slow(a))) return false;
  jw_tls *t = &jw_tls_state;
  /* The tag table of the GiB freed into last (jw_free_slow changes it). */
  uintptr_t pg = a >> 12;
  if (JW_UNLIKELY(t->tag_last - pg >= JW_TAG_WORDS)) return false;
  jw_atomic_u64 *w = &t->tag_words[pg];
  /* word ^ key: for our own slab of class c exactly 2c (the key bits
   * cancel); any other word leaves key bits (an untagged page's 0 leaves the
   * whole key, which is not 0 while a thread has a cached table: page_tag.h).
   * So one compare decides. Relaxed: only our own key is acted on, and only
   * we write it. */
  uintptr_t c2 = (uintptr_t)(jw_load(w, JW_RELAXED) ^ t->key);
  if (JW_UNLIKELY(c2 > 2 * (JW_NCLASSES - 1))) return false;
  jw_block *b = p;
  uint64_t fkey = t->fkey;
  if (JW_UNLIKELY(jw_block_key(b) == fkey)) return false; /* double free: reported by the slow path */
  if (c2 & 1) __builtin_unreachable(); /* 2c: lets the compiler index bin and room by c2 */
  uintptr_t c = c2 >> 1;
#if JW_ASAN
  jw_poison(b, jw_class_size[c]);
#endif
  jw_block_set_free(b, t->bin[c], fkey);
  t->bin[c] = b;
  t->n_free++;
  if (JW_UNLIKELY(--t->room[c] < 0)) {
    t->caller = __builtin_return_address(0);
    jw_fast_free_overflow(t, (unsigned)c);
  }
  return true;
}

#endif
