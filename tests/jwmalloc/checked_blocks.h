/* Blocks that check themselves, for the multi-threaded jw_ API tests: each
 * carries its size and a seed in a header and a pattern, verified before it
 * is freed; and the check that live blocks do not overlap. */
#ifndef JW_TEST_CHECKED_BLOCKS_H
#define JW_TEST_CHECKED_BLOCKS_H

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
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

static inline int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* The n live blocks of `size` bytes in v do not overlap (each handed out
 * once); FAILs for each overlapping pair. */
static inline int distinct(void **v, size_t n, size_t size) {
  uintptr_t *c = malloc(n * sizeof *c); /* glibc's: the test's own memory */
  memcpy(c, v, n * sizeof *c);
  qsort(c, n, sizeof *c, cmp_ptr);
  int ok = 1;
  for (size_t i = 1; i < n; i++)
    if (c[i] - c[i - 1] < size) {
      FAIL("blocks %p and %p overlap (size %zu): handed out twice", (void *)c[i - 1], (void *)c[i], size);
      ok = 0;
    }
  free(c);
  return ok;
}

#endif
