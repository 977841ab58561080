/* Process-wide statistics counters of the API layer (relaxed atomics, many
 * writers). Per-thread frontend counters live in the thread cache. */
#ifndef JW_API_COUNTERS_H
#define JW_API_COUNTERS_H

#include "../common/counter.h"

#define JW_UNCACHED_FOLD_EVERY 64

typedef struct jw_api_counter_set {
  jw_atomic_u64 large_mallocs, large_frees;
  jw_atomic_u64 huge_mallocs, huge_frees, huge_bytes;
  jw_atomic_u64 reallocs, reallocs_in_place;
  /* Cross-thread frees by threads without a cache, added in batches of
   * JW_UNCACHED_FOLD_EVERY from each thread's count (it lags by less than
   * one batch per such thread). */
  jw_atomic_u64 small_frees_no_cache;
  jw_atomic_u64 small_via_mid;        /* small requests served by the midend (no cache) */
  jw_atomic_u64 invalid;
  jw_atomic_u64 threads_started, threads_exited;
} jw_api_counter_set;

extern jw_api_counter_set jw_api_counters;

#endif
