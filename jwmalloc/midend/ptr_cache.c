/* See ptr_cache.h. */
#include "ptr_cache.h"

#include <stddef.h>

int jw_ptr_cache_put(jw_ptr_cache *c, void *p, uint64_t allowed) {
  uint64_t b = jw_load(&c->busy, JW_RELAXED);
  for (;;) {
    uint64_t free_bits = ~b & allowed;
    if (free_bits == 0) return 0;
    uint64_t bit = free_bits & -free_bits;
    /* Acquire: pairs with the release that freed the slot, so the previous
     * reader's load of the old value happens before our store. */
    if (jw_cas_weak(&c->busy, &b, b | bit, JW_ACQUIRE, JW_RELAXED)) {
      jw_store(&c->slot[__builtin_ctzll(bit)], p, JW_RELAXED); /* published below */
      /* Release: the value and the caller's earlier writes. */
      return jw_fetch_or(&c->full, bit, JW_RELEASE) == 0 ? JW_PTR_CACHE_PUT_FIRST : 1;
    }
  }
}

void *jw_ptr_cache_take(jw_ptr_cache *c) {
  uint64_t f = jw_load(&c->full, JW_RELAXED);
  while (f) {
    uint64_t bit = f & -f;
    /* Acquire: pairs with the writer's release fetch_or. */
    if (jw_cas_weak(&c->full, &f, f & ~bit, JW_ACQUIRE, JW_RELAXED)) {
      void *p = jw_load(&c->slot[__builtin_ctzll(bit)], JW_RELAXED); /* ordered by the CAS */
      /* Release: our read of the slot precedes its next writer's store. */
      jw_fetch_and(&c->busy, ~bit, JW_RELEASE);
      return p;
    }
  }
  return NULL;
}
