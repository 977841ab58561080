#include "proto.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int iosr_msg_send(int fd, uint16_t type, uint16_t flags, uint32_t seq, const void *payload,
                  uint32_t len, const int *fds, int nfds) {
  if (len > IOSR_MSG_MAX - sizeof(iosr_msg_hdr) || nfds < 0 || nfds > IOSR_MAX_FDS) {
    errno = EMSGSIZE;
    return -1;
  }
  iosr_msg_hdr h = {IOSR_PROTO_MAGIC, type, flags, len, seq};
  struct iovec iov[2] = {{&h, sizeof h}, {(void *)payload, len}};
  struct msghdr mh = {0};
  mh.msg_iov = iov;
  mh.msg_iovlen = len ? 2 : 1;
  union {
    char buf[CMSG_SPACE(sizeof(int) * IOSR_MAX_FDS)];
    struct cmsghdr align;
  } cm;
  if (nfds > 0) {
    memset(&cm, 0, sizeof cm);
    mh.msg_control = cm.buf;
    mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)nfds);
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)nfds);
    memcpy(CMSG_DATA(c), fds, sizeof(int) * (size_t)nfds);
  }
  for (;;) {
    ssize_t n = sendmsg(fd, &mh, MSG_NOSIGNAL);
    if (n >= 0) return 0;
    if (errno != EINTR) return -1;
  }
}

long iosr_msg_recv(int fd, void *buf, size_t cap, int *fds, int *nfds) {
  struct iovec iov = {buf, cap};
  struct msghdr mh = {0};
  union {
    char buf[CMSG_SPACE(sizeof(int) * IOSR_MAX_FDS)];
    struct cmsghdr align;
  } cm;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  mh.msg_control = cm.buf;
  mh.msg_controllen = sizeof cm.buf;
  *nfds = 0;
  ssize_t n;
  for (;;) {
    n = recvmsg(fd, &mh, MSG_CMSG_CLOEXEC);
    if (n >= 0 || errno != EINTR) break;
  }
  if (n < 0) return -1;
  for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    int k = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
    int tmp[IOSR_MAX_FDS + 8];
    if (k > (int)(sizeof tmp / sizeof tmp[0])) k = (int)(sizeof tmp / sizeof tmp[0]);
    memcpy(tmp, CMSG_DATA(c), sizeof(int) * (size_t)k);
    for (int i = 0; i < k; i++) {
      if (*nfds < IOSR_MAX_FDS) fds[(*nfds)++] = tmp[i];
      else close(tmp[i]);
    }
  }
  int bad = (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  if (n == 0 && !bad) return 0;
  if (!bad) {
    if ((size_t)n < sizeof(iosr_msg_hdr)) bad = 1;
    else {
      const iosr_msg_hdr *h = buf;
      if (h->magic != IOSR_PROTO_MAGIC || h->len != (size_t)n - sizeof *h) bad = 1;
    }
  }
  if (bad) {
    for (int i = 0; i < *nfds; i++) close(fds[i]);
    *nfds = 0;
    errno = EBADMSG;
    return -1;
  }
  return n;
}

long iosr_msg_expected_len(uint16_t type) {
  switch (type) {
    case IOSR_M_HELLO: return sizeof(iosr_m_hello);
    case IOSR_M_ATTACH: return sizeof(iosr_m_attach);
    case IOSR_M_REGION_ADD:
    case IOSR_M_REGION_DEL: return sizeof(iosr_m_range);
    case IOSR_M_DROPPED: return sizeof(iosr_m_dropped);
    case IOSR_M_DROP_MOVED: return sizeof(iosr_m_drop_moved);
    case IOSR_M_TRIMMED: return sizeof(iosr_m_trim);
    case IOSR_M_GOODBYE:
    case IOSR_M_CTL_STAT_JSON:
    case IOSR_M_CTL_IDLE:
    case IOSR_M_CTL_DISPATCH_LOG: return 0;
    case IOSR_M_CTL_FG:
    case IOSR_M_CTL_APP_STATS:
    case IOSR_M_CTL_SLOTS: return sizeof(iosr_m_app);
    case IOSR_M_CTL_RECLAIM: return sizeof(iosr_m_reclaim);
    case IOSR_M_CTL_SET: return sizeof(iosr_m_set);
    case IOSR_M_CTL_TEST: return sizeof(iosr_m_test);
    default: return -1;
  }
}

int iosr_field_str(const char *field, size_t size) {
  return memchr(field, 0, size) ? 0 : -1;
}
