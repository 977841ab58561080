/* The thread's page pool (brief "Frontend"): a slab that becomes empty is
 * kept as a plain page; another size class reformats it without going to the
 * page source (most recently used first); the pool stays under its watermark,
 * proportional to the thread's slab count, by giving back its least recently
 * used pages. A producer whose slabs another thread empties gets them back
 * through its ready stack and keeps them for its next allocations (the
 * watermark of such pages is its recent peak slab count: frontend.md, "The
 * page pool"). White-box where needed: jw_pages_lookup() tells whether a page
 * is still a slab page or went back to the page source. Frees go to their
 * slabs (JWMALLOC_BIN=0), so a slab empties at its last free. Run with
 * JWMALLOC_RECLAIM=0: no aging pass takes the pool lock or resets the peak in
 * the middle of a step. */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pages/page_source.h"
#include "jwmalloc.h"

#include "check.h"

/* The page in force (the 16 KiB test mode too): read after the first
 * allocation started jwmalloc. */
static size_t pg = 4096;
static uintptr_t page(const void *p) { return (uintptr_t)p & ~(uintptr_t)(pg - 1); }

static int is_slab_page(uintptr_t pg) {
  jw_range_info info;
  return jw_pages_lookup((void *)pg, &info) && info.kind == JW_KIND_SMALL_SLAB;
}

/* 48-byte class: PER_SLAB blocks per page (84 at 4 KiB), 100 slabs. */
enum { N_MAX = 100 * ((65536 - 64) / 48) };
static int N, PER_SLAB;

static void *consumer(void *arg) {
  void **a = arg;
  for (int i = 0; i < N; i++) jw_free(a[i]);
  return NULL;
}

int main(void) {
  static void *a[N_MAX];
  jw_stats s0, s1, s2;
  long pct = 0, min = 0;
  /* The steps below follow the order in which slabs empty, so every free
   * goes to its slab (JWMALLOC_BIN=0): the bin's own giving back is
   * jwmalloc.bin's. */
  CHECK(jw_option_set("BIN", 0) == 0, "JWMALLOC_BIN is a run-time option");
  jw_option_get("POOL_PERCENT", &pct);
  jw_option_get("POOL_MIN", &min);
  a[0] = jw_malloc(48);
  long v = 4096;
  if (jw_option_get("PAGE_SIZE", &v) == 0) pg = (size_t)v;
  PER_SLAB = (int)((pg - 64) / 48);
  N = 100 * PER_SLAB;
  for (int i = 1; i < N; i++) a[i] = jw_malloc(48);
  jw_stats_get(&s0, sizeof s0);
  /* Empty the first half of the slabs, slab by slab in address order of
   * allocation: pages are pooled in that order, first emptied = LRU. */
  uintptr_t first_emptied = page(a[0]), last_emptied = page(a[N / 2 - 1]);
  for (int i = 0; i < N / 2; i++) jw_free(a[i]);
  jw_stats_get(&s1, sizeof s1);
  long slabs_left = N / 2 / PER_SLAB + 1;
  long mark = slabs_left * pct / 100 > min ? slabs_left * pct / 100 : min;
  uint64_t evicted = s1.pool_evictions - s0.pool_evictions;
  printf("emptied %d slabs; watermark about %ld pages; %llu pages given back (LRU)\n", N / 2 / PER_SLAB, mark,
         (unsigned long long)evicted);
  CHECK(evicted >= (uint64_t)(N / 2 / PER_SLAB - mark - 2), "pool above its watermark (%llu evicted)",
        (unsigned long long)evicted);
  CHECK(evicted < (uint64_t)(N / 2 / PER_SLAB), "pool kept nothing");
  CHECK(!is_slab_page(first_emptied), "the least recently used page should have gone back to the page source");
  CHECK(is_slab_page(last_emptied), "the most recently used page should still be in the pool");
  /* Another class takes pooled pages: no page-source call, MRU first. */
  void *b[64];
  for (int i = 0; i < 64; i++) b[i] = jw_malloc(500); /* 576-byte class, 7 per 4 KiB page */
  uint64_t pages576 = 64 / ((pg - 64) / 576);
  jw_stats_get(&s2, sizeof s2);
  CHECK(page(b[0]) == last_emptied, "first reformatted page is not the most recently pooled one");
  CHECK(s2.pool_hits - s1.pool_hits >= pages576, "pool hits %llu", (unsigned long long)(s2.pool_hits - s1.pool_hits));
  CHECK(s2.pool_misses == s1.pool_misses, "page-source calls while the pool had pages (%llu)",
        (unsigned long long)(s2.pool_misses - s1.pool_misses));
  CHECK(s2.page_source_live_bytes <= s1.page_source_live_bytes, "page source grew");
  printf("576-byte class: %llu pages reformatted from the pool, %llu from the page source\n",
         (unsigned long long)(s2.pool_hits - s1.pool_hits), (unsigned long long)(s2.pool_misses - s1.pool_misses));
  for (int i = 0; i < 64; i++) jw_free(b[i]);
  for (int i = N / 2; i < N; i++) jw_free(a[i]);
  CHECK(jw_malloc_trim(0) == 1, "trim gives the pool back");
  jw_stats_get(&s2, sizeof s2);
  CHECK(s2.page_source_live_bytes == 0, "after trim, no slab page is left (%llu bytes)",
        (unsigned long long)s2.page_source_live_bytes);

  /* Producer/consumer: another thread frees every block; the producer's
   * parked slabs come back through its ready stack, all empty, and the pool
   * keeps them (up to the 100 slabs it held), so allocating the same again
   * takes every page from the pool. */
  for (int i = 0; i < N; i++) a[i] = jw_malloc(48);
  pthread_t t;
  pthread_create(&t, NULL, consumer, a);
  pthread_join(t, NULL);
  jw_stats_get(&s1, sizeof s1);
  for (int i = 0; i < N; i++) a[i] = jw_malloc(48);
  jw_stats_get(&s2, sizeof s2);
  printf("producer/consumer: %llu of %d slabs came back from the pool, %llu from the page source, %llu pages "
         "evicted\n",
         (unsigned long long)(s2.pool_hits - s1.pool_hits), N / PER_SLAB - 1,
         (unsigned long long)(s2.pool_misses - s1.pool_misses),
         (unsigned long long)(s2.pool_evictions - s1.pool_evictions));
  CHECK(s2.pool_misses == s1.pool_misses, "a producer took %llu pages from the page source",
        (unsigned long long)(s2.pool_misses - s1.pool_misses));
  CHECK(s2.pool_evictions == s1.pool_evictions, "a producer's returned pages were evicted (%llu)",
        (unsigned long long)(s2.pool_evictions - s1.pool_evictions));
  CHECK(s2.pool_hits - s1.pool_hits == (uint64_t)(N / PER_SLAB - 1), "%llu pool hits, want %d",
        (unsigned long long)(s2.pool_hits - s1.pool_hits), N / PER_SLAB - 1);
  for (int i = 0; i < N; i++) jw_free(a[i]);
  CHECK(jw_malloc_trim(0) == 1, "trim gives the pool back");
  if (test_failures()) return 1;
  puts("pool: ok");
  return 0;
}
