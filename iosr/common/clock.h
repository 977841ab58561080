/* Monotonic time in nanoseconds (CLOCK_MONOTONIC). Thread-safe. */
#ifndef IOSR_COMMON_CLOCK_H
#define IOSR_COMMON_CLOCK_H

#include <stdint.h>
#include <time.h>

static inline uint64_t iosr_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#endif
