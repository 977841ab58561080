/* Placement switched at run time under load (docs/design/backend.md 7b,
 * "Placement on demand"): worker threads allocate and free blocks of every
 * tier (small slabs, midend blocks, ranges the block cache keeps), a quarter
 * of the frees from another thread, in peak-trough rounds, while a flipper
 * thread switches JWMALLOC_PLACEMENT between 0, 1 and auto and raises the
 * trim epoch, thousands of times. Every block carries a pattern (its
 * address and a per-block serial at both ends) checked when it is freed;
 * run with JWMALLOC_CHECK=1, so the backend checks its trees on every
 * operation and each tier checks a queue before and after converting it
 * (a broken queue stops the process). At the end every block is freed and
 * the whole backend is checked: nothing lost, nothing live.
 *
 * Usage: test_placement_flip [OPS_PER_THREAD]
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "pages/page_source.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"

#define THREADS 4
#define SLOTS 3000
#define MAILBOX 256

typedef struct blk {
  uint64_t *p;
  size_t size;
  uint64_t serial;
} blk;

static atomic_int done;
static atomic_ullong serial_next = 1;
static atomic_ullong checked, cross;

/* Cross-thread frees: a small mutex-guarded box. */
static pthread_mutex_t box_lock = PTHREAD_MUTEX_INITIALIZER;
static blk box[MAILBOX];
static int box_n;

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
  return *s;
}

static size_t pick_size(uint64_t *s) {
  unsigned r = (unsigned)(rnd(s) % 100);
  if (r < 60) return 16 + rnd(s) % 2000;          /* frontend slabs */
  if (r < 85) return 2049 + rnd(s) % (14 * 1024); /* midend */
  return 16384 + rnd(s) % (80 * 1024);            /* ranges (20-64 KiB in the block cache) */
}

static void fill(blk *b) {
  uint64_t tag = (uint64_t)(uintptr_t)b->p ^ (b->serial * 0x9e3779b97f4a7c15ull);
  b->p[0] = tag;
  b->p[b->size / 8 - 1] = ~tag;
  if (b->size >= 4096) b->p[b->size / 16] = tag + 1;
}

static void check_free(blk *b) {
  uint64_t tag = (uint64_t)(uintptr_t)b->p ^ (b->serial * 0x9e3779b97f4a7c15ull);
  CHECK(b->p[0] == tag && b->p[b->size / 8 - 1] == ~tag && (b->size < 4096 || b->p[b->size / 16] == tag + 1),
        "block %p (%zu bytes, serial %llu) changed while live", (void *)b->p, b->size, (unsigned long long)b->serial);
  atomic_fetch_add(&checked, 1);
  jw_free(b->p);
  b->p = NULL;
}

static int alloc_into(blk *b, uint64_t *s) {
  b->size = pick_size(s) & ~(size_t)7;
  b->p = jw_malloc(b->size);
  CHECK(b->p != NULL, "jw_malloc(%zu) failed", b->size);
  if (b->p == NULL) return 0;
  b->serial = atomic_fetch_add(&serial_next, 1);
  fill(b);
  return 1;
}

static void release(blk *b, uint64_t *s) {
  if (rnd(s) % 4 == 0) { /* another thread frees it */
    pthread_mutex_lock(&box_lock);
    if (box_n < MAILBOX) {
      box[box_n++] = *b;
      b->p = NULL;
      atomic_fetch_add(&cross, 1);
    }
    pthread_mutex_unlock(&box_lock);
    if (b->p == NULL) return;
  }
  check_free(b);
}

static void drain_box(void) {
  blk todo[MAILBOX];
  int n;
  pthread_mutex_lock(&box_lock);
  n = box_n;
  memcpy(todo, box, sizeof(blk) * (size_t)n);
  box_n = 0;
  pthread_mutex_unlock(&box_lock);
  for (int i = 0; i < n; i++) check_free(&todo[i]);
}

static long ops_per_thread = 200000;

static void *worker(void *arg) {
  uint64_t s = 0x12345678u + (uint64_t)(uintptr_t)arg * 7919u;
  blk *slot = calloc(SLOTS, sizeof *slot);
  size_t n = 0;
  for (long op = 0; op < ops_per_thread;) {
    /* A round: up to the peak, churn, down to a fifth (the trough), churn. */
    size_t peak = SLOTS / 2 + rnd(&s) % (SLOTS / 2), trough = peak / 5;
    while (n < peak && op < ops_per_thread) n += alloc_into(&slot[n], &s), op++;
    for (int i = 0; i < 5000 && op < ops_per_thread; i++, op++) {
      size_t k = rnd(&s) % n;
      release(&slot[k], &s);
      alloc_into(&slot[k], &s);
    }
    while (n > trough) release(&slot[--n], &s), op++;
    for (int i = 0; i < 5000 && op < ops_per_thread; i++, op++) {
      size_t k = rnd(&s) % n;
      release(&slot[k], &s);
      alloc_into(&slot[k], &s);
    }
    drain_box();
  }
  for (size_t i = 0; i < n; i++) release(&slot[i], &s);
  drain_box();
  free(slot);
  atomic_fetch_add(&done, 1);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc > 1) ops_per_thread = atol(argv[1]);
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)i);
  /* The flipper: 1, 0, auto, 1, 0, ... and a trim request in between. */
  long flips = 0;
  static const long modes[] = {1, 0, 2, 1, 2, 0};
  while (atomic_load(&done) < THREADS) {
    CHECK(jw_option_set("PLACEMENT", modes[flips % 6]) == 0, "jw_option_set PLACEMENT %ld", modes[flips % 6]);
    long got = -1;
    CHECK(jw_option_get("PLACEMENT", &got) == 0 && got == modes[flips % 6], "PLACEMENT reads %ld", got);
    flips++;
    jw_pages_place_trim();
    if (flips % 500 == 0) {
      char err[256];
      CHECK(jw_backend_check_all(err, sizeof err) == 0, "backend check: %s", err);
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
  }
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  drain_box();
  CHECK(jw_option_set("PLACEMENT", 3) != 0, "PLACEMENT 3 accepted");
  jw_malloc_trim(0);
  char err[256];
  CHECK(jw_backend_check_all(err, sizeof err) == 0, "backend check at the end: %s", err);
  printf("placement flip: %ld switches, %llu blocks checked (%llu freed by another thread), %d failures\n", flips,
         (unsigned long long)atomic_load(&checked), (unsigned long long)atomic_load(&cross), test_failures());
  CHECK(flips >= 50, "only %ld switches while the workers ran", flips);
  return test_failures() ? 1 : 0;
}
