/* Credentials (issue 5, "Must be shown": a client with the wrong uid is
 * refused). iosrd runs as root; a forked child switches to `nobody` and
 * connects: the socket accepts the connection (its mode is 0666), the daemon
 * refuses the hello with EACCES, both as an app and as a control client. A
 * root client is served throughout. */
#include "util.h"
#include <pwd.h>
#include <sys/prctl.h>


static char sock[300];

int main(void) {
  iosr_test_require();
  if (geteuid() != 0) {
    printf("SKIP: needs root to run a client as another uid\n");
    return 77;
  }
  struct passwd *pw = getpwnam("nobody");
  uid_t nob = pw ? pw->pw_uid : 65534;
  gid_t nobg = pw ? pw->pw_gid : 65534;
  char swap[256];
  iosr_test_swap(swap, sizeof swap, 16u << 20);
  chmod(iosr_test_dir, 0755); /* nobody must reach the socket: the refusal must be the daemon's */
  snprintf(sock, sizeof sock, "%s/sock", iosr_test_dir);
  pid_t d = iosr_test_daemon(swap, sock, NULL, NULL);
  /* a root client, with data swapped out */
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region("rootapp", sock, 256, 3, &ctx, &r);
  char out[4096];
  CHECK(iosr_tool(sock, "reclaim rootapp", out, sizeof out) == 0);
  pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    if (setgid(nobg) || setuid(nob)) _exit(10);
    /* the socket itself is reachable */
    int fd = iosr_sock_connect(sock);
    if (fd < 0) _exit(11);
    close(fd);
    iosr_connect_opts oo = {.app_name = "intruder", .socket_path = sock};
    errno = 0;
    iosr_ctx *x = iosr_connect(&oo);
    if (x || errno != EACCES) {
      fprintf(stderr, "nobody's app connection: %s\n", x ? "admitted" : strerror(errno));
      _exit(12);
    }
    errno = 0;
    iosr_ctl *cl = iosr_ctl_open(sock);
    if (cl || errno != EACCES) {
      fprintf(stderr, "nobody's control connection: %s\n", cl ? "admitted" : strerror(errno));
      _exit(13);
    }
    _exit(0);
  }
  int st;
  waitpid(c, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "nobody's client: exit %d", WEXITSTATUS(st));
  /* the refused client left no trace, and root's app is still served */
  CHECK(iosr_tool(sock, "stat --json", out, sizeof out) == 0);
  CHECK(!strstr(out, "intruder") && strstr(out, "rootapp"));
  for (int i = 0; i < 256; i++) CHECK(iosr_check(p + i * 4096, 3, (uint64_t)i, 0));
  CHECK(iosr_region_destroy(r) == 0 && iosr_disconnect(ctx) == 0);
  iosr_test_stop_daemon(d);
  iosr_test_cleanup();
  printf("creds: uid %u refused, root served\n", (unsigned)nob);
  return 0;
}
