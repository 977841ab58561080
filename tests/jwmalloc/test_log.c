/* The allocation-free formatter agrees with snprintf on the conversions it supports. */
#include <stdio.h>
#include <string.h>

#include "common/log.h"

static int failures;

#define CHECK(fmt, ...)                                      \
  do {                                                       \
    char a[256], b[256];                                     \
    jw_format(a, sizeof a, fmt, __VA_ARGS__);                \
    snprintf(b, sizeof b, fmt, __VA_ARGS__);                 \
    if (strcmp(a, b) != 0) {                                 \
      fprintf(stderr, "'%s': got '%s' want '%s'\n", fmt, a, b); \
      failures++;                                            \
    }                                                        \
  } while (0)

int main(void) {
  CHECK("%d %i %u", -42, 7, 4000000000u);
  CHECK("%5d|%-5d|%05d", 42, 42, -42);
  CHECK("%ld %lu %lld %llu", -1L, (unsigned long)-1, -9000000000LL, 9000000000ULL);
  CHECK("%zu %x %lx", (size_t)123456789, 0xbeefu, (unsigned long)0xdeadbeefcafeULL);
  CHECK("%s|%8s|%-8s|%c%%", "abc", "right", "left", 'z');
  CHECK("%p", (void *)0x7fff1234);
  char small[4];
  size_t n = jw_format(small, sizeof small, "%s", "truncated");
  if (n != 3 || strcmp(small, "tru") != 0) {
    fprintf(stderr, "truncation: got '%s' (%zu)\n", small, n);
    failures++;
  }
  if (failures) return 1;
  puts("log: ok");
  return 0;
}
