/* Adoption of abandoned slabs (docs/design/frontend.md, "Thread exit,
 * abandoned slabs and adoption"): a thread that exits leaves its slabs with
 * live blocks abandoned, their free blocks in the slab's remote word; a live
 * thread that frees into such a slab takes it over. Each case asserts what a
 * program relies on: the free blocks of an exited thread's slab serve the
 * adopter's mallocs (no new page), no block is handed out twice or lost, and
 * the page comes back when its blocks are freed.
 *
 * Usage: test_adopt CASE [SCALE]
 *   reuse  the owner hands out 40 of a 64-byte slab's 63 blocks and exits; a
 *          thread with a cache frees one: the slab is adopted, the thread's
 *          next 24 mallocs of the class come from that page, its frees into it
 *          are its own (no cross-thread free counted), and once every block
 *          is freed and trimmed the page is back
 *   race   several threads with caches free blocks of one abandoned slab at
 *          once: one adopts it, the others' frees join its remote list; after
 *          every thread exits, every block is back (no page left live), and
 *          the blocks handed out meanwhile keep their contents
 * SCALE: percent of the race's rounds (sanitizer builds).
 * Run with JWMALLOC_RECLAIM=0 (exact page counts).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_blocks.h"
#include "jwmalloc.h"
#include "thread_test.h"

#define SZ 64  /* class 3: 63 blocks a slab */
#define CAP 63
#define NB 40 /* blocks the owner hands out: one slab */

static void *blocks[CAP];

static uintptr_t page_of(const void *p) { return (uintptr_t)p & ~(uintptr_t)4095; }

static long pages_live(void) { return (long)st().page_source_live_bytes; }

/* The owner: NB blocks of one fresh slab, then it exits (abandons it). */
static void *owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(SZ, (uint64_t)i + 11);
  for (int i = 1; i < NB; i++)
    if (page_of(blocks[i]) != page_of(blocks[0])) FAIL("owner: block %d is not in the first block's slab", i);
  return NULL;
}

static void *adopter(void *arg) {
  (void)arg;
  jw_free(jw_malloc(24)); /* a thread cache */
  jw_stats a = st();
  uintptr_t pg = page_of(blocks[0]);
  check_and_free(blocks[0]);
  jw_stats b = st();
  CHECK(b.adopted_slabs == a.adopted_slabs + 1, "reuse: the free did not adopt the slab (%llu adoptions)",
        (unsigned long long)(b.adopted_slabs - a.adopted_slabs));
  /* The 23 blocks never handed out and the one just freed: all from that page. */
  long before = pages_live();
  void *mine[CAP - NB + 1];
  for (int i = 0; i < CAP - NB + 1; i++) {
    mine[i] = make(SZ, (uint64_t)i + 100);
    if (page_of(mine[i]) != pg) FAIL("reuse: malloc %d came from %p, not the adopted page", i, mine[i]);
  }
  CHECK(pages_live() == before, "reuse: %ld bytes of new pages for blocks the adopted slab had free",
        pages_live() - before);
  /* The owner's other blocks: frees into an own slab now. */
  jw_stats c = st();
  for (int i = 1; i < NB; i++) check_and_free(blocks[i]);
  for (int i = 0; i < CAP - NB + 1; i++) check_and_free(mine[i]);
  jw_stats d = st();
  CHECK(d.cross_thread_frees == c.cross_thread_frees, "reuse: %llu frees into the adopted slab counted cross-thread",
        (unsigned long long)(d.cross_thread_frees - c.cross_thread_frees));
  jw_malloc_trim(0);
  return NULL;
}

static int case_reuse(void) {
  jw_malloc_trim(0);
  long base = pages_live();
  pthread_t t;
  pthread_create(&t, NULL, owner, NULL);
  pthread_join(t, NULL);
  pthread_create(&t, NULL, adopter, NULL);
  pthread_join(t, NULL);
  jw_malloc_trim(0);
  long after = pages_live() - base;
  CHECK(after <= 0, "reuse: %ld bytes of pages live after every block was freed", after);
  printf("reuse: the adopted slab served %d mallocs from its page; page back\n", CAP - NB + 1);
  return 0;
}

/* race: RACERS threads with caches wait for the owner's exit, then each
 * frees its share of the blocks (the first free of each may adopt) and
 * allocates and frees a few of the class, which may come from the slab. */
#define RACERS 4
static atomic_int go;

static void *racer(void *arg) {
  int id = (int)(intptr_t)arg;
  jw_free(jw_malloc(24)); /* a thread cache */
  for (unsigned round = 0; !atomic_load(&go); test_backoff(&round)) {
  }
  for (int i = id; i < NB; i += RACERS) check_and_free(blocks[i]);
  /* Blocks of the class, maybe from the adopted slab: each keeps its
   * pattern until freed (a block handed out twice would be overwritten). */
  void *p[8];
  uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(id + 1);
  for (int i = 0; i < 8; i++) p[i] = make(SZ, rnd(&seed));
  for (int i = 0; i < 8; i++) check_and_free(p[i]);
  return NULL; /* exit: its slabs are given back or abandoned again */
}

static int case_race(void) {
  long rounds = scaled(200), adopted = 0;
  jw_malloc_trim(0);
  long base = pages_live();
  for (long r = 0; r < rounds; r++) {
    pthread_t t, tr[RACERS];
    atomic_store(&go, 0);
    pthread_create(&t, NULL, owner, NULL);
    for (int i = 0; i < RACERS; i++) pthread_create(&tr[i], NULL, racer, (void *)(intptr_t)i);
    pthread_join(t, NULL);
    jw_stats a = st();
    atomic_store(&go, 1);
    for (int i = 0; i < RACERS; i++) pthread_join(tr[i], NULL);
    adopted += (long)(st().adopted_slabs - a.adopted_slabs);
  }
  jw_malloc_trim(0);
  long after = pages_live() - base;
  CHECK(after <= 0, "race: %ld bytes of pages live after every block was freed and every thread exited", after);
  CHECK(adopted >= rounds, "race: %ld adoptions in %ld rounds (each round's slab is adopted once at least)", adopted,
        rounds);
  printf("race: %ld rounds, %ld adoptions; every page back\n", rounds, adopted);
  return 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"reuse", case_reuse},
      {"race", case_race},
  };
  return TEST_MAIN(cases);
}
