/* glibc's other names for the malloc family, linked to libjwmalloc.so: a
 * block from any of them goes back through any other (a __libc_malloc'd
 * block to free, a malloc'd block to __libc_free or cfree, realloc across
 * them), each served by jwmalloc (its statistics count the calls); mallopt
 * accepts glibc's parameters; malloc_info writes jwmalloc's figures in
 * glibc's XML layout. Without these names, glibc's allocator saw jwmalloc's
 * blocks (crash) or jwmalloc saw glibc's (abort). docs/design/api.md
 * "glibc's other names". */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "jwmalloc.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

/* Not declared by glibc's headers, but exported by libc.so.6. */
extern void *__libc_malloc(size_t);
extern void __libc_free(void *);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);
extern int __libc_mallopt(int, int);
extern struct mallinfo __libc_mallinfo(void);
/* cfree is a compat-only symbol of glibc (no default version): old binaries
 * bind cfree@GLIBC_2.2.5, which is what this reference asks for. */
extern void old_cfree(void *);
#if defined(__i386__)
__asm__(".symver old_cfree, cfree@GLIBC_2.0"); /* glibc's first version on i386 */
#else
__asm__(".symver old_cfree, cfree@GLIBC_2.2.5");
#endif

static uint64_t served(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s.small_mallocs + s.mid_mallocs + s.large_mallocs + s.huge_mallocs;
}

int main(void) {
  uint64_t before = served();
  /* each size in a different tier */
  static const size_t sizes[] = {24, 3000, 100000, 6 << 20};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t n = sizes[i];
    char *p = __libc_malloc(n);
    CHECK(p && malloc_usable_size(p) >= n, "__libc_malloc(%zu)", n);
    memset(p, 'a', n);
    free(p);
    p = malloc(n);
    memset(p, 'b', n);
    __libc_free(p);
    p = malloc(n);
    memset(p, 'c', n);
    old_cfree(p);
    p = __libc_calloc(1, n);
    CHECK(p && p[0] == 0 && p[n - 1] == 0, "__libc_calloc(%zu)", n);
    p[0] = 'x';
    p = __libc_realloc(p, 2 * n);
    CHECK(p && p[0] == 'x', "__libc_realloc(%zu)", n);
    p = realloc(p, n / 2);
    CHECK(p && p[0] == 'x', "realloc of a __libc_realloc block");
    __libc_free(p);
    p = __libc_memalign(256, n);
    CHECK(p && ((uintptr_t)p & 255) == 0, "__libc_memalign(256, %zu)", n);
    free(p);
    p = __libc_valloc(n);
    CHECK(p && ((uintptr_t)p & 4095) == 0, "__libc_valloc(%zu)", n);
    __libc_free(p);
    p = __libc_pvalloc(n);
    CHECK(p && ((uintptr_t)p & 4095) == 0 && malloc_usable_size(p) >= 4096, "__libc_pvalloc(%zu)", n);
    free(p);
  }
  CHECK(served() - before >= 4 * 7, "jwmalloc served %llu calls, want >= 28", (unsigned long long)(served() - before));
  errno = 0;
  CHECK(__libc_malloc(SIZE_MAX) == NULL && errno == ENOMEM, "__libc_malloc(SIZE_MAX)");

  /* mallopt: glibc's parameters accepted (1) and ignored */
  CHECK(mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1, "mallopt(M_MMAP_THRESHOLD)");
  CHECK(mallopt(M_ARENA_MAX, 2) == 1, "mallopt(M_ARENA_MAX)");
  CHECK(__libc_mallopt(M_TRIM_THRESHOLD, 1 << 20) == 1, "__libc_mallopt");
  void *big = malloc(10 << 20);
  struct mallinfo mi = __libc_mallinfo();
  CHECK(mi.hblks >= 1 && mi.hblkhd >= (10 << 20), "__libc_mallinfo sees jwmalloc's direct mapping (hblks %d)",
        mi.hblks);

  /* malloc_info: glibc's layout, jwmalloc's figures */
  char *xml = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&xml, &len);
  CHECK(f != NULL, "open_memstream");
  CHECK(malloc_info(0, f) == 0, "malloc_info");
  fclose(f);
  struct mallinfo2 m2 = mallinfo2();
  char want[160];
  snprintf(want, sizeof want, "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>", m2.hblks, m2.hblkhd);
  CHECK(xml && strncmp(xml, "<malloc version=", 16) == 0 && strstr(xml, "</malloc>\n"), "malloc_info layout: %s", xml);
  CHECK(xml && strstr(xml, want), "malloc_info: want %s in %s", want, xml);
  free(xml);
  CHECK(malloc_info(1, stdout) == EINVAL, "malloc_info(options != 0)");
  free(big);

  if (test_failures()) return 1;
  printf("glibc names: ok\n");
  return 0;
}
