/* libiosr connection (design note sections 1, 2, 12): hello and credentials,
 * the userfaultfd handed over with SCM_RIGHTS, the agent thread (socket
 * reader) and the dropper thread (MADV_DONTNEED of written-out pages), and
 * what happens when the daemon dies: faults block, a loud message, reconnect
 * with the userfaultfd and page table, or abort when no daemon comes back.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "client/client_int.h"
#include "common/clock.h"
#include "common/env.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/sock.h"
#include "engine/engine.h"
#include "uffd/pagetable.h"
#include "uffd/uffd.h"

/* Synchronous request/reply before the agent runs (and during resume). */
static int direct_rpc(int sock, uint32_t seq, uint16_t type, const void *p, uint32_t len, const int *fds, int nfds,
                      void *out, uint32_t cap, uint16_t *rtype, int *out_fd) {
  /* A daemon that refuses the connection (out of descriptors, too many from
   * this uid) answers with seq 0 and closes, maybe before our hello is sent:
   * its answer is still there to read. */
  if (iosr_msg_send(sock, type, 0, seq, p, len, fds, nfds) && errno != EPIPE && errno != ECONNRESET) return -1;
  uint8_t buf[8192] __attribute__((aligned(8))); /* app connections carry small messages only */
  for (;;) {
    int rfds[IOSR_MAX_FDS], nr;
    long n = iosr_msg_recv(sock, buf, sizeof buf, rfds, &nr);
    if (n <= 0) {
      if (n == 0) errno = ECONNRESET;
      return -1;
    }
    const iosr_msg_hdr *h = (const iosr_msg_hdr *)buf;
    int refusal = h->type == IOSR_M_REPLY && h->seq == 0 && h->len >= sizeof(int32_t);
    if ((h->seq != seq && !refusal) || (h->type != IOSR_M_REPLY && h->type != IOSR_M_APP_STATS)) {
      for (int i = 0; i < nr; i++) close(rfds[i]);
      continue; /* a notification; ignored before the agent runs */
    }
    uint32_t k = h->len < cap ? h->len : cap;
    memcpy(out, buf + sizeof *h, k);
    *rtype = h->type;
    for (int i = 0; i < nr; i++) {
      if (i == 0 && out_fd) *out_fd = rfds[0];
      else close(rfds[i]);
    }
    if (out_fd && !nr) *out_fd = -1;
    return 0;
  }
}

int iosr_ctx_rpc(iosr_ctx *ctx, uint16_t type, const void *p, uint32_t len, const int *fds, int nfds, void *out,
                 uint32_t out_cap, int *out_fd) {
  if (ctx->pid != getpid()) {
    errno = ECHILD; /* a forked child must not talk on its parent's connection */
    return -1;
  }
  pthread_mutex_lock(&ctx->rpc_mu);
  pthread_mutex_lock(&ctx->mu);
  if (!ctx->connected) {
    pthread_mutex_unlock(&ctx->mu);
    pthread_mutex_unlock(&ctx->rpc_mu);
    errno = ENOTCONN;
    return -1;
  }
  uint32_t seq = ++ctx->seq;
  ctx->wait_seq = seq;
  ctx->reply_ready = 0;
  pthread_mutex_unlock(&ctx->mu);
  pthread_mutex_lock(&ctx->send_mu);
  int r = iosr_msg_send(ctx->sock, type, 0, seq, p, len, fds, nfds);
  pthread_mutex_unlock(&ctx->send_mu);
  if (r) {
    pthread_mutex_unlock(&ctx->rpc_mu);
    errno = ENOTCONN;
    return -1;
  }
  pthread_mutex_lock(&ctx->mu);
  while (!ctx->reply_ready && ctx->connected) pthread_cond_wait(&ctx->cv, &ctx->mu);
  int ok = ctx->reply_ready;
  if (ok) {
    memcpy(out, ctx->reply, ctx->reply_len < out_cap ? ctx->reply_len : out_cap);
    if (out_fd) *out_fd = ctx->reply_fd;
    else if (ctx->reply_fd >= 0) close(ctx->reply_fd);
    ctx->reply_fd = -1;
  }
  ctx->wait_seq = 0;
  pthread_mutex_unlock(&ctx->mu);
  pthread_mutex_unlock(&ctx->rpc_mu);
  if (!ok) {
    errno = ENOTCONN;
    return -1;
  }
  return 0;
}

/* ---- daemon death ---- */

static uint64_t swapped_pages(iosr_ctx *ctx) {
  off_t size = lseek(ctx->ptfd, 0, SEEK_END);
  if (size <= 0) return 0;
  uint8_t *m = mmap(NULL, (size_t)size, PROT_READ, MAP_SHARED, ctx->ptfd, 0);
  if (m == MAP_FAILED) return 0;
  const iosr_pt_hdr *h = (const iosr_pt_hdr *)m;
  const iosr_span *sp = (const iosr_span *)(m + 4096);
  uint64_t n = 0;
  for (uint32_t i = 0; h->magic == IOSR_PT_MAGIC && i < h->nspans && i < IOSR_PT_MAX_SPANS; i++) {
    if (sp[i].off + sp[i].n * sizeof(iosr_pte) > (uint64_t)size) break;
    const iosr_pte *p = (const iosr_pte *)(m + sp[i].off);
    for (uint64_t k = 0; k < sp[i].n; k++)
      n += iosr_pte_has_slot(&p[k]) && p[k].state != IOSR_PTE_CLEAN; /* a clean page is resident */
  }
  munmap(m, (size_t)size);
  return n;
}

static int try_resume(iosr_ctx *ctx) {
  int fd = iosr_sock_connect(ctx->socket_path);
  if (fd < 0) return -1;
  iosr_m_hello h;
  memset(&h, 0, sizeof h);
  h.version = IOSR_PROTO_VERSION;
  h.role = IOSR_ROLE_RESUME;
  snprintf(h.name, sizeof h.name, "%s", ctx->name);
  h.token = ctx->token;
  h.features = ctx->features | (ctx->on_trim ? IOSR_HELLO_TRIMS : 0) | (ctx->grave ? IOSR_HELLO_GRAVEYARD : 0);
  h.beacon = ctx->beacon;
  iosr_ctx_drops_hello(ctx, &h);
  /* our userfaultfd, our page table, and the forked children's descriptors
   * we kept (they cannot be served from a page table, but fail loudly) */
  int fds[IOSR_MAX_FDS] = {ctx->uffd, ctx->ptfd};
  int nfds = 2;
  pthread_mutex_lock(&ctx->mu);
  for (unsigned i = 0; i < ctx->nchildren && nfds < IOSR_MAX_FDS; i++) fds[nfds++] = ctx->children[i];
  pthread_mutex_unlock(&ctx->mu);
  iosr_m_reply r;
  uint16_t rt;
  memset(&r, 0, sizeof r);
  if (direct_rpc(fd, 1, IOSR_M_HELLO, &h, sizeof h, fds, nfds, &r, sizeof r, &rt, NULL) || r.err) {
    if (r.err) iosr_err("resume refused: %s", r.msg);
    close(fd);
    errno = r.err ? r.err : errno;
    return -1;
  }
  ctx->daemon_pid = r.daemon_pid;
  prctl(PR_SET_PTRACER, (unsigned long)r.daemon_pid, 0, 0, 0);
  pthread_mutex_lock(&ctx->send_mu);
  int old = ctx->sock;
  ctx->sock = fd;
  pthread_mutex_unlock(&ctx->send_mu);
  close(old);
  iosr_warn("app %s resumed with iosrd pid %d: %s", ctx->name, (int)r.daemon_pid, r.msg);
  return 0;
}

/* The socket closed: returns 0 when the agent may go on (resumed or regions
 * released), never returns when the pages are lost (abort). */
static int daemon_lost(iosr_ctx *ctx) {
  iosr_ctx_drops_lost(ctx);
  pthread_mutex_lock(&ctx->mu);
  int stopping = ctx->stopping;
  pthread_mutex_unlock(&ctx->mu);
  if (stopping) return -1;
  uint64_t n = swapped_pages(ctx);
  if (ctx->engine) {
    iosr_err("in-process engine stopped with %llu pages of %s swapped out", (unsigned long long)n, ctx->name);
    return -1;
  }
  if (n == 0) {
    /* nothing on the swap area: the regions go on as ordinary memory */
    pthread_mutex_lock(&ctx->reg_mu);
    for (iosr_region *r = ctx->regions; r; r = r->next)
      if (r->live) iosr_uffd_unregister(ctx->uffd, (uint64_t)(uintptr_t)r->base, r->size);
    pthread_mutex_unlock(&ctx->reg_mu);
    iosr_warn("iosrd went away; app %s had nothing swapped out, its regions continue as ordinary memory",
              ctx->name);
    return -1;
  }
  const char *ms = iosr_env("RECONNECT_MS");
  uint64_t limit = ms ? strtoull(ms, NULL, 10) : 30000;
  iosr_err("iosrd (pid %d) died with %llu pages of app %s swapped out: threads touching them wait; "
           "reconnecting for up to %llu ms",
           (int)ctx->daemon_pid, (unsigned long long)n, ctx->name, (unsigned long long)limit);
  uint64_t deadline = iosr_now_ns() + limit * 1000000ull;
  while (iosr_now_ns() < deadline) {
    if (try_resume(ctx) == 0) {
      iosr_ctx_drops_resumed(ctx);
      return 0;
    }
    pthread_mutex_lock(&ctx->mu);
    stopping = ctx->stopping;
    pthread_mutex_unlock(&ctx->mu);
    if (stopping) return -1;
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
  }
  iosr_err("iosrd did not come back within %llu ms: %llu swapped pages of app %s are unreachable; aborting "
           "rather than letting them read as zero",
           (unsigned long long)limit, (unsigned long long)swapped_pages(ctx), ctx->name);
  abort();
}

/* ---- the agent ---- */

static void *agent_main(void *arg) {
  iosr_ctx *ctx = arg;
  uint8_t buf[8192] __attribute__((aligned(8))); /* app connections carry small messages only */
  for (;;) {
    struct pollfd pf[2] = {{ctx->sock, POLLIN, 0}, {ctx->wake_pipe[0], POLLIN, 0}};
    if (poll(pf, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (pf[1].revents) break;
    int fds[IOSR_MAX_FDS], nfds;
    long n = iosr_msg_recv(ctx->sock, buf, sizeof buf, fds, &nfds);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) continue;
    if (n <= 0) {
      if (daemon_lost(ctx)) break;
      continue;
    }
    const iosr_msg_hdr *h = (const iosr_msg_hdr *)buf;
    const void *p = buf + sizeof *h;
    switch (h->type) {
      case IOSR_M_REPLY:
      case IOSR_M_APP_STATS:
        pthread_mutex_lock(&ctx->mu);
        if (h->seq && h->seq == ctx->wait_seq) {
          ctx->reply_type = h->type;
          ctx->reply_len = h->len < sizeof ctx->reply ? h->len : sizeof ctx->reply;
          memcpy(ctx->reply, p, ctx->reply_len);
          ctx->reply_fd = nfds ? fds[0] : -1;
          if (nfds) nfds = 0, fds[0] = -1;
          ctx->reply_ready = 1;
          pthread_cond_broadcast(&ctx->cv);
        }
        pthread_mutex_unlock(&ctx->mu);
        break;
      case IOSR_M_DROP: {
        if (h->len != sizeof(iosr_m_drop)) break;
        iosr_m_drop d;
        memcpy(&d, p, sizeof d);
        iosr_ctx_queue_drop(ctx, &d);
        break;
      }
      case IOSR_M_DROP_GO: {
        if (h->len != sizeof(iosr_m_drop_go)) break;
        iosr_m_drop_go g;
        memcpy(&g, p, sizeof g);
        iosr_ctx_drop_go(ctx, &g);
        break;
      }
      case IOSR_M_FG_NOTIFY:
        if (h->len == sizeof(iosr_m_fg)) {
          iosr_m_fg f;
          memcpy(&f, p, sizeof f);
          iosr_ctx_notify_fg(ctx, f.foreground);
        }
        break;
      case IOSR_M_TRIM:
        if (h->len == sizeof(iosr_m_trim)) {
          iosr_m_trim t;
          memcpy(&t, p, sizeof t);
          if (iosr_ctx_notify_trim(ctx, t.id)) iosr_trim_done(ctx, t.id); /* not asked for: nothing to wait for */
        }
        break;
      case IOSR_M_CHILD_UFFD:
        if (nfds == 1) {
          pthread_mutex_lock(&ctx->mu);
          if (ctx->nchildren < IOSR_MAX_CHILDREN) {
            ctx->children[ctx->nchildren++] = fds[0];
            nfds = 0;
          }
          pthread_mutex_unlock(&ctx->mu);
        }
        break;
      default: break;
    }
    for (int i = 0; i < nfds; i++)
      if (fds[i] >= 0) close(fds[i]);
  }
  return NULL;
}

/* ---- connect / disconnect ---- */

static void ctx_free(iosr_ctx *ctx) {
  iosr_ctx_beacon_close(ctx);
  if (ctx->sock >= 0) close(ctx->sock);
  if (ctx->uffd >= 0) close(ctx->uffd);
  if (ctx->ptfd >= 0) close(ctx->ptfd);
  if (ctx->pagemap_fd >= 0) close(ctx->pagemap_fd);
  if (ctx->wake_pipe[0] >= 0) close(ctx->wake_pipe[0]);
  if (ctx->wake_pipe[1] >= 0) close(ctx->wake_pipe[1]);
  for (unsigned i = 0; i < ctx->nchildren; i++) close(ctx->children[i]);
  munmap(ctx, sizeof *ctx);
}

iosr_ctx *iosr_connect(const iosr_connect_opts *opts) {
  iosr_connect_opts o = {0};
  if (opts) o = *opts;
  const char *name = o.app_name ? o.app_name : iosr_env("APP");
  if (name && strlen(name) >= IOSR_NAME_MAX) {
    /* refused rather than cut: a cut name could be another app's */
    iosr_err("app name \"%.20s...\" has %zu characters; at most %u are allowed", name, strlen(name),
             IOSR_NAME_MAX - 1);
    errno = EINVAL;
    return NULL;
  }
  char env_err[256];
  if (iosr_env_check(env_err, sizeof env_err)) {
    iosr_err("%s", env_err);
    errno = EINVAL;
    return NULL;
  }
  iosr_ctx *ctx = mmap(NULL, sizeof *ctx, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (ctx == MAP_FAILED) return NULL;
  ctx->sock = ctx->uffd = ctx->ptfd = -1;
  ctx->pagemap_fd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  ctx->wake_pipe[0] = ctx->wake_pipe[1] = -1;
  ctx->reply_fd = -1;
  ctx->pid = getpid();
  ctx->engine = o.engine;
  ctx->on_fg = o.on_foreground;
  ctx->on_trim = o.on_trim;
  ctx->arg = o.arg;
  pthread_mutex_init(&ctx->send_mu, NULL);
  pthread_mutex_init(&ctx->rpc_mu, NULL);
  pthread_mutex_init(&ctx->mu, NULL);
  pthread_mutex_init(&ctx->reg_mu, NULL);
  pthread_cond_init(&ctx->cv, NULL);
  if (name) snprintf(ctx->name, sizeof ctx->name, "%s", name);
  else snprintf(ctx->name, sizeof ctx->name, "%.32s-%d", program_invocation_short_name, (int)ctx->pid);
  int err = 0;
  if (o.engine) {
    ctx->sock = iosr_engine_connect_fd(o.engine);
  } else {
    char def[108];
    const char *path = o.socket_path ? o.socket_path : iosr_default_socket(def, sizeof def);
    snprintf(ctx->socket_path, sizeof ctx->socket_path, "%s", path);
    ctx->sock = iosr_sock_connect(path);
  }
  if (ctx->sock < 0) {
    err = errno;
    goto fail;
  }
  /* 1. hello: the daemon checks our credentials */
  iosr_m_hello h;
  memset(&h, 0, sizeof h);
  h.version = IOSR_PROTO_VERSION;
  h.role = IOSR_ROLE_APP;
  snprintf(h.name, sizeof h.name, "%s", ctx->name);
  iosr_m_reply r;
  uint16_t rt;
  memset(&r, 0, sizeof r);
  if (direct_rpc(ctx->sock, ++ctx->seq, IOSR_M_HELLO, &h, sizeof h, NULL, 0, &r, sizeof r, &rt, NULL)) {
    err = errno == ECONNRESET ? EPROTO : errno;
    goto fail;
  }
  if (r.err) {
    err = r.err;
    if (r.err != EACCES) iosr_warn("connect refused: %s", r.msg);
    goto fail;
  }
  ctx->token = r.value;
  ctx->daemon_pid = r.daemon_pid;
  /* 2. our userfaultfd, for the daemon to serve */
  int ufd = iosr_uffd_open(&ctx->features, &ctx->user_mode_only);
  if (ufd < 0) {
    err = -ufd;
    goto fail;
  }
  ctx->uffd = ufd;
  if (ctx->user_mode_only)
    iosr_warn("userfaultfd limited to user-mode faults (vm.unprivileged_userfaultfd=0 and no access to "
              "/dev/userfaultfd): system calls writing into swapped-out region pages fail with EFAULT");
  if (!o.engine) prctl(PR_SET_PTRACER, (unsigned long)ctx->daemon_pid, 0, 0, 0);
  ctx->beacon = iosr_ctx_beacon_open(ufd, &ctx->grave);
  uint32_t aflags = (o.on_trim ? IOSR_ATTACH_TRIMS : 0) | (ctx->grave ? IOSR_ATTACH_GRAVEYARD : 0);
  iosr_m_attach at = {ctx->features, (uint32_t)ctx->user_mode_only, aflags, ctx->beacon};
  memset(&r, 0, sizeof r);
  if (direct_rpc(ctx->sock, ++ctx->seq, IOSR_M_ATTACH, &at, sizeof at, &ufd, 1, &r, sizeof r, &rt, &ctx->ptfd)) {
    err = EPROTO;
    goto fail;
  }
  if (r.err || ctx->ptfd < 0) {
    err = r.err ? r.err : EPROTO;
    goto fail;
  }
  ctx->app_id = r.client_id;
  ctx->connected = 1;
  /* 3. the agent and the dropper */
  if (pipe2(ctx->wake_pipe, O_CLOEXEC)) {
    err = errno;
    goto fail;
  }
  if (pthread_create(&ctx->agent, NULL, agent_main, ctx)) {
    err = EAGAIN;
    goto fail;
  }
  if (pthread_create(&ctx->dropper, NULL, iosr_ctx_dropper_main, ctx)) {
    ssize_t w = write(ctx->wake_pipe[1], "x", 1);
    (void)w;
    pthread_join(ctx->agent, NULL);
    err = EAGAIN;
    goto fail;
  }
  if (iosr_ctx_notifier_start(ctx)) {
    ssize_t w = write(ctx->wake_pipe[1], "x", 1);
    (void)w;
    pthread_mutex_lock(&ctx->mu);
    ctx->stopping = 1;
    pthread_cond_broadcast(&ctx->cv);
    pthread_mutex_unlock(&ctx->mu);
    pthread_join(ctx->agent, NULL);
    pthread_join(ctx->dropper, NULL);
    err = EAGAIN;
    goto fail;
  }
  ctx->threads_started = 1;
  return ctx;
fail:
  ctx_free(ctx);
  errno = err ? err : EPROTO;
  return NULL;
}

int iosr_disconnect(iosr_ctx *ctx) {
  if (!ctx) {
    errno = EINVAL;
    return -1;
  }
  if (ctx->pid != getpid()) {
    errno = ECHILD;
    return -1;
  }
  for (;;) {
    pthread_mutex_lock(&ctx->reg_mu);
    iosr_region *r = ctx->regions;
    while (r && !r->live) r = r->next;
    pthread_mutex_unlock(&ctx->reg_mu);
    if (!r) break;
    iosr_region_destroy(r);
  }
  iosr_ctx_drain_drops(ctx); /* graveyard discards (design note section 3, "Moved out") */
  iosr_m_reply rep;
  iosr_ctx_rpc(ctx, IOSR_M_GOODBYE, NULL, 0, NULL, 0, &rep, sizeof rep, NULL);
  pthread_mutex_lock(&ctx->mu);
  ctx->stopping = 1;
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
  if (ctx->threads_started) {
    ssize_t w = write(ctx->wake_pipe[1], "x", 1);
    (void)w;
    pthread_join(ctx->agent, NULL);
    pthread_join(ctx->dropper, NULL);
    iosr_ctx_notifier_stop(ctx);
  }
  /* region memory is gone, so closing the userfaultfd cannot expose anything */
  ctx_free(ctx);
  return 0;
}

int iosr_set_foreground(iosr_ctx *ctx) {
  iosr_m_app m;
  memset(&m, 0, sizeof m);
  iosr_m_reply r;
  if (iosr_ctx_rpc(ctx, IOSR_M_CTL_FG, &m, sizeof m, NULL, 0, &r, sizeof r, NULL)) return -1;
  if (r.err) {
    errno = r.err;
    return -1;
  }
  return 0;
}

int iosr_trim_done(iosr_ctx *ctx, uint64_t id) {
  if (ctx->pid != getpid()) {
    errno = ECHILD;
    return -1;
  }
  iosr_m_trim t = {id};
  pthread_mutex_lock(&ctx->send_mu);
  int r = iosr_msg_send(ctx->sock, IOSR_M_TRIMMED, 0, 0, &t, sizeof t, NULL, 0);
  pthread_mutex_unlock(&ctx->send_mu);
  if (r) errno = ENOTCONN;
  return r ? -1 : 0;
}

int iosr_stats(iosr_ctx *ctx, iosr_app_stats *out) {
  iosr_m_app m;
  memset(&m, 0, sizeof m);
  iosr_m_app_stats r;
  if (iosr_ctx_rpc(ctx, IOSR_M_CTL_APP_STATS, &m, sizeof m, NULL, 0, &r, sizeof r, NULL)) return -1;
  if (r.err) {
    errno = r.err;
    return -1;
  }
  *out = r.st;
  return 0;
}
