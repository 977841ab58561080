/* State shared by the backend's own files (backend.c, check.c). */
#ifndef JW_BACKEND_INTERNAL_H
#define JW_BACKEND_INTERNAL_H

#include "backend.h"
#include "bins.h"
#include "lock.h"

typedef struct jw_backend_state {
  jw_lock lock;        /* the backend lock: trees, bins, roots (docs/design/backend.md, "Locks") */
  jw_bins bins;
  jw_atomic_u32 deferred; /* stack of ranges freed while the lock was busy (range ids) */
  jw_atomic_u32 inited, check, retain_roots;
  /* Statistics: written under the lock (or atomically), read racily. */
  jw_atomic_u64 live_granules, splits, merges, allocs, frees, deferred_frees;
} jw_backend_state;

extern jw_backend_state jw_be;

/* Reads the options once. */
void jw_backend_init_once(void);
/* Frees every deferred range (lock held). */
void jw_backend_drain_deferred(void);

#endif
