/* The lazy park of the refill's common case (docs/design/frontend.md,
 * "Refill"): a used-up current slab goes to the tail of its class's partial
 * queue instead of being parked, and comes back as current once it reaches
 * the head with blocks freed into it. Checked here, in a fresh thread with
 * a class of three blocks per page (1344 bytes), so that every step is a
 * refill:
 *
 *   - a block the owner freed into such a queued slab is handed out again
 *     (the queue finds it), and blocks are never handed out twice;
 *   - another thread's frees into a queued slab, which notify nobody, are
 *     collected by malloc_trim, which gives the emptied page back;
 *   - a random mix of mallocs and frees of several classes keeps every live
 *     block's contents and never hands out a live block.
 *
 * White-box where needed: jw_pages_lookup() tells whether a page is still a
 * slab page. Run with JWMALLOC_RECLAIM=0 and JWMALLOC_PLACEMENT=0 (the
 * common case needs the plain queue; no aging pass in the middle).
 *
 * Usage: test_lazy_park CASE [SCALE]
 *   queue       the three checks above
 *   owner_gone  an owner of used-up slabs (queued unparked on its partial
 *               queue) exits, or idles and then trims, while eight threads
 *               free every block: every page comes back (live bytes); with
 *               reclamation on, and under the sanitizers (SCALE: percent of
 *               the rounds)
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pages/page_source.h"
#include "jwmalloc.h"

#include "range_blocks.h"
#include "thread_test.h"

enum { SIZE = 1300 }; /* class 1344: three blocks per page */

static uintptr_t page(const void *p) { return (uintptr_t)p & ~(uintptr_t)4095; }

static int is_slab_page(uintptr_t pg) {
  jw_range_info info;
  return jw_pages_lookup((void *)pg, &info) && info.kind == JW_KIND_SMALL_SLAB;
}

static void *to_free[3];

static void *remote_freer(void *arg) {
  (void)arg;
  for (int i = 0; i < 3; i++) jw_free(to_free[i]);
  return NULL; /* thread exit pushes any pending chain */
}

static void *owner(void *arg) {
  (void)arg;
  void *x[6];
  for (int i = 0; i < 6; i++) x[i] = jw_malloc(SIZE);
  uintptr_t a = page(x[0]), b = page(x[3]);
  CHECK(page(x[1]) == a && page(x[2]) == a && page(x[4]) == b && page(x[5]) == b && a != b,
        "expected two slabs of three blocks");
  /* x[0]'s slab was parked full when the fourth malloc refilled; the free
   * unparks it into the partial queue. */
  jw_free(x[0]);
  /* The bin is empty, the current slab (b) used up, the queue's head has a
   * local block: the common case. b goes to the queue unparked. */
  void *y = jw_malloc(SIZE);
  CHECK(y == x[0], "the partial head's freed block should be handed out again (%p, want %p)", y, x[0]);
  /* A free into the queued slab b, then a refill: b is the head now. */
  jw_free(x[3]);
  void *z = jw_malloc(SIZE);
  CHECK(z == x[3], "the queued slab's freed block should be handed out again (%p, want %p)", z, x[3]);
  /* Slab a (x[1], x[2], y live) is queued now, not parked: another thread
   * frees all of its blocks; nobody is notified. */
  to_free[0] = x[1];
  to_free[1] = x[2];
  to_free[2] = y;
  pthread_t th;
  if (pthread_create(&th, NULL, remote_freer, NULL) != 0) abort();
  pthread_join(th, NULL);
  CHECK(is_slab_page(a), "a queued slab stays the owner's until it is looked at");
  jw_malloc_trim(0);
  CHECK(!is_slab_page(a), "malloc_trim should collect the queued slab's remote frees and give the page back");
  CHECK(is_slab_page(b), "the slab with live blocks stays");
  jw_free(x[4]);
  jw_free(x[5]);
  jw_free(z);
  return NULL;
}

/* Random replacement over live slots of a few sizes (several blocks per
 * page down to three), every block filled with its slot's tag. */
enum { SLOTS = 600, STEPS = 200000 };

static int is_live(void *const *slot, const void *p) {
  for (int i = 0; i < SLOTS; i++)
    if (slot[i] == p) return 1;
  return 0;
}

static void *churn(void *arg) {
  (void)arg;
  static const size_t sizes[] = {16, 100, 500, 700, 1000, 1300, 2000};
  void *slot[SLOTS] = {0};
  size_t len[SLOTS] = {0};
  unsigned r = 12345;
  for (int step = 0; step < STEPS; step++) {
    r = r * 1103515245u + 12345u;
    int i = (int)((r >> 8) % SLOTS);
    if (slot[i]) {
      unsigned char *p = slot[i];
      for (size_t k = 0; k < len[i]; k++)
        if (p[k] != (unsigned char)i) {
          CHECK(0, "slot %d: block %p changed at byte %zu", i, (void *)p, k);
          break;
        }
      jw_free(p);
      slot[i] = NULL;
    }
    size_t n = sizes[(r >> 20) % (sizeof sizes / sizeof sizes[0])];
    void *p = jw_malloc(n);
    CHECK(p != NULL, "malloc(%zu) failed", n);
    /* Exhaustive only now and then: the scan is the slow part. */
    if ((step & 63) == 0) CHECK(!is_live(slot, p), "step %d: %p handed out while live", step, p);
    memset(p, i, n);
    slot[i] = p;
    len[i] = n;
  }
  for (int i = 0; i < SLOTS; i++) jw_free(slot[i]);
  return NULL;
}

static void run(void *(*fn)(void *)) {
  pthread_t th;
  if (pthread_create(&th, NULL, fn, NULL) != 0) abort();
  pthread_join(th, NULL);
}

static int case_queue(void) {
  run(owner);
  run(churn);
  if (test_failures()) return 1;
  printf("lazy park: queued slabs reused, remote frees into them trimmed, churn clean\n");
  return 0;
}

/* ---- owner_gone: the owner of queued slabs exits or idles ---- */

#define LP_BLOCKS 2000 /* 32-byte blocks: about 16 slabs, most used up and queued unparked */
static void *lp_blocks[LP_BLOCKS];
static atomic_int lp_freed;

static void *lp_owner(void *arg) {
  int stay = (int)(intptr_t)arg;
  for (int i = 0; i < LP_BLOCKS; i++) {
    lp_blocks[i] = jw_malloc(32);
    memset(lp_blocks[i], 0x33, 32);
  }
  set_step(1);
  if (stay) { /* idle until the others freed everything, then trim: collects the queued slabs */
    TEST_WAIT_UNTIL(atomic_load(&lp_freed) >= LP_BLOCKS);
    jw_malloc_trim(0);
  }
  return NULL;
}

static void *lp_freer(void *arg) {
  int id = (int)(intptr_t)arg;
  wait_step(1);
  for (int i = id; i < LP_BLOCKS; i += 8) {
    const unsigned char *c = lp_blocks[i];
    if (c[0] != 0x33 || c[31] != 0x33) FAIL("owner_gone: block %d corrupted", i);
    jw_free(lp_blocks[i]);
    atomic_fetch_add(&lp_freed, 1);
    if ((i & 63) == 0) sched_yield();
  }
  jw_malloc_trim(0); /* pushes this thread's pending chains */
  return NULL;
}

/* The owner of used-up slabs (queued unparked) exits, or idles and trims,
 * while eight threads free every block: every page comes back. */
static int case_owner_gone(void) {
  void *warm = jw_malloc(48);
  long live0 = settled_live();
  for (int round = 0; round < scaled(20); round++) {
    int stay = round & 1;
    set_step(0);
    atomic_store(&lp_freed, 0);
    pthread_t o, f[8];
    pthread_create(&o, NULL, lp_owner, (void *)(intptr_t)stay);
    for (int i = 0; i < 8; i++) pthread_create(&f[i], NULL, lp_freer, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++) pthread_join(f[i], NULL);
    pthread_join(o, NULL);
    long live1 = settle_to(live0);
    CHECK(live1 == live0, "owner_gone round %d (owner %s): %ld live bytes after every block was freed, %ld before",
          round, stay ? "idles and trims" : "exits", live1, live0);
    if (test_failures()) break;
  }
  printf("owner_gone: %ld rounds, every slab page came back\n", scaled(20));
  jw_free(warm);
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"queue", case_queue},
      {"owner_gone", case_owner_gone},
  };
  return TEST_MAIN(cases);
}
