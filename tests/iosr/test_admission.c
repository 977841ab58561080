/* iosrd under hostile local users (issue 22): no connection can tie the
 * daemon up, running out of descriptors is an error for the newcomer and
 * nothing more, and a name is never cut.
 *
 *   fds            iosrd with a limit of 32 descriptors: once they are used up
 *                  a new client is refused with EMFILE (not left waiting), the
 *                  loop does not spin on the listening socket, and freeing one
 *                  lets the next client in
 *   hello-timeout  a connection that never says hello is closed
 *   per-uid        at most conns_per_uid connections per uid; one more gets
 *                  EAGAIN
 *   long-name      an app name over IOSR_NAME_MAX - 1 characters is refused
 *                  with EINVAL (argument and IOSR_APP), not cut
 */
#include "util.h"
#include "common/sock.h"

#include <sys/time.h>

static char sock[300], swap[256];

/* A connection that says no hello (the point of these cases): the socket
 * only, as libiosr opens it (a path too long for sun_path fails there). */
static int raw_connect(void) {
  int fd = iosr_sock_connect(sock);
  CHECK(fd >= 0, "connect %s: %s", sock, strerror(errno));
  struct timeval tv = {60, 0}; /* a hang bound */
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

static uint64_t stat_of(iosr_ctl *ctl, const char *key) { return iosr_test_stat(ctl, key); }

static void fds(void) {
  pid_t d = iosr_test_daemon_nofile(swap, sock, "restart_grace_ms=0", NULL, 32);
  alarm(300); /* every wait below is bounded; a hang is a failure */
  iosr_ctl *watch = iosr_ctl_open(sock);
  CHECK(watch);
  iosr_ctl *held[64];
  int nheld = 0;
  errno = 0;
  while (nheld < 64 && (held[nheld] = iosr_ctl_open(sock))) nheld++;
  CHECK(nheld < 64 && errno == EMFILE, "after %d connections: errno %d (%s)", nheld, errno, strerror(errno));
  /* an app is refused the same way, at once */
  iosr_connect_opts o = {.app_name = "late", .socket_path = sock};
  errno = 0;
  CHECK(!iosr_connect(&o) && errno == EMFILE, "app connect while out of descriptors: errno %d", errno);
  /* nothing happens now: the loop must not turn (a listening socket that
   * stays readable would turn it thousands of times) */
  uint64_t t0 = stat_of(watch, "\"loop_turns\":");
  usleep(300000);
  uint64_t t1 = stat_of(watch, "\"loop_turns\":");
  CHECK(t1 - t0 <= 20, "the idle daemon turned its loop %llu times", (unsigned long long)(t1 - t0));
  CHECK(stat_of(watch, "\"accept_errors\":") >= 2);
  /* a descriptor freed: the next client is served, control commands work */
  iosr_ctl_close(held[--nheld]);
  iosr_ctl *again = NULL;
  for (int i = 0; i < 500 && !again; i++)
    if (!(again = iosr_ctl_open(sock))) usleep(10000);
  CHECK(again, "no connection after a descriptor was freed: %s", strerror(errno));
  char *js = iosr_ctl_stat_json(again);
  CHECK(js);
  free(js);
  iosr_ctl_close(again);
  while (nheld) iosr_ctl_close(held[--nheld]);
  iosr_ctl_close(watch);
  char out[256];
  CHECK(iosr_tool(sock, "stat", out, sizeof out) == 0, "iosr stat: %s", out);
  alarm(0);
  iosr_test_stop_daemon(d);
  printf("fds: refused with EMFILE when out of descriptors, no spinning (%llu turns idle), served again after\n",
         (unsigned long long)(t1 - t0));
}

static void hello_timeout(void) {
  pid_t d = iosr_test_daemon(swap, sock, "hello_timeout_ms=200", NULL);
  int fd = raw_connect();
  char buf[256];
  ssize_t n = recv(fd, buf, sizeof buf, 0);
  CHECK(n == 0, "a connection without hello was not closed (recv %zd, %s)", n, strerror(errno));
  close(fd);
  iosr_ctl *ctl = iosr_ctl_open(sock);
  CHECK(ctl);
  CHECK(stat_of(ctl, "\"hello_timeouts\":") == 1);
  iosr_ctl_close(ctl);
  iosr_test_stop_daemon(d);
  printf("hello-timeout: a silent connection was closed\n");
}

static void per_uid(void) {
  pid_t d = iosr_test_daemon(swap, sock, "conns_per_uid=4", NULL);
  iosr_ctl *c[4];
  for (int i = 0; i < 4; i++) CHECK((c[i] = iosr_ctl_open(sock)));
  errno = 0;
  iosr_ctl *x = iosr_ctl_open(sock);
  CHECK(!x && errno == EAGAIN, "a fifth connection of the uid: %s, errno %d", x ? "accepted" : "refused", errno);
  /* silent ones count too: they hold a descriptor until the hello timeout */
  iosr_ctl_close(c[3]);
  int fd = raw_connect();
  errno = 0;
  CHECK(!iosr_ctl_open(sock) && errno == EAGAIN);
  close(fd);
  for (int i = 0; i < 200 && !(x = iosr_ctl_open(sock)); i++) usleep(10000);
  CHECK(x, "no connection after one closed");
  iosr_ctl_close(x);
  for (int i = 0; i < 3; i++) iosr_ctl_close(c[i]);
  iosr_test_stop_daemon(d);
  printf("per-uid: the fifth connection of a uid was refused with EAGAIN\n");
}

static void long_name(void) {
  pid_t d = iosr_test_daemon(swap, sock, NULL, NULL);
  char name[201];
  memset(name, 'n', 200);
  name[200] = 0;
  iosr_connect_opts o = {.app_name = name, .socket_path = sock};
  errno = 0;
  CHECK(!iosr_connect(&o) && errno == EINVAL, "a 200-character name: errno %d", errno);
  name[IOSR_NAME_MAX - 1] = 0; /* the longest allowed */
  iosr_ctx *ok = iosr_connect(&o);
  CHECK(ok, "a %u-character name was refused: %s", IOSR_NAME_MAX - 1, strerror(errno));
  name[IOSR_NAME_MAX - 1] = 'x';
  name[IOSR_NAME_MAX] = 0; /* one more, the same prefix */
  errno = 0;
  CHECK(!iosr_connect(&o) && errno == EINVAL, "a %u-character name: errno %d", IOSR_NAME_MAX, errno);
  memset(name, 'e', 200);
  name[200] = 0;
  setenv("IOSR_APP", name, 1);
  iosr_connect_opts oe = {.socket_path = sock};
  errno = 0;
  CHECK(!iosr_connect(&oe) && errno == EINVAL, "a 200-character IOSR_APP: errno %d", errno);
  unsetenv("IOSR_APP");
  CHECK(iosr_disconnect(ok) == 0);
  iosr_test_stop_daemon(d);
  printf("long-name: names over %u characters refused with EINVAL\n", IOSR_NAME_MAX - 1);
}

int main(int argc, char **argv) {
  const char *k = argc == 2 ? argv[1] : "";
  void (*fn)(void) = !strcmp(k, "fds") ? fds : !strcmp(k, "hello-timeout") ? hello_timeout
                     : !strcmp(k, "per-uid") ? per_uid : !strcmp(k, "long-name") ? long_name : NULL;
  if (!fn) {
    fprintf(stderr, "usage: test_admission fds|hello-timeout|per-uid|long-name\n");
    return 2;
  }
  iosr_test_require();
  iosr_test_swap(swap, sizeof swap, 16u << 20);
  snprintf(sock, sizeof sock, "%s/sock", iosr_test_dir);
  fn();
  iosr_test_cleanup();
  return 0;
}
