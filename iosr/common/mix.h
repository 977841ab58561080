/* A 64-bit mixing function (the finalizer of MurmurHash3, a well-known
 * constant set): deterministic pseudo-random page contents for iosr-app and
 * the tests. Thread-safe, pure. */
#ifndef IOSR_COMMON_MIX_H
#define IOSR_COMMON_MIX_H

#include <stdint.h>

static inline uint64_t iosr_mix(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

#endif
