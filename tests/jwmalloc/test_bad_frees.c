/* Bad frees (JWMALLOC_ABORT_ON_ERROR off): double frees and frees of
 * blocks never handed out, where the allocator keeps freed memory for reuse
 * (docs/design/frontend.md "Bad input"). Each is reported once
 * (invalid_frees), changes nothing (the next mallocs get distinct blocks),
 * and valid frees of the same shapes are never reported.
 *
 * Usage: test_bad_frees CASE [SCALE]
 *   pooled_pages    frees into pooled pages, into reused pages' blocks still
 *                   in their bin, into a page adopted from an exited thread;
 *                   reused pages hand out each block once
 *   abandoned_chain a block on a pending chain of cross-thread frees freed
 *                   again after its slab's owner exited: reported once, the
 *                   abandoned slab's count not lowered by it (the other
 *                   blocks' frees are valid, none reported), and the page
 *                   comes back after the last block
 *   cached_ranges   double frees of the block cache's 80 KiB-1 MiB ranges
 *                   through every path: free twice, realloc of a freed range,
 *                   free from another thread of a range this thread cached,
 *                   free twice of an aligned_alloc / posix_memalign range
 *                   (cached and over-aligned)
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checked_blocks.h"
#include "jwmalloc.h"
#include "owner_consumer.h"
#include "thread_test.h"

/* ---- pooled_pages: bad frees into pooled and reused pages ---- */

/* Allocates `n` blocks of `size` into v; returns how many share s's page. */
static int in_page(void **v, int n, uintptr_t page) {
  int k = 0;
  for (int i = 0; i < n; i++) k += ((uintptr_t)v[i] & ~(uintptr_t)4095) == page;
  return k;
}

#define PSIZE 48
#define PCAP (4032 / PSIZE) /* 84 blocks a slab */
#define PN (PCAP * 6)
static void *pv[PN];

static void *fill_and_exit(void *arg) {
  void **out = arg;
  for (int i = 0; i < PCAP; i++) out[i] = jw_malloc(PSIZE);
  return NULL;
}

static int case_pooled_pages(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  jw_option_set("RECLAIM", 0); /* nothing ages the pool under the test */
  /* Every free to its slab, so that the page empties at its last free (with
   * the bin, frontend.md "The bin", it empties when the bin gives it back). */
  CHECK(jw_option_set("BIN", 0) == 0, "pooled_pages: JWMALLOC_BIN is a run-time option");
  for (int i = 0; i < PN; i++) pv[i] = jw_malloc(PSIZE);
  CHECK(distinct(pv, PN, PSIZE), "pooled_pages: first blocks");
  /* Empty the page of block 0 (a full, parked slab): it goes to the pool. */
  uintptr_t page = (uintptr_t)pv[0] & ~(uintptr_t)4095;
  int k = in_page(pv, PN, page);
  CHECK(k == PCAP, "pooled_pages: %d blocks in the first page, want %d", k, PCAP);
  void *victim = NULL;
  for (int i = 0; i < PN; i++)
    if (((uintptr_t)pv[i] & ~(uintptr_t)4095) == page) {
      victim = pv[i];
      jw_free(pv[i]);
      pv[i] = NULL;
    }
  /* A free into the pooled page: reported, nothing changes. */
  jw_stats a = st();
  jw_free(victim);
  jw_free((char *)page + 64 + 5 * PSIZE);
  jw_stats b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 2, "pooled_pages: frees into a pooled page not reported (%llu)",
        (unsigned long long)(b.invalid_frees - a.invalid_frees));
  /* The class refills from the pool: the page comes back with its list. */
  void *w[PCAP * 2];
  for (int i = 0; i < PCAP * 2; i++) w[i] = jw_malloc(PSIZE);
  jw_stats c = st();
  CHECK(c.pool_hits > b.pool_hits, "pooled_pages: the pooled page was not reused");
  CHECK(in_page(w, PCAP * 2, page) == PCAP, "pooled_pages: the reused page handed out %d blocks, want %d",
        in_page(w, PCAP * 2, page), PCAP);
  void *all[PN + PCAP * 2];
  int n = 0;
  for (int i = 0; i < PN; i++)
    if (pv[i]) all[n++] = pv[i];
  for (int i = 0; i < PCAP * 2; i++) all[n++] = w[i];
  CHECK(distinct(all, (size_t)n, PSIZE), "pooled_pages: after reuse");
  for (int i = 0; i < PCAP * 2; i++) jw_free(w[i]);

  /* A free of a block still in the bin of a reused page (never handed
   * out): reported, and the block is not handed out twice. Empty a page,
   * take it back with few blocks handed out, free one that was not. */
  for (int i = 0; i < PN; i++)
    if (pv[i]) jw_free(pv[i]), pv[i] = NULL;
  jw_malloc_trim(0); /* pages to the backend: a clean start */
  for (int i = 0; i < PN; i++) pv[i] = jw_malloc(PSIZE);
  page = (uintptr_t)pv[0] & ~(uintptr_t)4095;
  for (int i = 0; i < PN; i++)
    if (((uintptr_t)pv[i] & ~(uintptr_t)4095) == page) jw_free(pv[i]), pv[i] = NULL;
  void *x[4];
  for (int i = 0; i < 4; i++) x[i] = jw_malloc(PSIZE);
  int xk = in_page(x, 4, page);
  if (xk == 4) { /* it came back (pool hit): three of its blocks are still in the bin */
    void *notyet = NULL;
    for (int j = 0; j < PCAP && notyet == NULL; j++) {
      void *cand = (char *)page + 64 + (size_t)j * PSIZE;
      int used = 0;
      for (int i = 0; i < 4; i++) used |= x[i] == cand;
      if (!used) notyet = cand;
    }
    a = st();
    jw_free(notyet);
    b = st();
    CHECK(b.invalid_frees == a.invalid_frees + 1, "pooled_pages: a free of a never handed-out block of a reused page "
          "was accepted");
    void *y[PCAP];
    for (int i = 0; i < PCAP; i++) y[i] = jw_malloc(PSIZE);
    void *z[PCAP + 4];
    memcpy(z, x, sizeof x);
    memcpy(z + 4, y, sizeof y);
    CHECK(distinct(z, PCAP + 4, PSIZE), "pooled_pages: after a bad free in a reused page");
    for (int i = 0; i < PCAP; i++) jw_free(y[i]);
  } else {
    FAIL("pooled_pages: the emptied page was not taken back from the pool (%d of 4 blocks there)", xk);
  }
  for (int i = 0; i < 4; i++) jw_free(x[i]);
  for (int i = 0; i < PN; i++)
    if (pv[i]) jw_free(pv[i]), pv[i] = NULL;

  /* A page adopted from an abandoned slab is formatted again: a thread
   * fills a slab and exits, this thread frees every block (the last free
   * adopts the page into this thread's pool), then allocates the class. */
  jw_malloc_trim(0);
  void *t_out[PCAP];
  pthread_t t;
  pthread_create(&t, NULL, fill_and_exit, t_out);
  pthread_join(t, NULL);
  uintptr_t apage = (uintptr_t)t_out[0] & ~(uintptr_t)4095;
  CHECK(in_page(t_out, PCAP, apage) == PCAP, "pooled_pages: the thread's blocks span pages");
  for (int i = 0; i < PCAP; i++) jw_free(t_out[i]);
  a = st();
  jw_free(t_out[3]); /* the adopted page is pooled: reported */
  b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "pooled_pages: a free into an adopted pooled page not reported");
  void *u[PCAP * 2];
  for (int i = 0; i < PCAP * 2; i++) u[i] = jw_malloc(PSIZE);
  CHECK(distinct(u, PCAP * 2, PSIZE), "pooled_pages: after adoption");
  CHECK(in_page(u, PCAP * 2, apage) == 0 || in_page(u, PCAP * 2, apage) == PCAP,
        "pooled_pages: the adopted page handed out %d blocks", in_page(u, PCAP * 2, apage));
  for (int i = 0; i < PCAP * 2; i++) jw_free(u[i]);
  jw_option_set("ABORT_ON_ERROR", 1);
  jw_option_set("RECLAIM", 1);
  printf("pooled_pages: bad frees into pooled and reused pages reported; reused pages hand out each block once\n");
  return 0;
}

/* ---- abandoned_chain: a chained block freed again after its owner exited ---- */

static void *exiting_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < NB; i++) blocks[i] = make(BSIZE, (uint64_t)i + 5);
  set_step(1);
  wait_step(2);
  return NULL; /* exits: its slab is abandoned with every block out */
}

static void *dbl_consumer(void *arg) {
  (void)arg;
  wait_step(1);
  for (int i = 0; i < 10; i++) check_and_free(blocks[i]); /* a chain of 10, pending */
  set_step(2);
  wait_step(3);
  jw_free(blocks[3]); /* again: on our own pending chain, owner gone */
  set_step(4);
  wait_step(5);
  for (int i = 10; i < NB; i++) check_and_free(blocks[i]);
  return NULL; /* its exit pushes the chain: the slab's last blocks */
}

static int case_abandoned_chain(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  jw_malloc_trim(0);
  long before = pages_live();
  jw_stats a = st();
  pthread_t to, tc;
  start_step_pair(&to, exiting_owner, &tc, dbl_consumer);
  pthread_join(to, NULL);
  set_step(3);
  wait_step(4);
  jw_free(blocks[5]); /* and from a third thread */
  jw_stats m = st();
  CHECK(m.invalid_frees == a.invalid_frees + 2, "abandoned_chain: %llu of 2 double frees of chained blocks reported",
        (unsigned long long)(m.invalid_frees - a.invalid_frees));
  set_step(5);
  pthread_join(tc, NULL);
  jw_malloc_trim(0);
  jw_stats e = st();
  CHECK(e.invalid_frees == m.invalid_frees, "abandoned_chain: %llu valid frees reported as bad after the double frees",
        (unsigned long long)(e.invalid_frees - m.invalid_frees));
  CHECK(e.abandoned_slabs >= a.abandoned_slabs + 1, "abandoned_chain: the owner's slab was not abandoned");
  CHECK((long)e.page_source_live_bytes <= before, "abandoned_chain: %ld bytes live after every block was freed",
        (long)e.page_source_live_bytes - before);
  jw_option_set("ABORT_ON_ERROR", 1);
  if (!test_failures())
    printf("abandoned_chain: double frees of a chained block of an abandoned slab reported, page back\n");
  return test_failures() ? 1 : 0;
}

/* ---- cached_ranges: double frees of cached ranges ---- */

static void *victim;
static void *free_victim(void *arg) {
  (void)arg;
  jw_free(victim);
  return NULL;
}

/* One double free of p through `how`: reported once, nothing else. */
static void expect_reported(const char *what, void (*how)(void *), void *p) {
  uint64_t inv0 = st().invalid_frees;
  how(p);
  uint64_t inv1 = st().invalid_frees;
  CHECK(inv1 == inv0 + 1, "cached_ranges: %s: %llu reports", what, (unsigned long long)(inv1 - inv0));
}
static void do_free(void *p) { jw_free(p); }
static void do_realloc(void *p) {
  errno = 0;
  void *q = jw_realloc(p, 300000);
  CHECK(q == NULL && errno == EINVAL, "cached_ranges: realloc of a freed range returned %p (errno %d)", q, errno);
}
static void do_realloc0(void *p) { jw_realloc(p, 0); }
static void do_remote_free(void *p) {
  victim = p;
  pthread_t t;
  pthread_create(&t, NULL, free_victim, NULL);
  pthread_join(t, NULL);
}

/* After a reported double free of a range of n bytes, three mallocs of its
 * class get distinct ranges (the cached one at most once). */
static void distinct_after(const char *what, size_t n) {
  void *a = jw_malloc(n), *b = jw_malloc(n), *c = jw_malloc(n);
  CHECK(a && b && c && a != b && b != c && a != c, "cached_ranges: %s: the same range handed out twice (%p %p %p)",
        what, a,
        b, c);
  jw_free(a);
  jw_free(b);
  jw_free(c);
}

static void *alloc_plain(size_t n) { return jw_malloc(n); }
static void *alloc_aligned(size_t n) { return jw_aligned_alloc(4096, n); }
static void *alloc_memalign64k(size_t n) { /* over-aligned: interior records unless the start is aligned */
  void *q = NULL;
  return jw_posix_memalign(&q, 65536, n - 65536) == 0 ? q : NULL;
}

/* A range allocated one way, freed, then released again another way. */
static const struct {
  const char *what;
  void *(*alloc)(size_t);
  void (*again)(void *);
} dbl_ways[] = {
    {"free twice", alloc_plain, do_free},
    {"realloc after free", alloc_plain, do_realloc},
    {"realloc(p, 0) after free", alloc_plain, do_realloc0},
    {"another thread frees a cached range", alloc_plain, do_remote_free},
    {"aligned_alloc(4096) freed twice", alloc_aligned, do_free},
    {"posix_memalign(64 KiB) freed twice", alloc_memalign64k, do_free},
};

static int case_cached_ranges(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  static const size_t sizes[] = {81920, 200000, 500000, 1 << 20};
  for (unsigned s = 0; s < sizeof sizes / sizeof *sizes; s++) {
    size_t n = sizes[s];
    for (unsigned k = 0; k < sizeof dbl_ways / sizeof *dbl_ways; k++) {
      void *p = dbl_ways[k].alloc(n);
      CHECK(p != NULL, "cached_ranges: %s: allocation of %zu failed", dbl_ways[k].what, n);
      jw_free(p);
      expect_reported(dbl_ways[k].what, dbl_ways[k].again, p);
      distinct_after(dbl_ways[k].what, n);
    }
    /* realloc moving a cached-class range, then the old pointer freed. */
    void *p = jw_malloc(n), *q = jw_realloc(p, n * 3);
    CHECK(q != NULL, "realloc grow failed");
    if (q != p) expect_reported("free of a range realloc moved", do_free, p);
    jw_free(q);
    distinct_after("free of a range realloc moved", n);
  }
  /* Valid frees of the same shapes: none reported. */
  uint64_t inv0 = st().invalid_frees;
  for (int r = 0; r < 200; r++) {
    size_t n = sizes[r % 4];
    void *p = jw_malloc(n), *q = jw_aligned_alloc(4096, n), *m = NULL;
    jw_posix_memalign(&m, 8192, n);
    p = jw_realloc(p, n / 2 + 4096);
    victim = q;
    pthread_t t;
    pthread_create(&t, NULL, free_victim, NULL);
    pthread_join(t, NULL);
    jw_free(m);
    jw_free(p);
  }
  uint64_t inv1 = st().invalid_frees;
  CHECK(inv1 == inv0, "cached_ranges: %llu valid frees reported", (unsigned long long)(inv1 - inv0));
  printf("cached_ranges: every double free of a cached range reported once\n");
  return test_failures() != 0;
}

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"pooled_pages", case_pooled_pages},
      {"abandoned_chain", case_abandoned_chain},
      {"cached_ranges", case_cached_ranges},
  };
  return TEST_MAIN(cases);
}
