/* Log-linear latency histogram (docs/design/bench.md, "Latency"). */
#include "harness.h"

static unsigned bucket_of(uint64_t ns) {
  if (ns < JWB_HIST_LINEAR) return (unsigned)ns;
  unsigned e = 63u - (unsigned)__builtin_clzll(ns);           /* 6.. */
  if (e >= 40) return JWB_HIST_BUCKETS - 1;
  unsigned sub = (unsigned)((ns >> (e - 5)) & (JWB_HIST_SUB - 1)); /* next 5 bits */
  return JWB_HIST_LINEAR + (e - 6) * JWB_HIST_SUB + sub;
}

/* Upper edge (inclusive) of bucket i. */
static uint64_t bucket_top(unsigned i) {
  if (i < JWB_HIST_LINEAR) return i;
  unsigned e = 6 + (i - JWB_HIST_LINEAR) / JWB_HIST_SUB;
  uint64_t sub = (i - JWB_HIST_LINEAR) % JWB_HIST_SUB;
  return (1ull << e) + ((sub + 1) << (e - 5)) - 1;
}

void jwb_hist_add(jwb_hist *h, uint64_t ns) {
  h->b[bucket_of(ns)]++;
  h->count++;
  if (ns > h->max) h->max = ns;
}

void jwb_hist_merge(jwb_hist *into, const jwb_hist *from) {
  for (unsigned i = 0; i < JWB_HIST_BUCKETS; i++) into->b[i] += from->b[i];
  into->count += from->count;
  if (from->max > into->max) into->max = from->max;
}

uint64_t jwb_hist_quantile(const jwb_hist *h, double q) {
  if (h->count == 0) return 0;
  uint64_t rank = (uint64_t)(q * (double)h->count);
  if (rank >= h->count) rank = h->count - 1;
  uint64_t seen = 0;
  for (unsigned i = 0; i < JWB_HIST_BUCKETS; i++) {
    seen += h->b[i];
    if (seen > rank) {
      uint64_t top = bucket_top(i);
      return top < h->max ? top : h->max;
    }
  }
  return h->max;
}
