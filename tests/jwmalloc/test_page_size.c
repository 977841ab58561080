/* The page in force (docs/design/architecture.md, "Page size at run time"):
 * jw_option_get("PAGE_SIZE") reads the kernel's page, or JWMALLOC_PAGE_SIZE
 * when the test mode sets a larger one, and what follows the page really
 * does: valloc and pvalloc blocks are aligned to it (pvalloc's size rounded
 * up to it), and a direct mapping (over 4 MiB) starts on it and is a whole
 * number of pages. Slabs and granules are pages: every small block lies at
 * 64 + i x size from a page boundary with i below the page's block count
 * (a slab is one page, its header first), and every range (a block of
 * 16 KiB-4 MiB) starts on a page. Run without the variable (the kernel's
 * page) and with JWMALLOC_PAGE_SIZE=16384 (label page16k). */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "jwmalloc.h"

static int failures;
#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), failures++)

/* Small blocks of class `size` (a class size: 16 x k, k blocks per slab
 * fitting 64 + k x size <= page) sit where a one-page slab puts them. */
static void small_blocks_in_page_slabs(size_t size, long page) {
  enum { N = 3000 };
  static void *p[N];
  size_t per = ((size_t)page - 64) / size, off;
  for (int i = 0; i < N; i++) {
    p[i] = malloc(size);
    if (p[i] == NULL) {
      FAIL("malloc(%zu) failed", size);
      break;
    }
    off = (uintptr_t)p[i] & ((uintptr_t)page - 1);
    if (off < 64 || (off - 64) % size != 0 || (off - 64) / size >= per) {
      FAIL("malloc(%zu) = %p: offset %zu in its %ld-byte page is no block of a one-page slab", size, p[i], off, page);
      break;
    }
  }
  for (int i = 0; i < N; i++) free(p[i]);
}

/* Ranges start on a page (a granule is one page). */
static void ranges_on_pages(long page) {
  enum { N = 64 };
  void *p[N];
  for (int i = 0; i < N; i++) {
    size_t n = 20000 + (size_t)i * 7000; /* 20-460 KiB: ranges, never direct mappings */
    p[i] = malloc(n);
    if (p[i] == NULL || ((uintptr_t)p[i] & ((uintptr_t)page - 1)) != 0)
      FAIL("malloc(%zu) = %p: a range not on a %ld-byte page", n, p[i], page);
  }
  for (int i = 0; i < N; i++) free(p[i]);
}

int main(void) {
  free(malloc(1)); /* jwmalloc starts: the page is set */
  const char *env = getenv("JWMALLOC_PAGE_SIZE");
  long want = env ? atol(env) : sysconf(_SC_PAGESIZE), page = 0;
  if (jw_option_get("PAGE_SIZE", &page) != 0 || page != want) FAIL("page in force %ld, want %ld", page, want);
  if (page <= 0) return 1;
  uintptr_t m = (uintptr_t)page - 1;
  for (size_t n = 1; n <= (size_t)3 * page; n += (size_t)page / 3) {
    void *v = valloc(n), *p = pvalloc(n);
    if (v == NULL || ((uintptr_t)v & m) != 0) FAIL("valloc(%zu) = %p: not on a %ld-byte page", n, v, page);
    if (p == NULL || ((uintptr_t)p & m) != 0) FAIL("pvalloc(%zu) = %p: not on a %ld-byte page", n, p, page);
    if (p && malloc_usable_size(p) < ((n + m) & ~m)) FAIL("pvalloc(%zu): %zu usable bytes, less than whole pages", n, malloc_usable_size(p));
    free(v);
    free(p);
  }
  size_t big = ((size_t)5 << 20) + 1;
  char *h = malloc(big);
  if (h == NULL || ((uintptr_t)h & m) != 0) FAIL("malloc(%zu) = %p: not on a %ld-byte page", big, (void *)h, page);
  if (h && malloc_usable_size(h) % (size_t)page != 0) FAIL("malloc(%zu): %zu usable bytes, not whole pages", big, malloc_usable_size(h));
  free(h);
  /* 2016: 2 blocks a 4 KiB slab, 8 a 16 KiB one; 336: 12 and 48; 16. */
  small_blocks_in_page_slabs(2016, page);
  small_blocks_in_page_slabs(336, page);
  small_blocks_in_page_slabs(16, page);
  ranges_on_pages(page);
  if (jw_option_set("PAGE_SIZE", page) == 0) FAIL("jw_option_set(PAGE_SIZE) taken after start-up");
  if (failures == 0) printf("page_size: %ld-byte page: slabs, ranges, valloc, pvalloc, direct mappings follow it\n", page);
  return failures != 0;
}
