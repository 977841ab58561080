#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *log_who = "libiosr";
static int log_lvl = -1; /* -1: not set yet, IOSR_LOG or warnings */

void iosr_log_init(const char *who, int level) {
  if (who) log_who = who;
  log_lvl = level;
}

int iosr_log_parse(const char *s) {
  if (!s || s[0] < '0' || s[0] > '0' + IOSR_LOG_DEBUG || s[1]) return -1;
  return s[0] - '0';
}

int iosr_log_level(void) {
  if (log_lvl < 0) {
    int v = iosr_log_parse(getenv("IOSR_LOG"));
    log_lvl = v >= 0 ? v : IOSR_LOG_WARN;
  }
  return log_lvl;
}

static void vlog(const char *fmt, va_list ap) {
  char buf[1024];
  int n = snprintf(buf, sizeof buf, "%s: ", log_who);
  if (n < 0) return;
  int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof buf - 2) len = sizeof buf - 2;
  buf[len++] = '\n';
  ssize_t w = write(2, buf, len);
  (void)w;
}

void iosr_log(int level, const char *fmt, ...) {
  if (level > iosr_log_level()) return;
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
}

void iosr_die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vlog(fmt, ap);
  va_end(ap);
  abort();
}
