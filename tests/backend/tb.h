/* Small helpers shared by the backend tests: checks that report and count,
 * and a deterministic random generator (splitmix64). */
#ifndef JW_TESTS_BACKEND_TB_H
#define JW_TESTS_BACKEND_TB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int tb_failures __attribute__((unused));

#define TB_CHECK(cond, ...)                                         \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fputc('\n', stderr);                                          \
      if (++tb_failures > 20) exit(1);                              \
    }                                                               \
  } while (0)

/* Stops at the first failure (state afterwards would only add noise). */
#define TB_REQUIRE(cond, ...)                                       \
  do {                                                              \
    if (!(cond)) {                                                  \
      fprintf(stderr, "%s:%d: required: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fputc('\n', stderr);                                          \
      exit(1);                                                      \
    }                                                               \
  } while (0)

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
