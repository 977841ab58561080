/* Small helpers shared by the backend tests: checks that report and count,
 * and a deterministic random generator (splitmix64). */
#ifndef JW_TESTS_BACKEND_TB_H
#define JW_TESTS_BACKEND_TB_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static int tb_failures __attribute__((unused));

/* Reports a failed condition; fatal ones stop at once (state afterwards
 * would only add noise), others after 20 failures. */
#define TB_ASSERT_(fatal, cond, ...)                                            \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: %s: %s: ", __FILE__, __LINE__, (fatal) ? "required" : "check failed", #cond); \
      fprintf(stderr, __VA_ARGS__);                                             \
      fputc('\n', stderr);                                                      \
      if ((fatal) || ++tb_failures > 20) exit(1);                               \
    }                                                                           \
  } while (0)

#define TB_CHECK(cond, ...) TB_ASSERT_(0, cond, __VA_ARGS__)
#define TB_REQUIRE(cond, ...) TB_ASSERT_(1, cond, __VA_ARGS__)

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
