/* A population of small and midend blocks (75% 16 B-1 KiB, 25% 1-8 KiB) that
 * a test grows, churns (replaces a random block) and shrinks; each block
 * holds its own index, checked when it is freed. Shared by the placement
 * tests (test_placement_auto.c, test_placement_guard.c). Single-threaded.
 * Include after check.h and jwmalloc.h.
 *
 * The placement tests run their reclaim cycles themselves (churn_cycles;
 * CTest turns the reclaim thread off and the interval up): the trough
 * detector counts cycles, and how many cycles fall in a given amount of the
 * program's work must not depend on how busy the machine is. */
#ifndef JW_TESTS_CHURN_POPULATION_H
#define JW_TESTS_CHURN_POPULATION_H

#include <stddef.h>
#include <stdint.h>

#include "reclaim/reclaim.h"

#define POP_CAP 200000

static void *blk[POP_CAP];
static size_t sz[POP_CAP], n, bytes;
static uint64_t pop_seed = 88172645463325252ull;

static uint64_t rnd(void) {
  pop_seed ^= pop_seed << 13, pop_seed ^= pop_seed >> 7, pop_seed ^= pop_seed << 17;
  return pop_seed;
}

/* Allocates block i (i == n appends: the caller counts n). */
static void put(size_t i) {
  sz[i] = rnd() % 100 < 75 ? 16 + rnd() % 1000 : 1024 + rnd() % 7000;
  blk[i] = jw_malloc(sz[i]);
  CHECK(blk[i] != NULL, "jw_malloc");
  *(size_t *)blk[i] = i;
  bytes += sz[i];
}

static void drop(size_t i) {
  CHECK(*(size_t *)blk[i] == i, "block %zu overwritten", i);
  jw_free(blk[i]);
  bytes -= sz[i];
}

static void churn(long ops) {
  for (long k = 0; k < ops; k++) {
    size_t i = rnd() % n;
    drop(i);
    put(i);
  }
}

/* ops replacements with a reclaim cycle after each `per_cycle` of them. */
static void churn_cycles(long ops, long per_cycle) {
  for (long k = 0; k < ops; k += per_cycle) {
    churn(per_cycle);
    jw_reclaim_cycle();
  }
}

#endif
