/* Blocks that check themselves, for the multi-threaded jw_ API tests
 * (test_concurrency.c, test_breakit3.c): each carries its size and a seed in
 * a header and a pattern, verified before it is freed. */
#ifndef JW_TEST_CHECKED_BLOCKS_H
#define JW_TEST_CHECKED_BLOCKS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "jwmalloc.h"

typedef struct hdr {
  uint64_t size, seed;
} hdr;

static inline uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

/* A block of `size` bytes (>= 16) from jw_malloc, marked with `seed`. */
static inline void *make(size_t size, uint64_t seed) {
  unsigned char *p = jw_malloc(size);
  if (p == NULL) {
    FAIL("jw_malloc(%zu) failed: %s", size, strerror(errno));
    return NULL;
  }
  hdr h = {size, seed};
  memcpy(p, &h, sizeof h);
  for (size_t i = sizeof h; i + 1 < size && i < 64; i++) p[i] = (unsigned char)(seed + i);
  p[size - 1] = (unsigned char)(seed * 3);
  return p;
}

/* Verifies a block from make(), then frees it. */
static inline void check_and_free(void *v) {
  unsigned char *p = v;
  hdr h;
  memcpy(&h, p, sizeof h);
  int ok = h.size >= sizeof h && jw_malloc_usable_size(p) >= h.size && p[h.size - 1] == (unsigned char)(h.seed * 3);
  for (size_t i = sizeof h; ok && i + 1 < h.size && i < 64; i++) ok = p[i] == (unsigned char)(h.seed + i);
  if (!ok) FAIL("block %p (size %llu) corrupted", v, (unsigned long long)h.size);
  jw_free(p);
}

#endif
