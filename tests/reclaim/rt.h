/* Helpers shared by the reclamation tests: configuration, figures, ranges. */
#ifndef JW_TESTS_RECLAIM_RT_H
#define JW_TESTS_RECLAIM_RT_H

#include <dirent.h>
#include <stdbool.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../backend/tb.h"
#include "backend/backend.h"
#include "backend/size_class.h"
#include "reclaim/reclaim.h"

static inline jw_reclaim_stats rt_stats(void) {
  jw_reclaim_stats s;
  jw_reclaim_get_stats(&s);
  return s;
}

static inline jw_backend_stats rt_bstats(void) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  return s;
}

/* The figures at a quiet point (deferred frees done, no batch in flight). */
static inline jw_backend_stats rt_bstats_quiet(void) {
  jw_backend_stats s;
  jw_backend_get_stats_quiet(&s);
  return s;
}

/* grace_ms: reclamation.md section 4, "The grace" (0: the strict rule, a
 * free past the watermark releases at once, which most tests here assume). */
static inline void rt_config_grace(int enabled, uint32_t interval_ms, uint64_t watermark, unsigned policy, int thread,
                                   uint32_t grace_ms) {
  jw_reclaim_config c = {enabled, interval_ms, watermark, policy, thread, 0, grace_ms}; /* ceiling: the default */
  REQUIRE(jw_reclaim_set_config(&c) == 0, "set_config");
}

static inline void rt_config(int enabled, uint32_t interval_ms, uint64_t watermark, unsigned policy, int thread) {
  rt_config_grace(enabled, interval_ms, watermark, policy, thread, 0);
}

static inline void rt_check_all(const char *what) {
  char err[300];
  REQUIRE(jw_backend_check_all(err, sizeof err) == 0, "%s: %s", what, err);
}

static inline char *rt_alloc(uint32_t n) {
  uint32_t got;
  char *p = jw_pages_alloc(n, JW_KIND_LARGE, &got, NULL);
  REQUIRE(p != NULL && got == jw_class_granules[jw_class_index_up(n)], "alloc(%u)", n);
  return p;
}

/* Threads of this process (/proc/self/task entries). */
static inline int rt_threads(void) {
  DIR *d = opendir("/proc/self/task");
  if (d == NULL) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

#endif
