/* The allocation-free formatter agrees with snprintf on the conversions it supports. */
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "common/log.h"

/* jw_format and snprintf give the same text for fmt and its arguments. */
#define CHECK_SAME_AS_SNPRINTF(fmt, ...)                                     \
  do {                                                                       \
    char a[256], b[256];                                                     \
    jw_format(a, sizeof a, fmt, __VA_ARGS__);                                \
    snprintf(b, sizeof b, fmt, __VA_ARGS__);                                 \
    CHECK(strcmp(a, b) == 0, "'%s': got '%s' want '%s'", fmt, a, b);         \
  } while (0)

int main(void) {
  CHECK_SAME_AS_SNPRINTF("%d %i %u", -42, 7, 4000000000u);
  CHECK_SAME_AS_SNPRINTF("%5d|%-5d|%05d", 42, 42, -42);
  CHECK_SAME_AS_SNPRINTF("%ld %lu %lld %llu", -1L, (unsigned long)-1, -9000000000LL, 9000000000ULL);
  CHECK_SAME_AS_SNPRINTF("%zu %x %lx", (size_t)123456789, 0xbeefu, (unsigned long)0xdeadbeefcafeULL);
  CHECK_SAME_AS_SNPRINTF("%s|%8s|%-8s|%c%%", "abc", "right", "left", 'z');
  CHECK_SAME_AS_SNPRINTF("%p", (void *)0x7fff1234);
  char small[4];
  size_t n = jw_format(small, sizeof small, "%s", "truncated");
  CHECK(n == 3 && strcmp(small, "tru") == 0, "truncation: got '%s' (%zu)", small, n);
  if (test_failures()) return 1;
  puts("log: ok");
  return 0;
}
