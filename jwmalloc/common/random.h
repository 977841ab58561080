/* Secret random keys (slab tags, the free-block key) without allocating:
 * seeded from the kernel's AT_RANDOM bytes, mixed with a counter.
 * Thread-safe. Brief: "Frontend" (see docs/design/frontend.md: tags). */
#ifndef JW_COMMON_RANDOM_H
#define JW_COMMON_RANDOM_H

#include <stdint.h>

/* A fresh secret 64-bit value, never 0, low four bits clear (tags use them
 * as flags); two calls return equal values with probability 2^-60. */
uint64_t jw_random_key(void);

#endif
