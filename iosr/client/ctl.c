/* Control connections (the `iosr` command and test/evaluation harnesses):
 * foreground, reclaim, options, statistics, slot map, test hooks. One thread
 * at a time per connection; synchronous request/reply.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "client/client_int.h"
#include "common/log.h"
#include "common/sock.h"
#include "engine/engine.h"

struct iosr_ctl {
  int sock;
  uint32_t seq;
  uint8_t *buf; /* IOSR_MSG_MAX */
};

static iosr_ctl *ctl_hello(int fd) {
  if (fd < 0) return NULL;
  iosr_ctl *c = calloc(1, sizeof *c);
  if (!c || !(c->buf = malloc(IOSR_MSG_MAX))) {
    free(c);
    close(fd);
    errno = ENOMEM;
    return NULL;
  }
  c->sock = fd;
  iosr_m_hello h;
  memset(&h, 0, sizeof h);
  h.version = IOSR_PROTO_VERSION;
  h.role = IOSR_ROLE_CONTROL;
  iosr_m_reply r;
  /* a refusal (seq 0) may come before our hello is sent: read it anyway */
  if (iosr_msg_send(fd, IOSR_M_HELLO, 0, ++c->seq, &h, sizeof h, NULL, 0) && errno != EPIPE && errno != ECONNRESET)
    goto fail;
  int fds[IOSR_MAX_FDS], nfds;
  long n = iosr_msg_recv(fd, c->buf, IOSR_MSG_MAX, fds, &nfds);
  for (int i = 0; i < nfds; i++) close(fds[i]);
  if (n < (long)(sizeof(iosr_msg_hdr) + sizeof r)) {
    errno = n == 0 ? ECONNRESET : EPROTO;
    goto fail;
  }
  memcpy(&r, c->buf + sizeof(iosr_msg_hdr), sizeof r);
  if (r.err) {
    errno = r.err;
    goto fail;
  }
  return c;
fail:
  iosr_ctl_close(c); /* keeps errno */
  return NULL;
}

iosr_ctl *iosr_ctl_open(const char *socket_path) {
  char def[108];
  const char *path = socket_path ? socket_path : iosr_default_socket(def, sizeof def);
  return ctl_hello(iosr_sock_connect(path));
}

iosr_ctl *iosr_ctl_open_engine(iosr_engine *engine) {
  if (!engine) {
    errno = EINVAL;
    return NULL;
  }
  return ctl_hello(iosr_engine_connect_fd(engine));
}

/* Keeps errno: callers close before they report the failed call's errno. */
void iosr_ctl_close(iosr_ctl *c) {
  if (!c) return;
  int e = errno;
  close(c->sock);
  free(c->buf);
  free(c);
  errno = e;
}

/* Sends a request; collects the reply: a REPLY or APP_STATS into out, or
 * CHUNKs appended into *data (malloc'd). Returns 0 or -1/errno. */
static int call(iosr_ctl *c, uint16_t type, const void *p, uint32_t len, void *out, uint32_t cap, uint8_t **data,
                size_t *dlen) {
  uint32_t seq = ++c->seq;
  if (iosr_msg_send(c->sock, type, 0, seq, p, len, NULL, 0)) return -1;
  size_t have = 0, dcap = 0;
  uint8_t *d = NULL;
  for (;;) {
    int fds[IOSR_MAX_FDS], nfds;
    long n = iosr_msg_recv(c->sock, c->buf, IOSR_MSG_MAX, fds, &nfds);
    for (int i = 0; i < nfds; i++) close(fds[i]);
    if (n <= 0) {
      free(d);
      if (n == 0) errno = ECONNRESET;
      return -1;
    }
    const iosr_msg_hdr *h = (const iosr_msg_hdr *)c->buf;
    if (h->seq != seq) continue;
    if (h->type == IOSR_M_CHUNK && data) {
      if (have + h->len > dcap) {
        dcap = (have + h->len) * 2 + 1;
        uint8_t *nd = realloc(d, dcap);
        if (!nd) {
          free(d);
          errno = ENOMEM;
          return -1;
        }
        d = nd;
      }
      memcpy(d + have, c->buf + sizeof *h, h->len);
      have += h->len;
      if (h->flags & IOSR_MSG_MORE) continue;
      if (!d) d = malloc(1);
      *data = d;
      *dlen = have;
      return 0;
    }
    if (h->type == IOSR_M_REPLY) {
      iosr_m_reply r;
      memset(&r, 0, sizeof r);
      memcpy(&r, c->buf + sizeof *h, h->len < sizeof r ? h->len : sizeof r);
      if (out && cap) memcpy(out, &r, cap < sizeof r ? cap : sizeof r);
      free(d);
      if (r.err) {
        if (r.msg[0] && r.err != ESRCH) iosr_log(IOSR_LOG_INFO, "%s", r.msg);
        errno = r.err;
        return -1;
      }
      if (data) {
        *data = malloc(1);
        *dlen = 0;
      }
      return 0;
    }
    if (h->type == IOSR_M_APP_STATS && out) {
      memcpy(out, c->buf + sizeof *h, h->len < cap ? h->len : cap);
      free(d);
      return 0;
    }
  }
}

static int app_field(iosr_m_app *m, const char *app) {
  memset(m, 0, sizeof *m);
  if (app && strlen(app) >= sizeof m->app) {
    errno = EINVAL;
    return -1;
  }
  if (app) strcpy(m->app, app);
  return 0;
}

int iosr_ctl_foreground(iosr_ctl *c, const char *app) {
  iosr_m_app m;
  if (app_field(&m, app)) return -1;
  iosr_m_reply r;
  return call(c, IOSR_M_CTL_FG, &m, sizeof m, &r, sizeof r, NULL, NULL);
}

int iosr_ctl_reclaim(iosr_ctl *c, const char *app, uint64_t bytes, uint64_t *reclaimed) {
  iosr_m_reclaim m;
  memset(&m, 0, sizeof m);
  if (!app || strlen(app) >= sizeof m.app) {
    errno = EINVAL;
    return -1;
  }
  strcpy(m.app, app);
  m.bytes = bytes;
  iosr_m_reply r;
  memset(&r, 0, sizeof r);
  int rc = call(c, IOSR_M_CTL_RECLAIM, &m, sizeof m, &r, sizeof r, NULL, NULL);
  if (reclaimed) *reclaimed = r.value;
  return rc;
}

int iosr_ctl_set(iosr_ctl *c, const char *key, const char *value) {
  iosr_m_set m;
  memset(&m, 0, sizeof m);
  if (!key || !value || strlen(key) >= sizeof m.key || strlen(value) >= sizeof m.value) {
    errno = EINVAL;
    return -1;
  }
  strcpy(m.key, key);
  strcpy(m.value, value);
  iosr_m_reply r;
  memset(&r, 0, sizeof r);
  int rc = call(c, IOSR_M_CTL_SET, &m, sizeof m, &r, sizeof r, NULL, NULL);
  if (rc) {
    /* one line either way: the engine's reason when it refused, else (no
     * reply: the engine gone, a broken connection) errno's text */
    int e = errno;
    iosr_err("set %s=%s: %s", key, value, r.msg[0] ? r.msg : strerror(e));
    errno = e;
  }
  return rc;
}

char *iosr_ctl_stat_json(iosr_ctl *c) {
  uint8_t *d = NULL;
  size_t n = 0;
  if (call(c, IOSR_M_CTL_STAT_JSON, NULL, 0, NULL, 0, &d, &n)) return NULL;
  char *s = realloc(d, n + 1);
  if (!s) {
    free(d);
    errno = ENOMEM;
    return NULL;
  }
  s[n] = 0;
  return s;
}

int iosr_ctl_app_stats(iosr_ctl *c, const char *app, iosr_app_stats *out) {
  iosr_m_app m;
  if (app_field(&m, app)) return -1;
  iosr_m_app_stats r;
  memset(&r, 0, sizeof r);
  if (call(c, IOSR_M_CTL_APP_STATS, &m, sizeof m, &r, sizeof r, NULL, NULL)) return -1;
  if (r.err) {
    errno = r.err;
    return -1;
  }
  *out = r.st;
  return 0;
}

int iosr_ctl_slot_map(iosr_ctl *c, const char *app, iosr_slot_entry **out, size_t *n) {
  iosr_m_app m;
  if (app_field(&m, app)) return -1;
  uint8_t *d = NULL;
  size_t len = 0;
  if (call(c, IOSR_M_CTL_SLOTS, &m, sizeof m, NULL, 0, &d, &len)) return -1;
  *out = (iosr_slot_entry *)d;
  *n = len / sizeof(iosr_slot_entry);
  return 0;
}

int iosr_ctl_wait_idle(iosr_ctl *c) {
  iosr_m_reply r;
  return call(c, IOSR_M_CTL_IDLE, NULL, 0, &r, sizeof r, NULL, NULL);
}

int iosr_ctl_test(iosr_ctl *c, int op, uint64_t arg) {
  iosr_m_test m = {(uint32_t)op, 0, arg};
  iosr_m_reply r;
  return call(c, IOSR_M_CTL_TEST, &m, sizeof m, &r, sizeof r, NULL, NULL);
}

int iosr_ctl_dispatch_log(iosr_ctl *c, iosr_dispatch_rec *out, size_t *n) {
  uint8_t *d = NULL;
  size_t len = 0;
  if (call(c, IOSR_M_CTL_DISPATCH_LOG, NULL, 0, NULL, 0, &d, &len)) return -1;
  size_t k = len / sizeof *out;
  if (k > *n) k = *n;
  memcpy(out, d, k * sizeof *out);
  *n = k;
  free(d);
  return 0;
}
