/* iosrd: serves one swap area to many client processes (brief: "How this
 * project realizes IOSR"; design note sections 1 and 12).
 *
 *   iosrd --swap PATH [--socket PATH] [--slot global|process]
 *         [--readahead cluster|vma|adaptive] [--sched fifo|sios] [--budget N]
 *         [--set KEY=VALUE]... [--test-hooks] [--log LEVEL]
 *
 * Every option also comes from IOSR_* (README). SIGTERM/SIGINT: swap every
 * app's pages back in, mark the area clean, exit.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "common/env.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/sock.h"
#include "engine/engine.h"

static iosr_engine *engine;

static void on_signal(int sig) {
  (void)sig;
  if (engine) iosr_engine_request_stop(engine, 1);
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: iosrd --swap PATH [--socket PATH] [--slot global|process]\n"
          "             [--readahead cluster|vma|adaptive] [--sched fifo|sios] [--budget BYTES]\n"
          "             [--set KEY=VALUE]... [--test-hooks] [--log 0-3]\n"
          "Serves the IOSR swap area PATH (made by `iosr mkswap`) to libiosr clients.\n");
}

static int listen_on(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    fprintf(stderr, "iosrd: socket path too long: %s\n", path);
    return -1;
  }
  strcpy(sa.sun_path, path);
  int probe = iosr_sock_connect(path);
  if (probe >= 0) {
    close(probe);
    fprintf(stderr, "iosrd: another daemon is listening on %s\n", path);
    return -1;
  }
  unlink(path); /* stale socket of a dead daemon */
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof sa) || listen(fd, 64)) {
    fprintf(stderr, "iosrd: cannot listen on %s: %s\n", path, strerror(errno));
    if (fd >= 0) close(fd);
    return -1;
  }
  /* the credential check is the daemon's (SO_PEERCRED), not the file mode's */
  chmod(path, 0666);
  return fd;
}

int main(int argc, char **argv) {
  const char *swap = iosr_env("SWAP"), *sock = NULL;
  char settings[1024] = "";
  size_t sl = 0;
  int level = iosr_log_parse(iosr_env("LOG")); /* a bad IOSR_LOG fails iosr_env_check below */
  if (level < 0) level = IOSR_LOG_WARN;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    const char *key = NULL;
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "--swap") && v) swap = v, i++;
    else if (!strcmp(a, "--socket") && v) sock = v, i++;
    else if (!strcmp(a, "--log") && v) {
      if ((level = iosr_log_parse(v)) < 0) {
        fprintf(stderr, "iosrd: bad --log '%s' (want 0..3)\n", v);
        return 2;
      }
      i++;
    }
    else if (!strcmp(a, "--test-hooks")) key = "test_hooks=1";
    else if ((!strcmp(a, "--slot") || !strcmp(a, "--readahead") || !strcmp(a, "--sched") || !strcmp(a, "--budget")) && v) {
      static char kv[256];
      snprintf(kv, sizeof kv, "%s=%s", a + 2, v);
      key = kv;
      i++;
    } else if (!strcmp(a, "--set") && v) key = v, i++;
    else {
      fprintf(stderr, "iosrd: unknown or incomplete argument '%s' (iosrd --help shows the usage)\n", a);
      return 2;
    }
    if (key) {
      int n = snprintf(settings + sl, sizeof settings - sl, "%s%s", sl ? "," : "", key);
      if (n < 0 || (size_t)n >= sizeof settings - sl) {
        fprintf(stderr, "iosrd: too many options\n");
        return 2;
      }
      sl += (size_t)n;
    }
  }
  iosr_log_init("iosrd", level);
  /* Every app holds about four of the daemon's descriptors (socket,
   * userfaultfd, pidfd, page table): take all the hard limit allows rather
   * than the 1024 of a default soft limit. */
  struct rlimit rl;
  if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
    rl.rlim_cur = rl.rlim_max;
    setrlimit(RLIMIT_NOFILE, &rl);
  }
  char err[256] = "";
  if (iosr_env_check(err, sizeof err)) {
    fprintf(stderr, "iosrd: %s\n", err);
    return 1;
  }
  if (!swap) {
    fprintf(stderr, "iosrd: no swap area: give --swap PATH (or IOSR_SWAP)\n");
    return 2;
  }
  char def[108];
  if (!sock) sock = iosr_default_socket(def, sizeof def);
  int lfd = listen_on(sock);
  if (lfd < 0) return 1;
  engine = iosr_engine_create(swap, settings, lfd, "iosrd", err, sizeof err);
  if (!engine) {
    fprintf(stderr, "iosrd: %s\n", err[0] ? err : strerror(errno));
    close(lfd);
    unlink(sock);
    return 1;
  }
  struct sigaction sa = {.sa_handler = on_signal};
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGINT, &sa, NULL);
  signal(SIGPIPE, SIG_IGN);
  iosr_log(IOSR_LOG_INFO, "serving %s on %s (pid %d)", swap, sock, (int)getpid());
  iosr_engine_run(engine);
  iosr_engine_destroy(engine);
  close(lfd);
  unlink(sock);
  return 0;
}
