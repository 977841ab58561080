/* See sock.h: the daemon's socket path and connections to it. */
#include "sock.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "opts.h"

const char *iosr_default_socket(char *buf, size_t cap) {
  const char *env = iosr_env("SOCKET");
  if (env) return env;
  if (geteuid() == 0) snprintf(buf, cap, "/run/iosrd.sock");
  else snprintf(buf, cap, "/tmp/iosrd-%u.sock", (unsigned)geteuid());
  return buf;
}

int iosr_sock_connect(const char *path) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (strlen(path) >= sizeof sa.sun_path) {
    errno = ENAMETOOLONG;
    return -1;
  }
  strcpy(sa.sun_path, path);
  int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa)) {
    int e = errno;
    close(fd);
    errno = e;
    return -1;
  }
  return fd;
}
