/* See page.h. */
#include "page.h"

#include <sys/auxv.h>
#include <unistd.h>

jw_page_size jw_page = {JW_PAGE_MIN, JW_PAGE_MIN, 12, ~(uintptr_t)(JW_PAGE_MIN - 1)};

size_t jw_page_kernel(void) {
  size_t k = (size_t)getauxval(AT_PAGESZ);
  if (k == 0) {
    long s = sysconf(_SC_PAGESIZE);
    k = s > 0 ? (size_t)s : JW_PAGE_MIN;
  }
  return k;
}

int jw_page_valid(size_t bytes) {
  return bytes >= jw_page_kernel() && bytes <= JW_PAGE_MAX && (bytes & (bytes - 1)) == 0;
}

void jw_page_init(size_t logical) {
  size_t k = jw_page_kernel();
  size_t p = logical ? logical : k;
  jw_page.kernel = k;
  jw_page.size = p;
  jw_page.shift = (unsigned)__builtin_ctzl(p);
  jw_page.mask = ~(uintptr_t)(p - 1);
}
