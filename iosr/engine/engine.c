/* The engine's event loop (design note section 1): one thread, epoll over
 * the listening socket, client sockets, client userfaultfds, client pidfds,
 * the I/O completion eventfd and a timer. Owns every piece of engine state.
 */
#define _GNU_SOURCE
#include "engine/engine.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"

/* Pending sockets from other threads (in-process clients) and stop requests. */
static pthread_mutex_t add_mu = PTHREAD_MUTEX_INITIALIZER;
typedef struct pending_fd {
  struct pending_fd *next;
  iosr_engine *e;
  int fd;
} pending_fd;
static pending_fd *pending;

int iosr_engine_watch(iosr_engine *e, int fd, uint64_t tag) {
  struct epoll_event ev = {.events = EPOLLIN, .data.u64 = tag};
  return epoll_ctl(e->epfd, EPOLL_CTL_ADD, fd, &ev);
}

void iosr_engine_unwatch(iosr_engine *e, int fd) {
  if (fd >= 0) epoll_ctl(e->epfd, EPOLL_CTL_DEL, fd, NULL);
}

void iosr_engine_hold_events(iosr_engine *e, int on) {
  e->events_held = on;
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (!a || a->uffd < 0 || (!on && a->hold_drop)) continue;
    if (on) iosr_engine_unwatch(e, a->uffd);
    else iosr_engine_watch(e, a->uffd, iosr_tag(IOSR_TAG_UFFD, i)); /* EEXIST: watched already */
  }
}

iosr_app *iosr_engine_app(iosr_engine *e, uint32_t id) {
  if (!id || id >= IOSR_MAX_APPS) return NULL;
  iosr_app *a = e->apps[id];
  return a && a->state != IOSR_APP_FREE ? a : NULL;
}

uint32_t iosr_engine_new_app_id(iosr_engine *e) {
  for (uint32_t i = 0; i < IOSR_MAX_APPS - 1; i++) {
    uint32_t id = 1 + (e->next_app_hint + i) % (IOSR_MAX_APPS - 1);
    if (!e->apps[id]) {
      e->next_app_hint = id;
      return id;
    }
  }
  return 0;
}

/* The kernel I/O priority of a request of scheduler class cls (IOSR_CLS_*). */
static uint16_t ioprio(const iosr_engine *e, int cls) {
  if (e->set.sched == IOSR_SCHED_FIFO) return 0;
  switch (cls) {
    case IOSR_CLS_FG_FAULT: return e->has_rt_ioprio ? (1u << 13 | 4) : (2u << 13 | 0);
    case IOSR_CLS_BG_FAULT: return 2u << 13 | 2;
    case IOSR_CLS_READAHEAD: return 2u << 13 | 4;
    default: return e->set.write_ioprio_idle ? (uint16_t)(3u << 13) : (uint16_t)(2u << 13 | 7);
  }
}

void iosr_engine_pump(iosr_engine *e) {
  uint64_t now = iosr_now_ns();
  iosr_sreq *sr;
  int any = 0;
  while ((sr = iosr_sched_next(&e->sched, now))) {
    iosr_req *r = (iosr_req *)sr;
    if (r->kind == IOSR_REQ_READ && !r->buf) {
      r->buf_bytes = (size_t)r->s.npages * 4096;
      r->buf = iosr_bufpool_alloc(&e->bufs, r->buf_bytes);
      if (!r->buf) {
        iosr_debug("buffer arena exhausted (%llu pages used)", (unsigned long long)e->bufs.used_pages);
        /* arena exhausted: undo the dispatch, retry after completions */
        iosr_sched_done(&e->sched, sr);
        iosr_sched_push(&e->sched, sr, sr->enq_ns);
        e->sched.dispatched--;
        e->sched.log_head--;
        break;
      }
    }
    r->dispatched = 1;
    iosr_debug("dispatch %s slot %llu n %u cls %u", r->kind == IOSR_REQ_READ ? "read" : "write",
               (unsigned long long)r->s.slot, r->s.npages, r->s.cls);
    r->cb.off = iosr_slot_offset(r->s.slot);
    r->cb.buf = r->buf;
    r->cb.len = r->s.npages * 4096;
    r->cb.write = r->kind == IOSR_REQ_WRITE;
    r->cb.ioprio = ioprio(e, r->s.cls);
    r->cb.user = r;
    if (iosr_io_queue(e->io, &r->cb)) iosr_die("cannot queue swap I/O: %s", strerror(errno));
    any = 1;
  }
  if (any && iosr_io_flush(e->io)) iosr_err("io_uring submit failed: %s", strerror(errno));
}

static void io_completions(iosr_engine *e) {
  iosr_iocb *cbs[128];
  int n;
  while ((n = iosr_io_reap(e->io, cbs, 128)) > 0) {
    for (int i = 0; i < n; i++) {
      iosr_req *r = cbs[i]->user;
      if (r->kind == IOSR_REQ_READ) iosr_swapin_complete(e, r);
      else iosr_swapout_write_done(e, r);
    }
    if (n < 128) break;
  }
}

int iosr_engine_idle(const iosr_engine *e) {
  return !e->reqs && !iosr_swapout_inflight(e) && !e->jobs && !e->retries && !e->install_retry && !e->held;
}

void iosr_engine_notify_fg(iosr_engine *e, iosr_app *a, int fg) {
  if (!a->conn) return;
  iosr_m_fg m = {fg, 0};
  iosr_conn_send(e, a->conn, IOSR_M_FG_NOTIFY, 0, 0, &m, sizeof m, NULL, 0);
}

iosr_app *iosr_engine_find_app(iosr_engine *e, const char *sel) {
  if (!sel || !*sel) return NULL;
  if (sel[0] == '#') {
    char *end;
    if (!strncmp(sel, "#id:", 4)) {
      unsigned long id = strtoul(sel + 4, &end, 10);
      return *end || id >= IOSR_MAX_APPS ? NULL : iosr_engine_app(e, (uint32_t)id);
    }
    long pid = strtol(sel + 1, &end, 10);
    if (*end || pid <= 0) return NULL;
    for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
      iosr_app *a = iosr_engine_app(e, i);
      if (a && a->state != IOSR_APP_DEAD && !a->forked && a->pid == pid) return a;
    }
    return NULL;
  }
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (a && a->state != IOSR_APP_DEAD && !strcmp(a->name, sel)) return a;
  }
  return NULL;
}

/* Frees a dead app once nothing in flight refers to it. */
void iosr_engine_maybe_finish_app(iosr_engine *e, iosr_app *a) {
  if (a->state != IOSR_APP_DEAD || a->inflight) return;
  for (iosr_batch *b = e->batches; b; b = b->next)
    if (b->app == a->id) return;
  if (a->forked) e->nforked--;
  iosr_pt_destroy(&a->pt);
  iosr_extmap_destroy(&a->ext);
  iosr_ra_region_free_all(a);
  e->apps[a->id] = NULL;
  free(a);
}

static void release_all(iosr_engine *e, iosr_app *a) {
  for (uint32_t i = 0; a->pt.hdr && i < a->pt.hdr->nspans; i++) {
    iosr_span *sp = &a->pt.spans[i];
    for (uint64_t v = sp->start; v < sp->start + sp->n; v++) iosr_page_release(e, a, iosr_pt_pte(&a->pt, sp, v));
  }
}

void iosr_engine_app_gone(iosr_engine *e, iosr_app *a, const char *why) {
  if (a->state == IOSR_APP_DEAD || a->state == IOSR_APP_FREE) return;
  iosr_info("app %s (pid %d) %s: freeing its %llu swapped pages", a->name, (int)a->pid, why,
            (unsigned long long)a->swapped);
  iosr_swapout_forget_app(e, a);
  a->hold_drop = 0;
  release_all(e, a);
  if (e->fg_app == a->id) {
    e->fg_app = 0;
    iosr_reclaim_fg_changed(e, NULL, NULL); /* a dying app is expected to need nothing */
  }
  a->state = IOSR_APP_DEAD;
  if (a->uffd >= 0) {
    iosr_engine_unwatch(e, a->uffd);
    close(a->uffd);
    a->uffd = -1;
  }
  if (a->pidfd >= 0) {
    iosr_engine_unwatch(e, a->pidfd);
    close(a->pidfd);
    a->pidfd = -1;
  }
  if (a->conn) {
    iosr_conn *c = a->conn;
    a->conn = NULL;
    c->app = 0;
    iosr_conn_close(e, c);
  }
  iosr_reclaim_forget_app(e, a->id);
  iosr_engine_maybe_finish_app(e, a);
}

/* Forked children have no connection: they are reaped when their memory is
 * gone, which a copy to an unmapped address tells (ESRCH instead of ENOENT).
 * The timer runs this once a second; a wait for idle runs it at once, so that
 * a child that has exited holds no slots when the waiter looks. */
void iosr_engine_reap_forked(iosr_engine *e) {
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (!a || !a->forked || a->state != IOSR_APP_ACTIVE) continue;
    uint64_t done;
    /* source NULL: even if the child had a registered page there, the copy
     * faults on the source (EFAULT) before mapping anything */
    int r = iosr_uffd_copy(a->uffd, 0x10000, NULL, 4096, 0, &done);
    iosr_debug("reap probe of %s: %d", a->name, r);
    if (r == -ESRCH) iosr_engine_app_gone(e, a, "(forked child) exited");
  }
}

static void handle_wake(iosr_engine *e) {
  uint64_t v;
  ssize_t r = read(e->wake_fd, &v, sizeof v);
  (void)r;
  pthread_mutex_lock(&add_mu);
  pending_fd **pp = &pending;
  while (*pp) {
    pending_fd *p = *pp;
    if (p->e == e) {
      *pp = p->next;
      if (!iosr_conn_add(e, p->fd)) close(p->fd);
      free(p);
    } else {
      pp = &p->next;
    }
  }
  pthread_mutex_unlock(&add_mu);
}

int iosr_engine_add_fd(iosr_engine *e, int fd) {
  pending_fd *p = malloc(sizeof *p);
  if (!p) return -1;
  p->e = e;
  p->fd = fd;
  pthread_mutex_lock(&add_mu);
  p->next = pending;
  pending = p;
  pthread_mutex_unlock(&add_mu);
  uint64_t one = 1;
  return write(e->wake_fd, &one, sizeof one) == sizeof one ? 0 : -1;
}

void iosr_engine_request_stop(iosr_engine *e, int drain) {
  /* bit 0 stop, bit 1 drain first; an atomic store: another thread or a
   * signal handler asks, the loop reads */
  __atomic_store_n(&e->stop, drain ? 3 : 1, __ATOMIC_RELEASE);
  uint64_t one = 1;
  ssize_t r = write(e->wake_fd, &one, sizeof one);
  (void)r;
}

unsigned iosr_engine_clients(iosr_engine *e) {
  return __atomic_load_n(&e->nconns, __ATOMIC_ACQUIRE); /* pairs with the updates in conn.c */
}

/* The timer fires at the earliest absolute deadline: a held write's bound,
 * the end of the restart grace period or of a budget job's back-off, the
 * next check for exited forked children. Deadlines are absolute so that
 * frequent loop turns never push them back. */
static void arm_timer(iosr_engine *e, uint64_t admit_due) {
  uint64_t now = iosr_now_ns(), due = admit_due;
  int t = iosr_sched_timeout_ms(&e->sched, now);
  if (t >= 0 && (!due || now + (uint64_t)(t ? t : 1) * 1000000u < due)) due = now + (uint64_t)(t ? t : 1) * 1000000u;
  if (e->grace_until_ns > now && (!due || e->grace_until_ns < due)) due = e->grace_until_ns;
  if (e->stall_due_ns && (!due || e->stall_due_ns < due)) due = e->stall_due_ns;
  /* the budget is looked at again when a failed budget job's back-off ends,
   * whether or not anything else happens by then */
  if (e->set.budget && e->budget_backoff_ns > now && (!due || e->budget_backoff_ns < due)) due = e->budget_backoff_ns;
  if (e->nforked) {
    if (!e->next_reap_ns) e->next_reap_ns = now + 1000000000ull;
    if (!due || e->next_reap_ns < due) due = e->next_reap_ns;
  } else {
    e->next_reap_ns = 0;
  }
  struct itimerspec its = {0};
  if (due) {
    its.it_value.tv_sec = (time_t)(due / 1000000000u);
    its.it_value.tv_nsec = (long)(due % 1000000000u);
  }
  timerfd_settime(e->timerfd, TFD_TIMER_ABSTIME, &its, NULL);
}

static int has_rt_ioprio(void) {
  long old = syscall(SYS_ioprio_get, 1, 0);
  if (old < 0) return 0;
  if (syscall(SYS_ioprio_set, 1, 0, 1 << 13 | 4) != 0) return 0;
  syscall(SYS_ioprio_set, 1, 0, (int)old);
  return 1;
}

iosr_engine *iosr_engine_create(const char *swap_path, const char *settings, int listen_fd, const char *role,
                               char *err, size_t cap) {
  iosr_engine *e = calloc(1, sizeof *e);
  if (!e) {
    snprintf(err, cap, "out of memory");
    errno = ENOMEM;
    return NULL;
  }
  e->role = role;
  e->epfd = e->timerfd = e->wake_fd = e->fork_ack_fd = e->spare_fd = -1;
  e->listen_fd = listen_fd;
  e->area.fd = -1;
  if (iosr_settings_init(&e->set, err, cap) || iosr_settings_parse(&e->set, settings, err, cap)) goto fail;
  if (e->set.ra_init > e->set.ra_max) e->set.ra_init = e->set.ra_max;
  if (iosr_budget_check(NULL, e->set.budget, err, cap)) goto fail;
  if (iosr_swap_open(&e->area, swap_path, e->set.direct, err, cap)) goto fail;
  if (iosr_slotmap_init(&e->slots, e->area.hdr.slots)) goto fail_mem;
  if (iosr_bufpool_init(&e->bufs, e->set.buffer_bytes, e->set.max_io)) goto fail_mem;
  e->io = iosr_io_open(e->area.fd, e->set.io, e->set.queue_depth, e->bufs.base, e->bufs.bytes);
  if (!e->io) goto fail_mem;
  if (iosr_probe_init(e) || iosr_fork_init(e)) goto fail_mem;
  iosr_sched_init(&e->sched, e->set.sched, e->set.queue_depth, e->set.write_hold_max, e->set.write_hold_ms);
  e->epfd = epoll_create1(EPOLL_CLOEXEC);
  e->timerfd = timerfd_create(CLOCK_MONOTONIC, TFD_CLOEXEC | TFD_NONBLOCK);
  e->wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  e->fork_ack_fd = eventfd(0, EFD_CLOEXEC);
  if (e->epfd < 0 || e->timerfd < 0 || e->wake_fd < 0 || e->fork_ack_fd < 0) goto fail_mem;
  iosr_engine_watch(e, iosr_io_eventfd(e->io), iosr_tag(IOSR_TAG_IO, 0));
  iosr_engine_watch(e, e->timerfd, iosr_tag(IOSR_TAG_TIMER, 0));
  iosr_engine_watch(e, e->wake_fd, iosr_tag(IOSR_TAG_WAKE, 0));
  if (listen_fd >= 0 && (iosr_engine_watch(e, listen_fd, iosr_tag(IOSR_TAG_LISTEN, 0)) || iosr_admit_init(e)))
    goto fail_mem;
  e->has_rt_ioprio = has_rt_ioprio();
  e->started_ns = iosr_now_ns();
  e->next_conn_id = 1;
  if (!e->area.was_clean) {
    e->dirty_start = 1;
    e->grace_until_ns = e->started_ns + (uint64_t)e->set.restart_grace_ms * 1000000u;
    iosr_warn("%s was not closed cleanly (a daemon died?): clients may resume; no new slots for %u ms",
              swap_path, e->set.restart_grace_ms);
  }
  return e;
fail_mem:
  snprintf(err, cap, "cannot set the engine up: %s", strerror(errno ? errno : ENOMEM));
fail: {
  int en = errno ? errno : EINVAL;
  iosr_engine_destroy(e);
  errno = en;
  return NULL;
}
}

/* Every swap-in waits on this thread (Linux serves a fault in the faulting
 * thread itself and completes its I/O in interrupt context, with no extra
 * wake-up), so it runs ahead of ordinary tasks: on a busy CPU a fault would
 * otherwise wait for another task's time slice at each of its hops. A nice
 * value raises the thread's share but not its wake-up latency (measured by
 * the evaluation: docs/design/iosr-eval.md), so the thread asks for
 * SCHED_FIFO at rt_prio (1, the lowest real-time priority, as Android's lmkd
 * does) and falls back to the nice value. The thread only runs on events
 * (epoll), and the kernel's real-time throttling bounds it; whatever is
 * forked from it starts with ordinary scheduling. Without CAP_SYS_NICE both
 * stay as they are. */
static void set_nice(const iosr_engine *e) {
  if (e->set.rt_prio) {
    struct sched_param sp = {.sched_priority = (int)e->set.rt_prio};
    if (sched_setscheduler(0, SCHED_FIFO | SCHED_RESET_ON_FORK, &sp) == 0) return;
    iosr_debug("cannot run the engine thread at SCHED_FIFO %u: %s", e->set.rt_prio, strerror(errno));
  }
  if (!e->set.nice) return;
  if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), e->set.nice))
    iosr_debug("cannot set the engine thread's nice value to %d: %s", e->set.nice, strerror(errno));
}

int iosr_engine_run(iosr_engine *e) {
  struct epoll_event evs[64];
  int draining = 0;
  set_nice(e);
  for (;;) {
    int stop = __atomic_load_n(&e->stop, __ATOMIC_ACQUIRE);
    if (stop) {
      if ((stop & 2) && !draining) {
        draining = 1;
        e->draining = 1; /* pages come back writable: nothing serves a write-protect fault after the stop */
        iosr_info("stopping: swapping every app's pages back in first");
        for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
          iosr_app *a = iosr_engine_app(e, i);
          if (a && a->uffd >= 0) iosr_swapin_all(e, a);
        }
      }
      if (!draining || iosr_engine_idle(e)) break;
    }
    /* Fork mode handles the messages it read once the fork is done (faults
     * among them: reads queued): this turn then does not wait, so that its
     * end submits them (the kernel has nothing more to say about them). */
    int forked = __atomic_load_n(&e->fork_req, __ATOMIC_ACQUIRE);
    if (forked) iosr_fork_mode(e);
    int again = 0;
    for (iosr_job *j = e->jobs; j && !again; j = j->next) again = j->again_pos < j->nagain;
    /* EAGAIN retries wait for the thread that caused the event to finish it */
    int timeout = forked ? 0 : (e->retries || e->install_retry || e->moveout_waiting || again) ? 1 : -1;
    int n = epoll_wait(e->epfd, evs, 64, timeout);
    if (n < 0 && errno != EINTR) iosr_die("epoll_wait: %s", strerror(errno));
    e->loop_turns++;
    for (int i = 0; i < n; i++) {
      uint64_t tag = evs[i].data.u64;
      int kind = (int)(tag >> 56);
      uint64_t v = tag & ((1ull << 56) - 1);
      switch (kind) {
        case IOSR_TAG_LISTEN: iosr_admit_accept(e); break;
        case IOSR_TAG_IO: io_completions(e); break;
        case IOSR_TAG_TIMER: {
          uint64_t x;
          ssize_t r = read(e->timerfd, &x, sizeof x);
          (void)r;
          uint64_t now = iosr_now_ns();
          if (e->grace_until_ns && now >= e->grace_until_ns) e->grace_until_ns = 0;
          if (e->next_reap_ns && now >= e->next_reap_ns) {
            iosr_engine_reap_forked(e);
            e->next_reap_ns = now + 1000000000ull;
          }
          break;
        }
        case IOSR_TAG_WAKE: handle_wake(e); break;
        case IOSR_TAG_CONN: {
          iosr_conn *c = iosr_conn_by_id(e, (uint32_t)v);
          if (!c) break;
          if (evs[i].events & EPOLLOUT) iosr_conn_writable(e, c);
          if ((c = iosr_conn_by_id(e, (uint32_t)v)) && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
            iosr_conn_readable(e, c);
          break;
        }
        case IOSR_TAG_UFFD: {
          iosr_app *a = iosr_engine_app(e, (uint32_t)v);
          if (a && a->uffd >= 0) iosr_fault_read_uffd(e, a);
          break;
        }
        case IOSR_TAG_PIDFD: {
          iosr_app *a = iosr_engine_app(e, (uint32_t)v);
          if (a) iosr_engine_app_gone(e, a, "exited");
          break;
        }
      }
    }
    iosr_fault_run_retries(e);
    iosr_swapin_run_install_retries(e);
    iosr_swapout_run_move_retries(e);
    iosr_swapout_set_aside_stalled(e, iosr_now_ns());
    /* a budget job starts in the turn that makes it: the turn may be the
     * last before a wait with no deadline (the apps done faulting) */
    iosr_reclaim_check_budget(e);
    iosr_reclaim_pump(e);
    iosr_budget_turn(e);
    /* everything queued in this turn (all faults read, all completions
     * handled) goes to the kernel in one submission */
    iosr_engine_pump(e);
    iosr_conn_idle_check(e);
    arm_timer(e, iosr_admit_timer(e, iosr_now_ns()));
  }
  return 0;
}

void iosr_engine_destroy(iosr_engine *e) {
  if (!e) return;
  int clean = 1;
  while (e->conns) iosr_conn_close(e, e->conns);
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = e->apps[i];
    if (!a) continue;
    if (a->swapped) clean = 0;
    if (a->uffd >= 0) close(a->uffd);
    if (a->pidfd >= 0) close(a->pidfd);
    iosr_pt_destroy(&a->pt);
    iosr_extmap_destroy(&a->ext);
    iosr_ra_region_free_all(a);
    free(a);
    e->apps[i] = NULL;
  }
  while (e->reqs) iosr_req_free(e, e->reqs);
  while (e->batches) {
    iosr_batch *b = e->batches;
    e->batches = b->next;
    free(b);
  }
  while (e->jobs) {
    iosr_job *j = e->jobs;
    e->jobs = j->next;
    free(j->cand);
    free(j->again);
    free(j);
  }
  iosr_budget_destroy(e);
  while (e->retries) {
    iosr_retry *r = e->retries;
    e->retries = r->next;
    free(r);
  }
  if (e->io) iosr_io_close(e->io);
  iosr_probe_destroy(e);
  iosr_bufpool_destroy(&e->bufs);
  iosr_slotmap_destroy(&e->slots);
  if (e->area.fd >= 0) iosr_swap_close(&e->area, clean);
  if (e->epfd >= 0) close(e->epfd);
  if (e->timerfd >= 0) close(e->timerfd);
  if (e->wake_fd >= 0) close(e->wake_fd);
  if (e->fork_ack_fd >= 0) close(e->fork_ack_fd);
  if (e->spare_fd >= 0) close(e->spare_fd);
  free(e->fork_buf);
  free(e->zero_buf);
  free(e);
}
