/* Cost of the slot checksum on the swap-in path (docs/design/iosr.md section
 * 4, "Slot checksums"): ns per 4096-byte page of iosr_crc32c_page, hardware
 * and portable, next to a 4096-byte memcpy (the copy every swap-in makes
 * anyway). Pages cycle through 64 MiB so they come from memory, not L1, as a
 * page just read from the swap area would (it arrives by DMA).
 *
 *   crc_bench [ROUNDS]   prints medians of ROUNDS (default 5) runs; run it
 *                        under `machine quiet`. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/crc32c.h"

#define POOL (64u << 20)
#define PAGES (POOL / 4096u)

#include "test_support.h" /* test_now_s */

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static volatile uint32_t sink;

/* ns per page of one pass over the pool: 0 crc, 1 memcpy */
static double pass(uint8_t *pool, uint8_t *dst, int what) {
  double t0 = test_now_s();
  uint32_t acc = 0;
  for (uint32_t i = 0; i < PAGES; i++) {
    const uint8_t *pg = pool + (size_t)i * 4096;
    if (what == 0) acc ^= iosr_crc32c_page(pg);
    else memcpy(dst + (size_t)(i & 63) * 4096, pg, 4096), acc ^= dst[(i & 63) * 4096];
  }
  sink = acc;
  return (test_now_s() - t0) * 1e9 / PAGES;
}

int main(int argc, char **argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 5;
  if (rounds < 1 || rounds > 1000) {
    fprintf(stderr, "usage: crc_bench [ROUNDS 1-1000]\n");
    return 2;
  }
  uint8_t *pool = aligned_alloc(4096, POOL), *dst = aligned_alloc(4096, 64 * 4096);
  double *v = malloc(sizeof(double) * (size_t)rounds);
  if (!pool || !dst || !v) return 1;
  for (size_t i = 0; i < POOL; i++) pool[i] = (uint8_t)(i * 2654435761u >> 13);
  const char *names[3] = {"crc32c", "crc32c-portable", "memcpy"};
  for (int k = 0; k < 3; k++) {
    iosr_crc32c_force_portable(k == 1);
    const char *impl = k == 2 ? "-" : iosr_crc32c_impl();
    for (int r = 0; r < rounds; r++) v[r] = pass(pool, dst, k == 2);
    qsort(v, (size_t)rounds, sizeof *v, cmp_d);
    printf("%-16s impl %-9s median %.0f ns/page  (min %.0f, max %.0f; %d passes of %u pages)\n", names[k], impl,
           v[rounds / 2], v[0], v[rounds - 1], rounds, PAGES);
  }
  iosr_crc32c_force_portable(0);
  return 0;
}
