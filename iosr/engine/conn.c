/* Connections to the engine (design note sections 11, 12, 15): hello and
 * credentials, app attach (the userfaultfd arrives by SCM_RIGHTS, the page
 * table memfd goes back), regions, drop confirmations, and the control
 * commands. Every message is validated before use; a malformed one gets an
 * error reply and its sender is disconnected, nothing else changes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/beacon.h"
#include "common/clock.h"
#include "common/json.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"

/* A message the socket did not take yet (iosr_conn.out). */
typedef struct iosr_outmsg {
  struct iosr_outmsg *next;
  uint32_t len;
  int nfds;
  int fds[IOSR_MAX_FDS];
  uint8_t data[];
} outmsg;

iosr_conn *iosr_conn_by_id(iosr_engine *e, uint32_t id) {
  for (iosr_conn *c = e->conns; c; c = c->next)
    if (c->id == id) return c;
  return NULL;
}

static void watch_conn(iosr_engine *e, iosr_conn *c, int out) {
  struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.u64 = iosr_tag(IOSR_TAG_CONN, c->id)};
  epoll_ctl(e->epfd, EPOLL_CTL_MOD, c->fd, &ev);
}

iosr_conn *iosr_conn_add(iosr_engine *e, int fd) {
  iosr_conn *c = calloc(1, sizeof *c);
  if (!c) return NULL;
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  struct ucred cr;
  socklen_t len = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &len)) {
    free(c);
    return NULL;
  }
  c->fd = fd;
  c->pid = cr.pid;
  c->uid = cr.uid;
  c->accepted_ns = iosr_now_ns();
  c->id = e->next_conn_id++;
  if (!e->next_conn_id) e->next_conn_id = 1;
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = iosr_tag(IOSR_TAG_CONN, c->id)};
  if (epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev)) {
    free(c);
    return NULL;
  }
  c->next = e->conns;
  e->conns = c;
  __atomic_add_fetch(&e->nconns, 1, __ATOMIC_RELEASE);
  return c;
}

/* Is the address space that a's userfaultfd serves gone? A process that
 * exited or exec'd has none: a copy into it answers ESRCH (a pidfd tells only
 * the exit). Into a live one the copy maps nothing: its source is NULL
 * (EFAULT), or nothing is registered at the address (ENOENT); the probe of
 * iosr_engine_reap_forked. */
static int app_mm_gone(iosr_app *a) {
  if (a->uffd < 0) return 0;
  uint64_t done;
  return iosr_uffd_copy(a->uffd, 0x10000, NULL, 4096, 0, &done) == -ESRCH;
}

void iosr_conn_close(iosr_engine *e, iosr_conn *c) {
  iosr_conn **pp = &e->conns;
  while (*pp && *pp != c) pp = &(*pp)->next;
  if (*pp) *pp = c->next;
  epoll_ctl(e->epfd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  __atomic_sub_fetch(&e->nconns, 1, __ATOMIC_RELEASE);
  for (outmsg *m = c->out, *n; m; m = n) {
    n = m->next;
    for (int i = 0; i < m->nfds; i++) close(m->fds[i]);
    free(m);
  }
  iosr_app *a = c->app ? iosr_engine_app(e, c->app) : NULL;
  free(c);
  iosr_admit_conn_closed(e);
  if (a && a->conn == c) {
    a->conn = NULL;
    /* The socket closed without a goodbye. A process that is still alive
     * keeps its pages (its agent reconnects after a daemon restart, or it is
     * reaped when its pidfd fires); an in-process client is simply gone, and
     * so is a process that exec'd (its sockets closed with its old image,
     * whose memory is gone: docs/design/stack.md, "fork and exec"). */
    int alive = a->pidfd >= 0;
    if (alive) {
      struct pollfd pf = {a->pidfd, POLLIN, 0};
      alive = poll(&pf, 1, 0) == 0; /* a pidfd is readable once the process terminated */
    }
    if (alive && app_mm_gone(a)) iosr_engine_app_gone(e, a, "exec'd or is exiting (its memory is gone)");
    else if (!alive || a->pid == getpid() || a->uffd < 0) iosr_engine_app_gone(e, a, "disconnected");
    else if (__atomic_load_n(&e->stop, __ATOMIC_ACQUIRE)) {
      /* shutting down: the app carries on without us */
    } else {
      a->state = IOSR_APP_ACTIVE;
      iosr_warn("app %s (pid %d) lost its connection; keeping its pages until it resumes or exits", a->name,
                (int)a->pid);
    }
  }
}

static int flush_out(iosr_conn *c) {
  while (c->out) {
    outmsg *m = c->out;
    const iosr_msg_hdr *h = (const iosr_msg_hdr *)m->data;
    if (iosr_msg_send(c->fd, h->type, h->flags, h->seq, m->data + sizeof *h, h->len, m->fds, m->nfds)) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return 1;
      return -1;
    }
    c->out = m->next;
    for (int i = 0; i < m->nfds; i++) close(m->fds[i]);
    free(m);
  }
  return 0;
}

void iosr_conn_writable(iosr_engine *e, iosr_conn *c) {
  int r = flush_out(c);
  if (r < 0) iosr_conn_close(e, c);
  else if (r == 0) watch_conn(e, c, 0);
}

int iosr_conn_send(iosr_engine *e, iosr_conn *c, uint16_t type, uint16_t flags, uint32_t seq, const void *p,
                  uint32_t len, const int *fds, int nfds) {
  if (!c->out && iosr_msg_send(c->fd, type, flags, seq, p, len, fds, nfds) == 0) return 0;
  if (!c->out && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
  outmsg *m = malloc(sizeof *m + sizeof(iosr_msg_hdr) + len);
  if (!m) return -1;
  iosr_msg_hdr h = {IOSR_PROTO_MAGIC, type, flags, len, seq};
  memcpy(m->data, &h, sizeof h);
  if (len) memcpy(m->data + sizeof h, p, len);
  m->len = (uint32_t)(sizeof h + len);
  m->nfds = 0;
  for (int i = 0; i < nfds; i++) {
    int d = fcntl(fds[i], F_DUPFD_CLOEXEC, 0);
    if (d >= 0) m->fds[m->nfds++] = d;
  }
  m->next = NULL;
  outmsg **pp = &c->out;
  while (*pp) pp = &(*pp)->next;
  *pp = m;
  watch_conn(e, c, 1);
  return 0;
}

int iosr_conn_reply(iosr_engine *e, iosr_conn *c, uint32_t seq, int err, uint64_t value, const char *msg) {
  iosr_m_reply r;
  memset(&r, 0, sizeof r);
  r.err = err;
  r.client_id = c->app;
  r.value = value;
  r.daemon_pid = getpid();
  if (msg) snprintf(r.msg, sizeof r.msg, "%s", msg);
  return iosr_conn_send(e, c, IOSR_M_REPLY, 0, seq, &r, sizeof r, NULL, 0);
}

static void send_chunks(iosr_engine *e, iosr_conn *c, uint32_t seq, const void *data, size_t len) {
  const uint8_t *p = data;
  do {
    size_t n = len > IOSR_CHUNK_MAX ? IOSR_CHUNK_MAX : len;
    iosr_conn_send(e, c, IOSR_M_CHUNK, len > n ? IOSR_MSG_MORE : 0, seq, p, (uint32_t)n, NULL, 0);
    p += n;
    len -= n;
  } while (len);
}

static void malformed(iosr_engine *e, iosr_conn *c, uint32_t seq, const char *why) {
  iosr_warn("client pid %d: malformed message (%s); disconnecting it", (int)c->pid, why);
  char msg[128];
  snprintf(msg, sizeof msg, "malformed message: %s", why);
  iosr_conn_reply(e, c, seq, EPROTO, 0, msg);
  flush_out(c);
  iosr_conn_close(e, c);
}

/* ---- handlers ---- */

static uint64_t random_token(void) {
  uint64_t t = 0;
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) {
    ssize_t r = read(fd, &t, sizeof t);
    (void)r;
    close(fd);
  }
  return t ? t : iosr_now_ns();
}

static int name_ok(const char *n) {
  if (!*n) return 0;
  for (; *n; n++)
    if ((unsigned char)*n < 0x21 || *n == '#' || (unsigned char)*n > 0x7e) return 0;
  return 1;
}

static void do_hello(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_hello *h, int *fds, int nfds) {
  if (iosr_field_str(h->name, sizeof h->name)) return malformed(e, c, seq, "unterminated name");
  if (h->version != IOSR_PROTO_VERSION) {
    iosr_conn_reply(e, c, seq, EPROTONOSUPPORT, 0, "protocol version mismatch");
    return;
  }
  if (c->uid != geteuid() && c->uid != 0) {
    char msg[160];
    snprintf(msg, sizeof msg, "refused: uid %u is neither root nor the daemon's uid %u", (unsigned)c->uid,
             (unsigned)geteuid());
    iosr_warn("pid %d %s", (int)c->pid, msg);
    iosr_conn_reply(e, c, seq, EACCES, 0, msg);
    flush_out(c);
    iosr_conn_close(e, c);
    return;
  }
  if (h->role == IOSR_ROLE_CONTROL) {
    if (nfds) return malformed(e, c, seq, "descriptors on a control hello");
    c->role = IOSR_ROLE_CONTROL;
    c->hello_done = 1;
    iosr_conn_reply(e, c, seq, 0, 0, "control");
    return;
  }
  if (h->role == IOSR_ROLE_RESUME) {
    if (nfds < 2) return malformed(e, c, seq, "resume needs a userfaultfd and a page table");
    char msg[160] = "";
    c->role = IOSR_ROLE_APP;
    c->hello_done = 1;
    int err = iosr_resume_app(e, c, h, fds[0], fds[1], msg, sizeof msg);
    if (err) c->hello_done = 0;
    else {
      fds[0] = fds[1] = -1; /* taken */
      for (int i = 2; i < nfds; i++) {
        iosr_resume_orphan(e, c->app, fds[i]);
        fds[i] = -1;
      }
    }
    iosr_app *a = iosr_engine_app(e, c->app);
    iosr_conn_reply(e, c, seq, err, a ? a->token : 0, msg);
    if (err) {
      flush_out(c);
      iosr_conn_close(e, c);
    }
    return;
  }
  if (h->role != IOSR_ROLE_APP) return malformed(e, c, seq, "unknown role");
  if (nfds) return malformed(e, c, seq, "descriptors on an app hello");
  char name[IOSR_NAME_MAX];
  if (h->name[0]) snprintf(name, sizeof name, "%s", h->name);
  else snprintf(name, sizeof name, "app-%d", (int)c->pid);
  if (!name_ok(name)) {
    iosr_conn_reply(e, c, seq, EINVAL, 0, "app names are printable, without spaces or '#'");
    return;
  }
  iosr_app *old = iosr_engine_find_app(e, name);
  /* An image that exec'd may say hello under its old name before its old
   * connection's close is read: the old app's memory is gone, so is it. */
  if (old && !old->forked && app_mm_gone(old)) {
    iosr_engine_app_gone(e, old, "exec'd or exited (its memory is gone)");
    old = NULL;
  }
  if (old) {
    iosr_conn_reply(e, c, seq, EEXIST, 0, "an app of that name is connected");
    return;
  }
  uint32_t id = iosr_engine_new_app_id(e);
  iosr_app *a = id ? calloc(1, sizeof *a) : NULL;
  if (!a) {
    iosr_conn_reply(e, c, seq, EAGAIN, 0, "too many apps");
    return;
  }
  a->id = id;
  a->state = IOSR_APP_ACTIVE;
  snprintf(a->name, sizeof a->name, "%s", name);
  a->pid = c->pid;
  a->pidfd = -1;
  a->uffd = -1;
  a->token = random_token();
  a->conn = c;
  a->probe_head = a->probe_tail = -1;
  a->bg_since_ns = iosr_now_ns();
  a->pt.fd = -1;
  iosr_ra_adaptive_init(&a->ra, e->set.ra_init, e->set.ra_max);
  iosr_extmap_init(&a->ext);
  if (c->pid != getpid()) {
    a->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    if (a->pidfd >= 0) iosr_engine_watch(e, a->pidfd, iosr_tag(IOSR_TAG_PIDFD, id));
  }
  e->apps[id] = a;
  c->role = IOSR_ROLE_APP;
  c->app = id;
  c->hello_done = 1;
  iosr_conn_reply(e, c, seq, 0, a->token, name);
}

static void do_attach(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_attach *m, int *fds, int nfds) {
  iosr_app *a = iosr_engine_app(e, c->app);
  if (c->role != IOSR_ROLE_APP || !a || nfds != 1 || a->uffd >= 0)
    return malformed(e, c, seq, "attach needs one userfaultfd, once, on an app connection");
  if ((m->features & IOSR_UFFD_REQUIRED) != IOSR_UFFD_REQUIRED) {
    iosr_conn_reply(e, c, seq, ENOTSUP, 0, "userfaultfd lacks write-protect or events");
    return;
  }
  if (iosr_pt_create(&a->pt, a->token, a->name)) {
    iosr_conn_reply(e, c, seq, ENOMEM, 0, "cannot create the page table");
    return;
  }
  a->uffd = fds[0];
  fds[0] = -1; /* taken */
  a->beacon = iosr_beacon_page(m->beacon);
  a->uffd_features = m->features;
  a->user_mode_only = (int)m->user_mode_only;
  a->trims = (m->flags & IOSR_ATTACH_TRIMS) != 0;
  /* the graveyard follows the beacon area (design note section 3, "Moved out") */
  if ((m->flags & IOSR_ATTACH_GRAVEYARD) && a->beacon && (a->uffd_features & UFFD_FEATURE_MOVE))
    a->grave = a->beacon + IOSR_BEACON_PAGES;
  iosr_engine_watch(e, a->uffd, iosr_tag(IOSR_TAG_UFFD, a->id));
  iosr_m_reply r;
  memset(&r, 0, sizeof r);
  r.client_id = a->id;
  r.value = a->token;
  r.daemon_pid = getpid();
  iosr_conn_send(e, c, IOSR_M_REPLY, 0, seq, &r, sizeof r, &a->pt.fd, 1);
  iosr_info("app %s (pid %d) attached%s", a->name, (int)a->pid, a->user_mode_only ? " (user-mode faults only)" : "");
}

static void region_release_cb(void *arg, uint64_t vpn, iosr_pte *p) {
  (void)vpn; /* the walk's callback type; a release needs only the entry */
  void **ctx = arg;
  iosr_page_release(ctx[0], ctx[1], p);
}

static void do_region(iosr_engine *e, iosr_conn *c, uint32_t seq, uint16_t type, const iosr_m_range *m) {
  iosr_app *a = iosr_engine_app(e, c->app);
  if (c->role != IOSR_ROLE_APP || !a || a->uffd < 0) return malformed(e, c, seq, "region call before attach");
  if (!m->len || (m->start | m->len) & 4095 || m->start + m->len < m->start || m->start + m->len > (1ull << 57))
    return malformed(e, c, seq, "region range not page aligned or out of bounds");
  if (type == IOSR_M_REGION_ADD) {
    /* a region id per app, so each region gets its own read-ahead window */
    iosr_span *sp = iosr_pt_add(&a->pt, m->start >> 12, m->len >> 12, a->next_region + 1);
    if (sp) a->next_region++;
    if (sp) iosr_fault_adopt_present(e, a, sp);
    iosr_conn_reply(e, c, seq, sp ? 0 : errno, 0, sp ? NULL : "cannot add the region");
  } else {
    void *ctx[2] = {e, a};
    int r = iosr_pt_cut(&a->pt, m->start >> 12, m->len >> 12, region_release_cb, ctx);
    iosr_conn_reply(e, c, seq, r ? errno : 0, 0, NULL);
  }
}

static void set_fg(iosr_engine *e, iosr_app *n) {
  uint32_t old = e->fg_app, id = n ? n->id : 0;
  if (old == id) return;
  e->fg_app = id;
  e->resident_peak = e->resident_total; /* the peak is per foreground period (a switch) */
  uint64_t now = iosr_now_ns();
  iosr_app *o = iosr_engine_app(e, old);
  if (o) {
    o->bg_since_ns = now;
    iosr_engine_notify_fg(e, o, 0);
  }
  if (n) {
    n->fg_since_ns = now;
    iosr_engine_notify_fg(e, n, 1);
    /* its queued fault reads now serve the foreground */
    for (iosr_req *r = e->reqs; r; r = r->next_all)
      if (!r->dispatched && r->s.app == id && r->s.cls == IOSR_CLS_BG_FAULT)
        iosr_sched_promote(&e->sched, &r->s, IOSR_CLS_FG_FAULT);
  }
  iosr_reclaim_fg_changed(e, o, n);
  iosr_reclaim_check_budget(e);
}

static void do_fg(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_app *m) {
  if (iosr_field_str(m->app, sizeof m->app)) return malformed(e, c, seq, "unterminated app");
  iosr_app *a = NULL;
  if (c->role == IOSR_ROLE_APP) a = iosr_engine_app(e, c->app);
  else if (m->app[0] && !(a = iosr_engine_find_app(e, m->app))) {
    iosr_conn_reply(e, c, seq, ESRCH, 0, "no such app");
    return;
  }
  set_fg(e, a);
  iosr_conn_reply(e, c, seq, 0, 0, a ? a->name : "no foreground app");
}

static void do_reclaim(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_reclaim *m) {
  if (iosr_field_str(m->app, sizeof m->app)) return malformed(e, c, seq, "unterminated app");
  if (c->role != IOSR_ROLE_CONTROL) return malformed(e, c, seq, "reclaim on an app connection");
  iosr_app *apps[IOSR_MAX_APPS];
  unsigned n = 0;
  if (!strcmp(m->app, "--background")) {
    for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
      iosr_app *a = iosr_engine_app(e, i);
      if (a && a->state == IOSR_APP_ACTIVE && !a->forked && a->conn && a->id != e->fg_app) apps[n++] = a;
    }
  } else {
    iosr_app *a = iosr_engine_find_app(e, m->app);
    if (!a || a->forked) {
      iosr_conn_reply(e, c, seq, ESRCH, 0, a ? "forked children are not reclaimed" : "no such app");
      return;
    }
    if (!a->conn) {
      iosr_conn_reply(e, c, seq, EAGAIN, 0, "app is detached (no agent to drop pages)");
      return;
    }
    apps[n++] = a;
  }
  if (e->grace_until_ns && iosr_now_ns() < e->grace_until_ns) {
    iosr_conn_reply(e, c, seq, EAGAIN, 0, "restart grace period: no new swap slots yet");
    return;
  }
  /* apps that trim give back their free memory first (engine/trim.c) */
  if (iosr_trim_hold(e, c, seq, apps, n, m->bytes)) return;
  iosr_conn_reclaim_now(e, c, seq, apps, n, m->bytes);
}

void iosr_conn_reclaim_now(iosr_engine *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n,
                          uint64_t bytes) {
  uint64_t pages = (bytes + 4095) / 4096;
  iosr_job *j = iosr_reclaim_start(e, apps, n, pages, 0);
  if (!j) {
    iosr_conn_reply(e, c, seq, ENOMEM, 0, "out of memory");
    return;
  }
  j->waiter = c->id;
  j->waiter_seq = seq;
  iosr_reclaim_pump(e); /* which ends j if it has nothing to do (j may be freed) */
}

static void do_set(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_set *m) {
  if (iosr_field_str(m->key, sizeof m->key) || iosr_field_str(m->value, sizeof m->value))
    return malformed(e, c, seq, "unterminated key or value");
  if (c->role != IOSR_ROLE_CONTROL) return malformed(e, c, seq, "set on an app connection");
  /* the options table knows both refusals apart: no such key, or one read
   * only when the engine starts (its value is not looked at then) */
  int runtime = iosr_settings_runtime(m->key);
  if (runtime < 0) {
    char msg[64];
    snprintf(msg, sizeof msg, "unknown option '%s'", m->key);
    iosr_conn_reply(e, c, seq, EINVAL, 0, msg);
    return;
  }
  if (!runtime) {
    iosr_conn_reply(e, c, seq, EINVAL, 0, "not a run-time option (set it when the engine starts)");
    return;
  }
  iosr_settings s = e->set;
  char err[160] = "";
  if (iosr_settings_set(&s, m->key, m->value, err, sizeof err)) {
    iosr_conn_reply(e, c, seq, EINVAL, 0, err);
    return;
  }
  if (s.max_io > e->bufs.bytes || s.max_io > ((size_t)4096 << e->bufs.max_order)) {
    iosr_conn_reply(e, c, seq, EINVAL, 0, "max_io above the buffer arena's largest block");
    return;
  }
  /* a budget below the foreground app's need is refused: the app would
   * evict its own working set while it runs (design note section 9) */
  if (!strcmp(m->key, "budget") && iosr_budget_check(e, s.budget, err, sizeof err)) {
    iosr_conn_reply(e, c, seq, EINVAL, 0, err);
    return;
  }
  if (s.ra_init > s.ra_max) s.ra_init = s.ra_max;
  e->set = s;
  iosr_sched_set_policy(&e->sched, s.sched);
  e->sched.depth = s.queue_depth;
  e->sched.hold_max = s.write_hold_max;
  e->sched.hold_ms = s.write_hold_ms;
  if (!strcmp(m->key, "ra_init") || !strcmp(m->key, "ra_max") || !strcmp(m->key, "readahead"))
    for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
      iosr_app *a = iosr_engine_app(e, i);
      if (a) {
        iosr_ra_adaptive_init(&a->ra, s.ra_init, s.ra_max);
        iosr_ra_region_reset_all(a);
      }
    }
  iosr_info("set %s=%s", m->key, m->value);
  iosr_conn_reply(e, c, seq, 0, 0, NULL);
}

static void do_stats(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_app *m) {
  if (iosr_field_str(m->app, sizeof m->app)) return malformed(e, c, seq, "unterminated app");
  iosr_app *a = c->role == IOSR_ROLE_APP && !m->app[0] ? iosr_engine_app(e, c->app) : iosr_engine_find_app(e, m->app);
  iosr_m_app_stats r;
  memset(&r, 0, sizeof r);
  if (!a) r.err = ESRCH;
  else iosr_stats_fill(e, a, &r.st);
  iosr_conn_send(e, c, IOSR_M_APP_STATS, 0, seq, &r, sizeof r, NULL, 0);
}

static void do_slots(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_app *m) {
  if (iosr_field_str(m->app, sizeof m->app)) return malformed(e, c, seq, "unterminated app");
  iosr_app *a = iosr_engine_find_app(e, m->app);
  if (!a) {
    iosr_conn_reply(e, c, seq, ESRCH, 0, "no such app");
    return;
  }
  iosr_buf b = {0};
  for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
    iosr_span *sp = &a->pt.spans[i];
    for (uint64_t v = sp->start; v < sp->start + sp->n; v++) {
      iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
      if (!iosr_pte_has_slot(p)) continue;
      iosr_slot_entry s = {v << 12, p->slot};
      iosr_buf_append(&b, &s, sizeof s);
    }
  }
  if (b.failed) iosr_conn_reply(e, c, seq, ENOMEM, 0, "out of memory");
  else send_chunks(e, c, seq, b.data, b.len);
  iosr_buf_free(&b);
}

static void do_test(iosr_engine *e, iosr_conn *c, uint32_t seq, const iosr_m_test *m) {
  if (c->role != IOSR_ROLE_CONTROL) return malformed(e, c, seq, "test hook on an app connection");
  if (!e->set.test_hooks) {
    iosr_conn_reply(e, c, seq, EPERM, 0, "test hooks are off (start with test_hooks=1)");
    return;
  }
  switch (m->op) {
    case IOSR_TEST_FAIL_READS: e->fail_reads = m->arg; break;
    case IOSR_TEST_FAIL_WRITES: e->fail_writes = m->arg; break;
    case IOSR_TEST_PAUSE:
      e->sched.paused = m->arg != 0;
      if (!m->arg) iosr_engine_pump(e);
      break;
    case IOSR_TEST_HOLD_RETRIES: e->hold_retries = m->arg != 0; break;
    case IOSR_TEST_HOLD_EVENTS: iosr_engine_hold_events(e, m->arg != 0); break;
    case IOSR_TEST_DROPPER_MOVES: e->dropper_moves = m->arg != 0; break;
    default: return malformed(e, c, seq, "unknown test hook");
  }
  iosr_conn_reply(e, c, seq, 0, 0, NULL);
}

static void do_dispatch_log(iosr_engine *e, iosr_conn *c, uint32_t seq) {
  if (!e->set.test_hooks) {
    iosr_conn_reply(e, c, seq, EPERM, 0, "test hooks are off (start with test_hooks=1)");
    return;
  }
  iosr_sched *s = &e->sched;
  size_t n = (size_t)(s->log_head - s->log_tail);
  iosr_dispatch_rec *v = malloc(sizeof *v * (n ? n : 1));
  if (!v) {
    iosr_conn_reply(e, c, seq, ENOMEM, 0, "out of memory");
    return;
  }
  for (size_t i = 0; i < n; i++) v[i] = s->log[(s->log_tail + i) % IOSR_SCHED_LOG];
  s->log_tail = s->log_head;
  send_chunks(e, c, seq, v, n * sizeof *v);
  free(v);
}

void iosr_conn_idle_check(iosr_engine *e) {
  if (!iosr_engine_idle(e)) return;
  for (iosr_conn *c = e->conns; c; c = c->next)
    if (c->idle_waiting) {
      c->idle_waiting = 0;
      iosr_conn_reply(e, c, c->idle_waiter_seq, 0, 0, "idle");
    }
}

static void dispatch(iosr_engine *e, iosr_conn *c, const iosr_msg_hdr *h, const void *p, int *fds, int nfds) {
  long want = iosr_msg_expected_len(h->type);
  if (want < 0) return malformed(e, c, h->seq, "unknown message type");
  if ((long)h->len != want) return malformed(e, c, h->seq, "wrong length for its type");
  if (!c->hello_done && h->type != IOSR_M_HELLO) return malformed(e, c, h->seq, "message before hello");
  if (c->hello_done && h->type == IOSR_M_HELLO) return malformed(e, c, h->seq, "second hello");
  int fd_ok = h->type == IOSR_M_HELLO || h->type == IOSR_M_ATTACH;
  if (nfds && !fd_ok) return malformed(e, c, h->seq, "descriptors on a message that carries none");
  switch (h->type) {
    case IOSR_M_HELLO: return do_hello(e, c, h->seq, p, fds, nfds);
    case IOSR_M_ATTACH: return do_attach(e, c, h->seq, p, fds, nfds);
    case IOSR_M_REGION_ADD:
    case IOSR_M_REGION_DEL: return do_region(e, c, h->seq, h->type, p);
    case IOSR_M_DROPPED: {
      const iosr_m_dropped *d = p;
      iosr_app *a = iosr_engine_app(e, c->app);
      if (c->role != IOSR_ROLE_APP || !a) return malformed(e, c, h->seq, "drop confirmation without an app");
      if (d->err < 0 || d->err > 4095) return malformed(e, c, h->seq, "bad errno");
      iosr_drop_confirmed(e, a, d->id, d->err);
      return;
    }
    case IOSR_M_DROP_MOVED: {
      const iosr_m_drop_moved *d = p;
      iosr_app *a = iosr_engine_app(e, c->app);
      if (c->role != IOSR_ROLE_APP || !a) return malformed(e, c, h->seq, "move confirmation without an app");
      if (d->err < 0 || d->err > 4095) return malformed(e, c, h->seq, "bad errno");
      iosr_moveout_dropper_answered(e, a, d);
      return;
    }
    case IOSR_M_TRIMMED: {
      iosr_app *a = iosr_engine_app(e, c->app);
      if (c->role != IOSR_ROLE_APP || !a) return malformed(e, c, h->seq, "trim answer without an app");
      iosr_trim_answered(e, a, ((const iosr_m_trim *)p)->id);
      return;
    }
    case IOSR_M_GOODBYE: {
      iosr_app *a = iosr_engine_app(e, c->app);
      if (a) {
        a->conn = NULL;
        c->app = 0;
        iosr_engine_app_gone(e, a, "said goodbye");
      }
      iosr_conn_reply(e, c, h->seq, 0, 0, NULL);
      return;
    }
    case IOSR_M_CTL_FG: return do_fg(e, c, h->seq, p);
    case IOSR_M_CTL_RECLAIM: return do_reclaim(e, c, h->seq, p);
    case IOSR_M_CTL_SET: return do_set(e, c, h->seq, p);
    case IOSR_M_CTL_STAT_JSON: {
      iosr_buf b = {0};
      iosr_stats_json(e, &b);
      if (b.failed) iosr_conn_reply(e, c, h->seq, ENOMEM, 0, "out of memory");
      else send_chunks(e, c, h->seq, b.data, b.len);
      iosr_buf_free(&b);
      return;
    }
    case IOSR_M_CTL_APP_STATS: return do_stats(e, c, h->seq, p);
    case IOSR_M_CTL_SLOTS: return do_slots(e, c, h->seq, p);
    case IOSR_M_CTL_IDLE:
      /* exited fork children first: idle means their slots are freed too */
      iosr_engine_reap_forked(e);
      c->idle_waiting = 1;
      c->idle_waiter_seq = h->seq;
      iosr_conn_idle_check(e);
      return;
    case IOSR_M_CTL_TEST: return do_test(e, c, h->seq, p);
    case IOSR_M_CTL_DISPATCH_LOG: return do_dispatch_log(e, c, h->seq);
  }
}

void iosr_conn_readable(iosr_engine *e, iosr_conn *c) {
  static uint8_t buf[IOSR_MSG_MAX] __attribute__((aligned(8)));
  uint32_t id = c->id;
  for (int k = 0; k < 64; k++) {
    int fds[IOSR_MAX_FDS], nfds;
    long n = iosr_msg_recv(c->fd, buf, sizeof buf, fds, &nfds);
    if (n == 0) {
      iosr_conn_close(e, c);
      return;
    }
    if (n < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == EBADMSG) malformed(e, c, 0, "truncated packet or bad header");
      else iosr_conn_close(e, c);
      return;
    }
    const iosr_msg_hdr *h = (const iosr_msg_hdr *)buf;
    /* payload copied to an aligned buffer so handlers can read its fields */
    static uint64_t payload[IOSR_MSG_MAX / 8];
    memcpy(payload, buf + sizeof *h, h->len);
    dispatch(e, c, h, payload, fds, nfds);
    /* handlers set the descriptors they keep to -1; the rest are closed */
    for (int i = 0; i < nfds; i++)
      if (fds[i] >= 0) close(fds[i]);
    if (!iosr_conn_by_id(e, id)) return;
  }
}
