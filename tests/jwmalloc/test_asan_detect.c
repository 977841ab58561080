/* The ASan variant poisons free blocks and unused slab space (docs/design/
 * api.md): a use after free in every tier, and a read past a small block
 * into space no block was handed out from, are reported by AddressSanitizer.
 * Each access runs in a forked child; the parent checks the report. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jwmalloc.h"

static volatile char sink;
static int failures;

static void uaf_small(void) {
  char *p = jw_malloc(32);
  jw_free(p);
  sink = p[20];
}
static void uaf_mid(void) {
  char *p = jw_malloc(5000);
  jw_free(p);
  sink = p[4000];
}
static void uaf_large(void) {
  char *p = jw_malloc(100000);
  jw_free(p);
  sink = p[50000];
}
static void past_block(void) {
  char *p = jw_malloc(200); /* a fresh 208-byte class slab: the next block was never handed out */
  sink = p[300];
}
static void live_ok(void) { /* the control: live memory is not reported */
  char *p = jw_malloc(200);
  memset(p, 1, 200);
  sink = p[199];
  jw_free(p);
}

static void run(const char *name, void (*fn)(void), int expect_report) {
  int fds[2];
  if (pipe(fds)) abort();
  pid_t pid = fork();
  if (pid == 0) {
    dup2(fds[1], 2);
    fn();
    _exit(0);
  }
  close(fds[1]);
  char buf[65536];
  size_t len = 0;
  ssize_t n;
  while (len + 1 < sizeof buf && (n = read(fds[0], buf + len, sizeof buf - 1 - len)) > 0) len += (size_t)n;
  buf[len] = 0;
  close(fds[0]);
  int st;
  waitpid(pid, &st, 0);
  int reported = strstr(buf, "AddressSanitizer: use-after-poison") != NULL && !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  if (reported != expect_report) {
    fprintf(stderr, "%s: expected %s, got status %#x:\n%s\n", name, expect_report ? "an ASan report" : "no report", st,
            buf);
    failures++;
  } else {
    printf("%-22s %s\n", name, expect_report ? "reported by ASan" : "not reported (live memory)");
  }
}

int main(void) {
  run("use after free, small", uaf_small, 1);
  run("use after free, midend", uaf_mid, 1);
  run("use after free, range", uaf_large, 1);
  run("read past a block", past_block, 1);
  run("live block", live_ok, 0);
  return failures ? 1 : 0;
}
