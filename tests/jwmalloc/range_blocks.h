/* Ranges that check themselves, for the tests of the block cache's ranges
 * and of whole roots (blk: a pattern every 64 bytes of the requested size
 * and in its last byte), and the page source's live bytes once every cache
 * is emptied (settled_live, settle_to: a leak never settles). */
#ifndef JW_TEST_RANGE_BLOCKS_H
#define JW_TEST_RANGE_BLOCKS_H

#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "jwmalloc.h"
#include "thread_test.h"

#define HANG 60.0 /* seconds: a bound for a hang, never a timing check */

static inline long live_bytes(void) { return (long)st().page_source_live_bytes; }

/* Every thread's caches emptied (the calling thread's by trim, exited
 * threads' at their exit): live bytes settle to what is really live. */
static inline long settled_live(void) {
  jw_malloc_trim(0);
  return live_bytes();
}

/* settled_live() until it is `want`, within HANG seconds: the reclaimer may
 * be giving back blocks it took out of a cache (aging) when the test looks,
 * which is not a leak; a leak never settles. Returns the last figure. */
static inline long settle_to(long want) {
  double t0 = test_now_s();
  long l;
  while ((l = settled_live()) != want && test_now_s() - t0 < HANG) usleep(2000);
  if (l == want && test_now_s() - t0 > 0.5)
    fprintf(stderr, "note: live bytes took %.1f s to settle (in transit in the reclaimer)\n", test_now_s() - t0);
  return l;
}

typedef struct blk {
  unsigned char *p;
  size_t n;
  uint8_t seed;
} blk;

static inline void fill(blk *b) {
  for (size_t i = 0; i + 1 < b->n; i += 64) b->p[i] = (unsigned char)(b->seed + i / 64);
  if (b->n) b->p[b->n - 1] = (unsigned char)(b->seed ^ 0x5a);
}
static inline int intact_upto(const blk *b, size_t n) {
  for (size_t i = 0; i < n && i + 1 < b->n; i += 64)
    if (b->p[i] != (unsigned char)(b->seed + i / 64)) return 0;
  if (n >= b->n && b->n && b->p[b->n - 1] != (unsigned char)(b->seed ^ 0x5a)) return 0;
  return 1;
}
static inline int intact(const blk *b) { return intact_upto(b, b->n); }

/* A size just under a class of the block cache's ranges (80 KiB-1 MiB). */
static inline size_t cached_class(uint64_t r) {
  static const size_t g[] = {20, 24, 28, 32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256};
  return (g[r % 16] << 12) - (size_t)((r >> 8) % 4000);
}

#endif
