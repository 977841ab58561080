#include "histo.h"

unsigned iosr_size_bucket(uint64_t bytes) {
  unsigned b = 0;
  uint64_t lim = 8192;
  while (b + 1 < IOSR_SIZE_BUCKETS && bytes >= lim) {
    b++;
    lim <<= 1;
  }
  return b;
}

uint64_t iosr_size_bucket_floor(unsigned b) { return (uint64_t)4096 << b; }

/* Bucket 0: < 1024 ns. Then for msb m = 10..: four buckets splitting
 * [2^m, 2^(m+1)) by the next two bits. */
unsigned iosr_lat_bucket(uint64_t ns) {
  if (ns < 1024) return 0;
  unsigned m = 63 - (unsigned)__builtin_clzll(ns);
  unsigned sub = (unsigned)(ns >> (m - 2)) & 3;
  unsigned b = 1 + (m - 10) * 4 + sub;
  return b < IOSR_LAT_BUCKETS ? b : IOSR_LAT_BUCKETS - 1;
}

uint64_t iosr_lat_bucket_ceil(unsigned b) {
  if (b == 0) return 1023;
  unsigned m = (b - 1) / 4 + 10, sub = (b - 1) % 4;
  return ((uint64_t)1 << m) + ((uint64_t)(sub + 1) << (m - 2)) - 1;
}

uint64_t iosr_lat_quantile(const uint64_t *hist, double q) {
  uint64_t total = 0;
  for (unsigned i = 0; i < IOSR_LAT_BUCKETS; i++) total += hist[i];
  if (!total) return 0;
  uint64_t want = (uint64_t)(q * (double)total + 0.999999);
  if (want == 0) want = 1;
  uint64_t acc = 0;
  for (unsigned i = 0; i < IOSR_LAT_BUCKETS; i++) {
    acc += hist[i];
    if (acc >= want) return iosr_lat_bucket_ceil(i);
  }
  return iosr_lat_bucket_ceil(IOSR_LAT_BUCKETS - 1);
}
