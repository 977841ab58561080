/* Ranges of 1-4 MiB and whole 4 MiB roots (docs/design/backend.md 7a, 7c):
 * the root reserve keeps emptied roots for reuse until the reclaimer ages
 * them out, JWMALLOC_RETAIN_ROOTS bounds what stays mapped without
 * reclamation, and a frozen holder of the backend lock leaves them served.
 *
 * Usage: test_large_ranges CASE [SCALE]
 *   reserve      threads that empty whole roots (3 MiB and 4 MiB ranges) and
 *                others that take ranges at once, with the reclaimer aging
 *                the reserve every 1 ms: no range handed out twice (contents),
 *                live bytes back to the start, and the reclaimer eventually
 *                gives every free root back (mapped roots fall to what the
 *                test holds)
 *   retain       (JWMALLOC_RECLAIM=0) six roots emptied, five rounds: free
 *                roots beyond JWMALLOC_RETAIN_ROOTS=1 are unmapped, root
 *                reserve or not
 *   lock_frozen  (the test-hook build) the backend lock held for good by a
 *                frozen thread while eight threads allocate and free whole
 *                roots, 1-3 MiB and cached ranges at every alignment, then
 *                double frees of each size: contents intact, every double
 *                free reported once, and after the holder goes on everything
 *                deferred is filed (live bytes back to the start)
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
#ifdef JW_TEST_HOOKS
#include "lock_freezer.h"
#endif

/* ---- reserve: emptied roots reused and aged ---- */

#define RT 10
static void *root_emptier(void *arg) {
  uint64_t s = 0x7777ull * (uint64_t)((intptr_t)arg + 3);
  long ops = scaled(600);
  for (long op = 0; op < ops; op++) {
    uint64_t r = rnd(&s);
    blk b = {NULL, r & 1 ? 4u << 20 : 3u << 20, (uint8_t)r};
    b.p = jw_malloc(b.n);
    if (!b.p) {
      FAIL("reserve: malloc failed");
      return NULL;
    }
    fill(&b);
    blk c = {jw_malloc(cached_class(r >> 8)), cached_class(r >> 8), (uint8_t)(r >> 16)};
    fill(&c);
    sched_yield();
    if (!intact(&b) || !intact(&c)) FAIL("reserve: a range handed out twice (contents changed)");
    jw_free(b.p);
    jw_free(c.p);
  }
  return NULL;
}

static int case_reserve(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  pthread_t t[RT];
  for (int i = 0; i < RT; i++) pthread_create(&t[i], NULL, root_emptier, (void *)(intptr_t)i);
  for (int i = 0; i < RT; i++) pthread_join(t[i], NULL);
  long live1 = settle_to(live0);
  CHECK(live1 == live0, "reserve: %ld live bytes after everything was freed, %ld before", live1, live0);
  /* The reclaimer gives the emptied roots back (reserve included) in time. */
  double t0 = test_now_s();
  uint64_t roots = 0;
  while (test_now_s() - t0 < HANG) {
    jw_malloc_trim(0);
    roots = st().backend_root_bytes;
    if (roots <= (4u << 20) * 2) break;
    usleep(20000);
  }
  CHECK(roots <= (4u << 20) * 2, "reserve: %llu MiB of roots still mapped with nothing live",
        (unsigned long long)(roots >> 20));
  printf("reserve: %d threads emptied roots; %llu roots reused from the reserve, %llu MiB mapped at the end\n", RT,
         (unsigned long long)st().backend_roots_reused, (unsigned long long)(roots >> 20));
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- retain: free roots beyond JWMALLOC_RETAIN_ROOTS ---- */

/* JWMALLOC_RECLAIM=0: "an entirely free root beyond JWMALLOC_RETAIN_ROOTS is
 * unmapped at once" (README), root reserve or not. */
static int case_retain(void) {
  void *warm = jw_malloc(48);
  jw_malloc_trim(0);
  uint64_t r0 = st().backend_root_bytes;
  for (int round = 0; round < 5; round++) {
    void *m[6];
    for (int i = 0; i < 6; i++) m[i] = jw_malloc((3u << 20) + 4096);
    for (int i = 0; i < 6; i++) jw_free(m[i]);
    jw_malloc_trim(0);
    uint64_t r1 = st().backend_root_bytes;
    CHECK(r1 <= r0 + (4u << 20), "retain: %llu MiB of roots mapped after freeing 6 roots' ranges, %llu before",
          (unsigned long long)(r1 >> 20), (unsigned long long)(r0 >> 20));
  }
  printf("retain: free roots beyond JWMALLOC_RETAIN_ROOTS=1 unmapped\n");
  jw_free(warm);
  return test_failures() != 0;
}

/* ---- lock_frozen: the backend lock held for good ---- */

#ifdef JW_TEST_HOOKS
#define FT 8
static void *frozen_holder(void *arg) {
  (void)arg;
  may_freeze = 1;
  jw_free(jw_malloc((size_t)2 << 20)); /* frozen in the allocation, holding the backend lock */
  return NULL;
}

/* With the backend lock held for good: whole roots, 1-3 MiB ranges and
 * cached ranges allocated (the reserve, bitmaps, lock-free splits, deferred
 * reuse, roots mapped without the lock) and freed (bitmaps, the reserve,
 * the deferred list). */
static void *frozen_worker(void *arg) {
  uint64_t s = 0x1234567ull * (uint64_t)((intptr_t)arg + 11);
  static const size_t sz[] = {4u << 20, 3u << 20, 2u << 20, 1u << 20, 300000, (4u << 20) - 4096};
  blk keep[4] = {{0}};
  for (long op = 0; op < scaled(300); op++) {
    uint64_t r = rnd(&s);
    int k = (int)(r % 4);
    if (keep[k].p) {
      if (!intact(&keep[k])) FAIL("lock_frozen: range %p of %zu bytes corrupted", keep[k].p, keep[k].n);
      jw_free(keep[k].p);
    }
    keep[k].n = sz[(r >> 8) % 6];
    keep[k].p = (r >> 16) & 1 ? jw_malloc(keep[k].n) : jw_memalign((size_t)1 << (12 + (r >> 20) % 11), keep[k].n);
    keep[k].seed = (uint8_t)(r >> 32);
    if (keep[k].p == NULL) {
      FAIL("lock_frozen: allocation of %zu failed", keep[k].n);
      continue;
    }
    fill(&keep[k]);
  }
  for (int k = 0; k < 4; k++) {
    if (keep[k].p && !intact(&keep[k])) FAIL("lock_frozen: range corrupted at the end");
    jw_free(keep[k].p);
  }
  return NULL;
}

static int case_lock_frozen(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  /* Emptied roots into the reserve. */
  void *r[4];
  for (int i = 0; i < 4; i++) r[i] = jw_malloc(4u << 20);
  for (int i = 0; i < 4; i++) jw_free(r[i]);
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  pthread_t h, w[FT];
  pthread_create(&h, NULL, frozen_holder, NULL);
  double t0 = test_now_s();
  while (!atomic_load(&frozen) && test_now_s() - t0 < HANG) usleep(1000);
  CHECK(atomic_load(&frozen), "lock_frozen: the holder never took the backend lock");
  jw_stats a = st();
  for (int i = 0; i < FT; i++) pthread_create(&w[i], NULL, frozen_worker, (void *)(intptr_t)i);
  for (int i = 0; i < FT; i++) pthread_join(w[i], NULL);
  /* Double frees, the lock still held (after the workers: a range freed
   * into a bitmap may be taken again at once by another thread, and its
   * second free would then be that thread's valid one). */
  static const size_t dsz[] = {4u << 20, 3u << 20, 2u << 20, 1u << 20, 300000, 90000};
  int ndbl = 0;
  for (unsigned i = 0; i < sizeof dsz / sizeof *dsz; i++, ndbl++) {
    void *d = jw_malloc(dsz[i]);
    jw_free(d);
    jw_free(d);
  }
  jw_stats b = st();
  atomic_store(&release_holder, 1);
  pthread_join(h, NULL);
  jw_test_set_lock_hook(NULL);
  long live1 = settle_to(live0);
  CHECK(b.invalid_frees - a.invalid_frees == (uint64_t)ndbl, "lock_frozen: %llu double frees reported, %d made",
        (unsigned long long)(b.invalid_frees - a.invalid_frees), ndbl);
  CHECK(live1 == live0, "lock_frozen: %ld live bytes after everything was freed, %ld before", live1, live0);
  printf("lock_frozen: lock held for good; %llu roots reused from the reserve, %llu mapped without the lock, %llu "
         "deferred frees reused\n",
         (unsigned long long)(b.backend_roots_reused - a.backend_roots_reused),
         (unsigned long long)(b.backend_lf_roots - a.backend_lf_roots),
         (unsigned long long)(b.backend_lf_recycled - a.backend_lf_recycled));
  jw_free(warm);
  return test_failures() != 0;
}
#endif

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"reserve", case_reserve},
      {"retain", case_retain},
#ifdef JW_TEST_HOOKS
      {"lock_frozen", case_lock_frozen},
#endif
  };
  return TEST_MAIN(cases);
}
