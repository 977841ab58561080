/* The page size in force: the kernel's, or a larger logical page in the test
 * mode JWMALLOC_PAGE_SIZE (docs/design/architecture.md, "Page size at run
 * time"). A frontend slab and a backend granule are one page.
 *
 * Thread-safety: jw_page is written once, by jw_page_init during global
 * initialization before any tier maps memory, and only read afterwards
 * (plain reads: the release store that ends initialization publishes it).
 * Before that it holds 4 KiB, so code that runs without initialization (the
 * backend's own tests) sees a valid page. The fast paths never read it.
 */
#ifndef JW_COMMON_PAGE_H
#define JW_COMMON_PAGE_H

#include <stddef.h>
#include <stdint.h>

#define JW_PAGE_MIN ((size_t)4096)   /* the smallest page: 4 KiB */
#define JW_PAGE_MAX ((size_t)65536)  /* the largest page: 64 KiB */

typedef struct jw_page_size {
  size_t size;     /* bytes: 4096, 16384 or 65536 (a power of two) */
  size_t kernel;   /* the kernel's page, bytes (<= size) */
  unsigned shift;  /* log2(size) */
  uintptr_t mask;  /* ~(size - 1): an address's page start is a & mask */
} jw_page_size;

/* Read-mostly: one cache line written once at start-up. */
extern jw_page_size jw_page;

/* The kernel's page size in bytes (getauxval(AT_PAGESZ), else sysconf). */
size_t jw_page_kernel(void);

/* Whether `bytes` may be the logical page: a power of two from the kernel's
 * page to JW_PAGE_MAX. */
int jw_page_valid(size_t bytes);

/* Sets jw_page from the kernel's page, or from `logical` when it is not 0
 * (the caller checked it with jw_page_valid). Called once, by global
 * initialization, before any tier allocates; never again. */
void jw_page_init(size_t logical);

#endif
