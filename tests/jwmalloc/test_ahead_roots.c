/* Roots mapped ahead (docs/design/backend.md 7a, "Roots mapped ahead";
 * JWMALLOC_AHEAD_ROOTS): an allocation that finds the backend lock held and
 * nothing to reuse (step 5) takes a root the reclaim thread mapped, and
 * calls no mmap itself.
 *
 * A thread is frozen holding the backend lock (test hook); the main thread
 * then allocates 3 MiB blocks, each from a fresh root without the lock. The
 * test counts the mmap calls made by the main thread itself (this program
 * defines mmap, which the statically linked library calls) during each of
 * them, after a warm-up allocation and a wait until the reclaim thread has
 * refilled the set: a steady run.
 *   test_ahead_roots ahead  (JWMALLOC_AHEAD_ROOTS=2, set by CTest): every
 *     block comes from a root mapped ahead (backend_ahead_taken), with no
 *     mmap on the caller's path; the set is counted in backend_ahead_bytes
 *     and in the released (mapped, untouched) bytes; once unused, the
 *     reclaim cycles give it back.
 *   test_ahead_roots off    (JWMALLOC_AHEAD_ROOTS=0): the control; every
 *     block's root is mapped by the caller (so the count above can fail).
 * The reclaim thread runs with a long interval (CTest): it only fills the
 * set when woken, and runs no cycle that would wait for the frozen lock.
 * Every wait sleeps and is bounded by the alarm, a hang bound.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/lock.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"
#include "raw_mmap.h"
#include "lock_freezer.h"

#define ROOT ((uint64_t)4 << 20)
#define BLOCK ((size_t)3 << 20)
#define NBLOCK 8

/* mmap calls made by the calling thread (the library's, linked in). */
static __thread unsigned long my_mmaps;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  my_mmaps++;
  return jw_raw_mmap(addr, len, prot, flags, fd, off); /* MAP_FAILED is -1 as the raw call returns; errno set by syscall() */
}

static jw_stats st(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

/* Waits (sleeping) until the reclaim thread holds `want` roots ready. */
static void wait_ready(uint64_t want) {
  while (st().backend_ahead_bytes != want * ROOT) usleep(1000);
}

int main(int argc, char **argv) {
  int ahead = argc > 1 && strcmp(argv[1], "ahead") == 0;
  if (argc != 2 || (!ahead && strcmp(argv[1], "off") != 0)) {
    fprintf(stderr, "usage: test_ahead_roots ahead|off\n");
    return 2;
  }
  alarm(60); /* a hang bound, not a timing check */
  /* Start the reclaim thread (a free starts it lazily). */
  for (int i = 0; i < 64; i++) jw_free(jw_malloc(4096));
  jw_reclaim_stats r;
  for (jw_reclaim_get_stats(&r); r.thread_starts == 0; jw_reclaim_get_stats(&r)) {
    jw_free(jw_malloc(1 << 20));
    usleep(1000);
  }
  freeze_kind = JW_LK_BACKEND;
  jw_test_set_lock_hook(freeze_hook);
  pthread_t h;
  CHECK(pthread_create(&h, NULL, freeze_backend_holder, NULL) == 0, "pthread_create");
  while (!atomic_load(&frozen)) usleep(1000);
  /* Warm-up: the first step-5 root finds the set empty (maps it here when
   * nothing was ever asked for) and wakes the reclaim thread. */
  void *warm = jw_malloc(BLOCK);
  CHECK(warm != NULL, "warm-up block with the lock frozen");
  uint64_t want = ahead ? 2 : 0;
  wait_ready(want);
  jw_stats a = st();
  CHECK(a.backend_ahead_bytes == want * ROOT && a.backend_released_bytes >= a.backend_ahead_bytes,
        "ahead %llu bytes, released %llu: the set is not counted", (unsigned long long)a.backend_ahead_bytes,
        (unsigned long long)a.backend_released_bytes);
  void *big[NBLOCK];
  unsigned long caller_maps = 0;
  for (int i = 0; i < NBLOCK; i++) {
    unsigned long m0 = my_mmaps;
    big[i] = jw_malloc(BLOCK);
    caller_maps += my_mmaps - m0;
    CHECK(big[i] != NULL, "3 MiB block %d with the lock frozen", i);
    memset(big[i], 0x5a, BLOCK);
    wait_ready(want); /* steady: the thread refills before the next one */
  }
  jw_stats b = st();
  uint64_t lf = b.backend_lf_roots - a.backend_lf_roots, taken = b.backend_ahead_taken - a.backend_ahead_taken;
  printf("ahead roots (%s): %d blocks with the lock frozen: %llu roots without the lock, %llu of them mapped "
         "ahead; %lu mmap calls on the caller's path; %llu KiB held ahead\n",
         argv[1], NBLOCK, (unsigned long long)lf, (unsigned long long)taken, caller_maps,
         (unsigned long long)(b.backend_ahead_bytes >> 10));
  CHECK(lf >= NBLOCK, "only %llu roots mapped without the lock: the case does not reach step 5",
        (unsigned long long)lf);
  if (ahead) {
    CHECK(taken == lf, "%llu of %llu step-5 roots mapped ahead", (unsigned long long)taken, (unsigned long long)lf);
    CHECK(caller_maps == 0, "%lu mmap calls on the caller's path with roots mapped ahead", caller_maps);
  } else {
    CHECK(taken == 0 && b.backend_ahead_bytes == 0, "roots mapped ahead with JWMALLOC_AHEAD_ROOTS=0");
    CHECK(caller_maps >= NBLOCK, "%lu mmap calls for %d fresh roots mapped by the caller", caller_maps, NBLOCK);
  }
  atomic_store(&release_holder, 1);
  pthread_join(h, NULL);
  jw_test_set_lock_hook(NULL);
  for (int i = 0; i < NBLOCK; i++) jw_free(big[i]);
  jw_free(warm);
  /* Unused now: each cycle gives one back (two cycles: the first may still
   * see the demand of the last take). */
  for (int i = 0; i < 8 && st().backend_ahead_bytes != 0; i++) jw_reclaim_cycle();
  CHECK(st().backend_ahead_bytes == 0, "%llu bytes still mapped ahead after 8 cycles without demand",
        (unsigned long long)st().backend_ahead_bytes);
  return test_failures() ? 1 : 0;
}
