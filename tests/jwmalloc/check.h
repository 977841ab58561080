/* CHECK(cond, fmt, ...) for the jwmalloc tests: reports a failed condition
 * with its location and counts it in `failures` (stops after 20). */
#ifndef JW_TEST_CHECK_H
#define JW_TEST_CHECK_H

#include <stdio.h>
#include <stdlib.h>

static int failures;
#define CHECK(cond, ...)                                         \
  do {                                                           \
    if (!(cond)) {                                               \
      fprintf(stderr, "%s:%d: %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                              \
      fputc('\n', stderr);                                       \
      if (++failures > 20) exit(1);                              \
    }                                                            \
  } while (0)

#endif
