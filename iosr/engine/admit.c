/* Admission (design note section 15, "Connections from hostile users"):
 * who gets a connection, for how long before hello, and what happens when
 * iosrd runs out of descriptors. Any local user can reach the socket; none
 * may exhaust the daemon:
 *
 * - a uid the daemon will not serve (neither root nor its own) is answered
 *   EACCES at once and closed: it holds no descriptor;
 * - at most `conns_per_uid` connections per uid; one more is answered EAGAIN;
 * - a connection that has not said hello within `hello_timeout_ms` is closed;
 * - when accept fails for lack of descriptors (EMFILE, ENFILE), a descriptor
 *   kept in reserve is given up to accept the waiting client and answer it
 *   EMFILE, so the client gets an error instead of waiting, and the listening
 *   socket does not stay readable (the loop would spin on it); if even that
 *   fails, the socket is left unwatched for a back-off (100 ms doubling to
 *   1.6 s) and a closing connection re-arms it.
 *
 * A refusal is a REPLY with sequence 0, which libiosr reads as the answer to
 * its hello even when the daemon closed before the hello arrived.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine_int.h"

#define BACKOFF_MIN_MS 100u
#define BACKOFF_MAX_MS 1600u

/* Answers a connection that is not admitted and closes it. */
static void refuse(iosr_engine *e, int fd, int err, const char *msg) {
  iosr_m_reply r;
  memset(&r, 0, sizeof r);
  r.err = err;
  r.daemon_pid = getpid();
  snprintf(r.msg, sizeof r.msg, "%s", msg);
  iosr_msg_send(fd, IOSR_M_REPLY, 0, 0, &r, sizeof r, NULL, 0);
  /* read what the client sent already: closing over unread data would
   * reset the connection before the client reads the answer */
  char junk[512];
  while (recv(fd, junk, sizeof junk, MSG_DONTWAIT) > 0) {
  }
  close(fd);
  e->conns_refused++;
}

static unsigned conns_of(const iosr_engine *e, uid_t uid) {
  unsigned n = 0;
  for (const iosr_conn *c = e->conns; c; c = c->next) n += c->uid == uid;
  return n;
}

/* Admits or refuses one accepted socket. */
static void admit(iosr_engine *e, int fd) {
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
    close(fd);
    return;
  }
  char msg[160];
  if (cr.uid != geteuid() && cr.uid != 0) {
    snprintf(msg, sizeof msg, "refused: uid %u is neither root nor the daemon's uid %u", (unsigned)cr.uid,
             (unsigned)geteuid());
    iosr_info("pid %d %s", (int)cr.pid, msg);
    refuse(e, fd, EACCES, msg);
    return;
  }
  if (conns_of(e, cr.uid) >= e->set.conns_per_uid) {
    snprintf(msg, sizeof msg, "refused: uid %u already has %u connections (conns_per_uid)", (unsigned)cr.uid,
             e->set.conns_per_uid);
    if (!e->conns_refused) iosr_warn("pid %d %s", (int)cr.pid, msg);
    refuse(e, fd, EAGAIN, msg);
    return;
  }
  if (!iosr_conn_add(e, fd)) refuse(e, fd, ENOMEM, "refused: out of memory");
}

static void listen_watch(iosr_engine *e, int on) {
  if (e->listen_fd < 0 || e->listen_off == !on) return;
  e->listen_off = !on;
  if (on) iosr_engine_watch(e, e->listen_fd, iosr_tag(IOSR_TAG_LISTEN, 0));
  else iosr_engine_unwatch(e, e->listen_fd);
}

/* accept failed with err: answer the waiting client through the reserve
 * descriptor, or stop watching the socket for a while. */
static void out_of_fds(iosr_engine *e, int err) {
  if (!e->accept_errors++ || e->accept_errors % 1000 == 0)
    iosr_warn("accept: %s (%llu times): refusing new clients until descriptors free up", strerror(err),
              (unsigned long long)e->accept_errors);
  if (e->spare_fd >= 0) {
    close(e->spare_fd);
    e->spare_fd = -1;
    int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) refuse(e, fd, EMFILE, "refused: iosrd is out of file descriptors; try again later");
    e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && e->spare_fd >= 0) return;
  }
  e->listen_backoff_ms = e->listen_backoff_ms ? e->listen_backoff_ms * 2 : BACKOFF_MIN_MS;
  if (e->listen_backoff_ms > BACKOFF_MAX_MS) e->listen_backoff_ms = BACKOFF_MAX_MS;
  e->listen_resume_ns = iosr_now_ns() + (uint64_t)e->listen_backoff_ms * 1000000u;
  listen_watch(e, 0);
}

void iosr_admit_accept(iosr_engine *e) {
  for (int k = 0; k < 256; k++) {
    int fd = accept4(e->listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd >= 0) {
      admit(e, fd);
      continue;
    }
    if (errno == EINTR || errno == ECONNABORTED) continue;
    if (errno != EMFILE && errno != ENFILE && errno != ENOBUFS && errno != ENOMEM) return; /* EAGAIN: none waiting */
    out_of_fds(e, errno);
    if (e->listen_off) return;
  }
}

int iosr_admit_init(iosr_engine *e) {
  e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
  return e->spare_fd >= 0 ? 0 : -1;
}

void iosr_admit_conn_closed(iosr_engine *e) {
  /* a descriptor is free again: take the clients waiting in the backlog */
  if (e->listen_off) {
    e->listen_backoff_ms = 0;
    e->listen_resume_ns = 0;
    if (e->spare_fd < 0) e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    listen_watch(e, 1);
  }
}

uint64_t iosr_admit_timer(iosr_engine *e, uint64_t now) {
  if (e->listen_off && e->listen_resume_ns && now >= e->listen_resume_ns) {
    e->listen_resume_ns = 0;
    if (e->spare_fd < 0) e->spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    listen_watch(e, 1); /* the next failure backs off twice as long */
  }
  uint64_t due = e->listen_off ? e->listen_resume_ns : 0;
  uint64_t limit = (uint64_t)e->set.hello_timeout_ms * 1000000u;
  for (iosr_conn *c = e->conns, *next; c; c = next) {
    next = c->next;
    if (c->hello_done) continue;
    if (now >= c->accepted_ns + limit) {
      e->hello_timeouts++;
      iosr_info("client pid %d said no hello within %u ms; closing it", (int)c->pid, e->set.hello_timeout_ms);
      iosr_conn_close(e, c);
    } else if (!due || c->accepted_ns + limit < due) {
      due = c->accepted_ns + limit;
    }
  }
  /* the other deadline of the daemon layer: reclaims held for trims */
  uint64_t trim = iosr_trim_timer(e, now);
  return trim && (!due || trim < due) ? trim : due;
}
