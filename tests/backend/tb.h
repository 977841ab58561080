/* Small helpers shared by the backend tests: test_support.h's checks (CHECK
 * goes on after a failure, REQUIRE stops: state afterwards would only add
 * noise), and a deterministic random generator (splitmix64). */
#ifndef JW_TESTS_BACKEND_TB_H
#define JW_TESTS_BACKEND_TB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define TEST_CONTINUE_AFTER_FAILURE /* CHECK goes on; REQUIRE stops at once */
#include "test_support.h"

typedef struct tb_rng {
  uint64_t s;
} tb_rng;

static inline uint64_t tb_next(tb_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Uniform in [0, n). */
static inline uint32_t tb_below(tb_rng *r, uint32_t n) { return (uint32_t)((tb_next(r) >> 32) * n >> 32); }

#endif
