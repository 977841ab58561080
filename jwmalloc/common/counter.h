/* Statistics counters with a single writer: the writer adds with a relaxed
 * load and store (no locked instruction), any thread reads with a relaxed
 * load. Counters with several writers use jw_fetch_add instead. */
#ifndef JW_COMMON_COUNTER_H
#define JW_COMMON_COUNTER_H

#include "atomic.h"

static inline void jw_counter_add_owner(jw_atomic_u64 *c, uint64_t by) {
  jw_store(c, jw_load(c, JW_RELAXED) + by, JW_RELAXED); /* statistics only */
}

static inline void jw_counter_add(jw_atomic_u64 *c, uint64_t by) {
  jw_fetch_add(c, by, JW_RELAXED); /* statistics only */
}

static inline uint64_t jw_counter_get(jw_atomic_u64 *c) { return jw_load(c, JW_RELAXED); }

#endif
