/* A budget below what the foreground app needs (design note section 9,
 * "Memory budget"): `iosr set budget` refuses it in one line with a non-zero
 * exit and the budget stays as it was; a budget below the floor is refused
 * the same way, by `iosr set` and by `iosrd --budget`; a budget the app fits
 * in is taken, and the app's pages are all there. */
#include "util.h"

#define NPAGES 1024u /* 4 MiB */

static char sock[300];

static int one_line(const char *s) {
  const char *nl = strchr(s, '\n');
  return s[0] && (!nl || nl[1] == 0);
}

/* The foreground app: fill, then obey: v = verify, q = quit. */
static pid_t app(int *to, int *from) {
  pid_t pid = iosr_test_fork(to, from);
  if (pid) return pid;
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region("front", sock, NPAGES, 11, &ctx, &r);
  chan_send(*to, 'r');
  for (;;) {
    char c = chan_recv(*from);
    if (c != 'v') break;
    int ok = 1;
    for (uint64_t i = 0; i < NPAGES; i++) ok &= iosr_check(p + i * 4096, 11, i, 0);
    chan_send(*to, ok ? 'o' : 'x');
  }
  iosr_region_destroy(r);
  iosr_disconnect(ctx);
  _exit(0);
}

int main(void) {
  iosr_test_require();
  char swap[256], out[4096], cmd[1024];
  iosr_test_swap(swap, sizeof swap, 32u << 20);
  snprintf(sock, sizeof sock, "%s/sock", iosr_test_dir);
  /* iosrd --budget below the floor: one line, non-zero exit */
  const char *bin = getenv("IOSRD");
  snprintf(cmd, sizeof cmd, "%s --swap %s --socket %s.bad --budget 64K 2>&1", bin ? bin : "iosrd", swap, sock);
  int rc = iosr_sh(cmd, out, sizeof out);
  printf("iosrd --budget 64K: exit %d: %s", rc, out);
  CHECK(rc != 0 && one_line(out), "iosrd took a budget below the floor (exit %d): %s", rc, out);
  pid_t d = iosr_test_daemon(swap, sock, NULL, NULL);
  int to, from;
  pid_t a = app(&to, &from);
  CHECK(chan_recv(from) == 'r');
  CHECK(iosr_tool(sock, "fg front", NULL, 0) == 0);
  /* 2 MiB: below the foreground app's 4 MiB */
  rc = iosr_tool(sock, "set budget 2M", out, sizeof out);
  printf("iosr set budget 2M: exit %d: %s", rc, out);
  CHECK(rc != 0 && one_line(out) && strstr(out, "foreground"), "exit %d: %s", rc, out);
  rc = iosr_tool(sock, "set budget 64K", out, sizeof out);
  printf("iosr set budget 64K: exit %d: %s", rc, out);
  CHECK(rc != 0 && one_line(out) && strstr(out, "floor"), "exit %d: %s", rc, out);
  /* a blank or a sign before the number: refused, not read as 2^64-1 */
  rc = iosr_tool(sock, "set budget ' -1'", out, sizeof out);
  CHECK(rc == 1 && one_line(out) && strstr(out, "bad value"), "exit %d: %s", rc, out);
  rc = iosr_tool(sock, "set budget +7M", out, sizeof out);
  CHECK(rc == 1 && one_line(out) && strstr(out, "bad value"), "exit %d: %s", rc, out);
  /* the engine tells an unknown key from one read only at start-up */
  rc = iosr_tool(sock, "set no_such_option 1", out, sizeof out);
  CHECK(rc == 1 && one_line(out) && strstr(out, "unknown option 'no_such_option'"), "exit %d: %s", rc, out);
  rc = iosr_tool(sock, "set io sync", out, sizeof out);
  CHECK(rc == 1 && one_line(out) && strstr(out, "not a run-time option"), "exit %d: %s", rc, out);
  /* what the request's fields cannot hold: bad usage, one line, exit 2 */
  rc = iosr_tool(sock, "set budget_low_budget_low_budget_low 1M", out, sizeof out);
  CHECK(rc == 2 && one_line(out) && strstr(out, "bad option name"), "exit %d: %s", rc, out);
  char longv[160];
  snprintf(longv, sizeof longv, "set budget %0100d", 1);
  rc = iosr_tool(sock, longv, out, sizeof out);
  CHECK(rc == 2 && one_line(out) && strstr(out, "longer than"), "exit %d: %s", rc, out);
  iosr_ctl *ctl = iosr_ctl_open(sock);
  CHECK(ctl);
  CHECK(iosr_test_stat(ctl, "\"budget_bytes\":") == 0, "a refused budget was set");
  /* 8 MiB: the app fits */
  rc = iosr_tool(sock, "set budget 8M", out, sizeof out);
  CHECK(rc == 0, "exit %d: %s", rc, out);
  CHECK(iosr_test_stat(ctl, "\"budget_bytes\":") == 8u << 20);
  /* the environment's spelling reaches the same option */
  rc = iosr_tool(sock, "set IOSR_BUDGET 12M", out, sizeof out);
  CHECK(rc == 0, "exit %d: %s", rc, out);
  CHECK(iosr_test_stat(ctl, "\"budget_bytes\":") == 12u << 20);
  iosr_ctl_close(ctl);
  chan_send(to, 'v');
  CHECK(chan_recv(from) == 'o', "the app's pages changed");
  chan_send(to, 'q');
  int st;
  CHECK(waitpid(a, &st, 0) == a && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  CHECK(iosr_test_stop_daemon(d) == 0);
  iosr_test_cleanup();
  return 0;
}
