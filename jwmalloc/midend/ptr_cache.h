/* A bounded concurrent cache of pointers: up to 64 slots and two bitmaps,
 * `busy` (slot reserved by a writer or holding a value) and `full` (slot
 * holds a published value). Lock-free; a slot is rewritten only after its
 * reader released it, so there is no ABA.
 *
 * Brief: "Non-blocking interface" (the bounded concurrent bitmap as each size
 * class's fast path). Used by the midend per class; small enough to be
 * driven by a model-checking client. Thread-safe; never allocates.
 */
#ifndef JW_MIDEND_PTR_CACHE_H
#define JW_MIDEND_PTR_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/atomic.h"

#define JW_PTR_CACHE_SLOTS 64

typedef struct jw_ptr_cache {
  jw_atomic_u64 busy;
  jw_atomic_u64 full;
  jw_atomic_ptr slot[JW_PTR_CACHE_SLOTS];
} jw_ptr_cache;

/* Stores p in a free slot among the bits of `allowed`: returns 0 when none
 * is free, JW_PTR_CACHE_PUT_FIRST when the cache held no published value
 * before, else 1. Release: whatever the caller wrote before is visible to
 * the taker. */
#define JW_PTR_CACHE_PUT_FIRST 2
int jw_ptr_cache_put(jw_ptr_cache *c, void *p, uint64_t allowed);

/* Takes a published value, or returns NULL when the cache is empty. */
void *jw_ptr_cache_take(jw_ptr_cache *c);

#endif
