/* malloc_trim racing mallocs and frees of every tier (docs/design/api.md,
 * malloc_trim): it empties the calling thread's caches and the shared ones
 * while other threads use them.
 *
 * Usage: test_trim CASE [SCALE]
 *   during_churn  12 threads churn blocks of every tier (16 B to the block
 *                 cache's ranges), each freeing what another allocated,
 *                 while four others call malloc_trim in a loop (run with
 *                 JWMALLOC_CHECK=1): no hang, contents intact, no valid free
 *                 reported, live bytes back to the start
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "jwmalloc.h"
#include "range_blocks.h"
#include "thread_test.h"

#define TT 12
#define TSLOTS 256
static _Atomic(blk *) shared_slot[TSLOTS];
static atomic_int trim_stop;

static void *trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&trim_stop)) {
    jw_malloc_trim(0);
    sched_yield();
  }
  return NULL;
}

static size_t any_size(uint64_t r) {
  switch (r % 5) {
    case 0:
      return 16 + (r >> 8) % 2000;
    case 1:
      return 2048 + (r >> 8) % 14000;
    case 2:
      return 16384 + (r >> 8) % 65536;
    default:
      return cached_class(r >> 8);
  }
}

static void *churner(void *arg) {
  uint64_t s = 0xabcdef12345ull * (uint64_t)((intptr_t)arg + 1);
  long ops = (long)arg >= 0 ? scaled(6000) : 0;
  for (long op = 0; op < ops; op++) {
    uint64_t r = rnd(&s);
    size_t n = any_size(r);
    blk *b = jw_malloc(sizeof *b);
    b->n = n;
    b->p = jw_malloc(n);
    b->seed = (uint8_t)r;
    if (b->p == NULL) {
      FAIL("during_churn: malloc(%zu) failed", n);
      return NULL;
    }
    fill(b);
    /* Swap with a shared slot: the old one (another thread's, usually) is freed here. */
    blk *old = atomic_exchange(&shared_slot[(r >> 40) % TSLOTS], b);
    if (old) {
      if (!intact(old)) FAIL("during_churn: block %p of %zu bytes corrupted", old->p, old->n);
      jw_free(old->p);
      jw_free(old);
    }
    if ((op & 255) == 0) jw_malloc_trim(0);
  }
  return NULL;
}

static int case_during_churn(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  pthread_t t[TT], tr[4];
  for (int i = 0; i < 4; i++) pthread_create(&tr[i], NULL, trimmer, NULL);
  for (int i = 0; i < TT; i++) pthread_create(&t[i], NULL, churner, (void *)(intptr_t)i);
  for (int i = 0; i < TT; i++) pthread_join(t[i], NULL);
  atomic_store(&trim_stop, 1);
  for (int i = 0; i < 4; i++) pthread_join(tr[i], NULL);
  for (int i = 0; i < TSLOTS; i++) {
    blk *b = atomic_exchange(&shared_slot[i], NULL);
    if (!b) continue;
    if (!intact(b)) FAIL("during_churn: block corrupted at the end");
    jw_free(b->p);
    jw_free(b);
  }
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "during_churn: %ld live bytes after everything was freed and trimmed, %ld before", live1,
        live0);
  CHECK(st().invalid_frees == 0, "during_churn: valid frees reported");
  printf("during_churn: %d churners, 4 trimmers; live bytes back to %ld\n", TT, live1);
  jw_free(warm);
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"during_churn", case_during_churn},
  };
  return TEST_MAIN(cases);
}
