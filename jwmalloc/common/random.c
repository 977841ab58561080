/* See random.h. */
#include "random.h"

#include <sys/auxv.h>
#include <time.h>

#include "atomic.h"

static jw_atomic_u64 counter;

static uint64_t mix(uint64_t z) { /* splitmix64 finalizer */
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

static uint64_t seed(void) {
  uint64_t s = 0;
  const unsigned char *r = (const unsigned char *)getauxval(AT_RANDOM);
  if (r)
    for (int i = 0; i < 8; i++) s = (s << 8) | r[i];
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return s ^ mix((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 32));
}

uint64_t jw_random_key(void) {
  static jw_atomic_u64 base;
  /* Relaxed: the seed only has to be some value; a race seeds twice with
   * equally good values, and the counter keeps the results distinct. */
  uint64_t b = jw_load(&base, JW_RELAXED);
  if (b == 0) {
    uint64_t s = seed() | 1;
    uint64_t expected = 0;
    if (!jw_cas(&base, &expected, s, JW_RELAXED, JW_RELAXED)) s = expected;
    b = s;
  }
  for (;;) {
    uint64_t k = mix(b + jw_fetch_add(&counter, 0x9e3779b97f4a7c15ULL, JW_RELAXED)) & ~(uint64_t)15;
    if (k) return k;
  }
}
