/* One thread parked at a backend test point (common/test_hooks.h), for the
 * tests that force an interleaving (built with JW_TEST_HOOKS): `arm(point)`
 * names the point that parks the next thread to reach it (one use), which
 * then raises `parked` and waits for `go`. Install park_hook with
 * jw_test_set_point_hook once; arm(PARK_NO_POINT) disarms. */
#ifndef JW_TESTS_BACKEND_PARK_H
#define JW_TESTS_BACKEND_PARK_H

#include <unistd.h>

#include "common/atomic.h"
#include "common/test_hooks.h"

static jw_atomic_u32 armed, parked, go;
#define PARK_NO_POINT 0xffu

static void wait_for(jw_atomic_u32 *v) {
  while (jw_load(v, JW_ACQUIRE) == 0) usleep(100); /* acquire: the other thread's steps before it */
}

static void park_hook(jw_test_point point) {
  uint32_t want = (uint32_t)point;
  /* Relaxed: the hand-shake variables below order the test's steps. */
  if (!jw_cas(&armed, &want, PARK_NO_POINT, JW_RELAXED, JW_RELAXED)) return;
  jw_store(&parked, 1, JW_RELEASE);
  wait_for(&go);
}

static void arm(uint32_t point) {
  jw_store(&parked, 0, JW_RELAXED);
  jw_store(&go, 0, JW_RELAXED);
  jw_store(&armed, (uint32_t)point, JW_RELEASE);
}

#endif
