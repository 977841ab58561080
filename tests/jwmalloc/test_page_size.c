/* The page in force (docs/design/architecture.md, "Page size at run time"):
 * jw_option_get("PAGE_SIZE") reads the kernel's page, or JWMALLOC_PAGE_SIZE
 * when the test mode sets a larger one, and what follows the page really
 * does: valloc and pvalloc blocks are aligned to it (pvalloc's size rounded
 * up to it), and a direct mapping (over 4 MiB) starts on it and is a whole
 * number of pages. Run without the variable (the kernel's page) and with
 * JWMALLOC_PAGE_SIZE=16384 (label page16k). */
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "jwmalloc.h"

static int failures;
#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), failures++)

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
  if (jw_option_set("PAGE_SIZE", page) == 0) FAIL("jw_option_set(PAGE_SIZE) taken after start-up");
  if (failures == 0) printf("page_size: %ld-byte page: valloc, pvalloc, direct mappings follow it\n", page);
  return failures != 0;
}
