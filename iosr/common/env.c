/* See env.h: the IOSR_* variables read outside the settings table, checked once per process. */
#include "env.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "opts.h"

extern char **environ;

/* IOSR_* names read outside the engine's settings table. The demo's and the
 * tests' own variables are inherited by the iosrd and apps they start, so
 * they are known too rather than reported on every run. */
static const char *const others[] = {
    "SWAP", "SOCKET", "APP", "RECONNECT_MS", "LOG", /* iosrd, libiosr, the iosr tool */
    "DEMO_APPS", "DEMO_SIZE", "DEMO_KEEP",           /* scripts/demo-iosr.sh */
    "BENCH_ARGS",                                    /* make bench-iosr */
    "TOOL", "APP_BIN", "BENCH_APP_BIN",              /* tests/iosr */
};

#define NOTHERS (sizeof others / sizeof others[0])
#define DOCUMENTED 5 /* the first five, read by iosrd, libiosr and the iosr tool: in the README */

const char *iosr_env_other(size_t i, int *documented) {
  if (i >= NOTHERS) return NULL;
  if (documented) *documented = i < DOCUMENTED;
  return others[i];
}

/* The i-th known name (upper case, without IOSR_), NULL past the last. */
static const char *known(size_t i, char *buf, size_t cap) {
  size_t n = NOTHERS;
  if (i < n) return others[i];
  const char *k = iosr_settings_key(i - n);
  if (!k) return NULL;
  size_t j = 0;
  for (; k[j] && j < cap - 1; j++) buf[j] = (char)(k[j] >= 'a' && k[j] <= 'z' ? k[j] - 'a' + 'A' : k[j]);
  buf[j] = 0;
  return buf;
}

/* Edit distance with adjacent transpositions (READAHAED is one edit from
 * READAHEAD), for names of under 64 characters; larger otherwise. */
static unsigned distance(const char *a, const char *b) {
  size_t m = strlen(a), n = strlen(b);
  if (m >= 64 || n >= 64) return UINT32_MAX;
  unsigned d[64][64];
  for (size_t i = 0; i <= m; i++) d[i][0] = (unsigned)i;
  for (size_t j = 0; j <= n; j++) d[0][j] = (unsigned)j;
  for (size_t i = 1; i <= m; i++)
    for (size_t j = 1; j <= n; j++) {
      unsigned c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
      if (d[i - 1][j] + 1 < c) c = d[i - 1][j] + 1;
      if (d[i][j - 1] + 1 < c) c = d[i][j - 1] + 1;
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] && d[i - 2][j - 2] + 1 < c)
        c = d[i - 2][j - 2] + 1;
      d[i][j] = c;
    }
  return d[m][n];
}

static void warn_unknown(void) {
  for (char **e = environ; e && *e; e++) {
    if (strncmp(*e, "IOSR_", 5)) continue;
    char name[64];
    size_t n = 0;
    for (const char *p = *e + 5; *p && *p != '=' && n < sizeof name - 1; p++) name[n++] = *p;
    name[n] = 0;
    const char *best = NULL;
    unsigned best_d = 3; /* suggest only a name at most two edits away */
    char buf[64], best_buf[64];
    int found = 0;
    for (size_t i = 0; !found; i++) {
      const char *k = known(i, buf, sizeof buf);
      if (!k) break;
      if (!strcmp(k, name)) found = 1;
      unsigned d = distance(name, k);
      if (d < best_d) {
        best_d = d;
        snprintf(best_buf, sizeof best_buf, "%s", k);
        best = best_buf;
      }
    }
    if (found) continue;
    if (best) iosr_warn("IOSR_%s: unknown variable, ignored (did you mean IOSR_%s?)", name, best);
    else iosr_warn("IOSR_%s: unknown variable, ignored (the README's IOSR Options table lists them)", name);
  }
}

static pthread_once_t warned = PTHREAD_ONCE_INIT;

int iosr_env_check(char *err, size_t cap) {
  pthread_once(&warned, warn_unknown);
  const char *v = iosr_env("LOG");
  if (v && iosr_log_parse(v) < 0) {
    if (err && cap) snprintf(err, cap, "IOSR_LOG: bad value '%s' for log (want 0..3)", v);
    errno = EINVAL;
    return -1;
  }
  v = iosr_env("RECONNECT_MS");
  uint64_t ms;
  if (v && (v[strspn(v, "0123456789")] || iosr_parse_size(v, &ms))) {
    if (err && cap) snprintf(err, cap, "IOSR_RECONNECT_MS: bad value '%s' for reconnect_ms (want milliseconds)", v);
    errno = EINVAL;
    return -1;
  }
  return 0;
}
