/* Fork mode (in-process engines; design note section 10). An app thread that
 * forks holds glibc's allocator locks while the kernel waits for the
 * userfaultfd FORK event to be read. If the engine thread, in the same
 * process, called malloc meanwhile, both would wait for each other. So the
 * forking thread's atfork prepare handler asks the engine to enter fork mode
 * and waits until it has: the engine then only reads userfaultfd messages into
 * a static buffer (no malloc, no stdio) until the parent handler ends the mode,
 * and handles them afterwards, in order.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <stdlib.h>
#include <unistd.h>

#include "engine/engine_int.h"

struct iosr_fork_buf {
  struct pollfd pf[IOSR_MAX_APPS + 1];
  uint32_t ids[IOSR_MAX_APPS + 1];
  struct {
    uint32_t app;
    struct uffd_msg m;
  } msg[IOSR_FORK_BUF];
};

/* Allocated when the engine starts: fork mode itself must not allocate. */
int iosr_fork_init(iosr_engine *e) {
  e->fork_buf = calloc(1, sizeof *e->fork_buf);
  return e->fork_buf ? 0 : -1;
}

void iosr_fork_prepare(iosr_engine *e) {
  __atomic_store_n(&e->fork_req, 1, __ATOMIC_RELEASE); /* read by the engine loop */
  uint64_t one = 1, v;
  ssize_t r = write(e->wake_fd, &one, sizeof one);
  (void)r;
  while (read(e->fork_ack_fd, &v, sizeof v) < 0 && errno == EINTR) {
  }
}

void iosr_fork_parent(iosr_engine *e) {
  __atomic_store_n(&e->fork_req, 0, __ATOMIC_RELEASE);
  uint64_t one = 1;
  ssize_t r = write(e->wake_fd, &one, sizeof one);
  (void)r;
}

void iosr_fork_mode(iosr_engine *e) {
  struct pollfd *pf = e->fork_buf->pf;
  uint32_t *ids = e->fork_buf->ids;
  __typeof__(e->fork_buf->msg[0]) *fbuf = e->fork_buf->msg;
  uint64_t one = 1, v;
  ssize_t w = write(e->fork_ack_fd, &one, sizeof one);
  (void)w;
  unsigned n = 0, full = 0;
  while (__atomic_load_n(&e->fork_req, __ATOMIC_ACQUIRE)) {
    unsigned np = 0;
    pf[np].fd = e->wake_fd;
    pf[np].events = POLLIN;
    np++;
    for (uint32_t i = 1; i < IOSR_MAX_APPS && !full; i++) {
      iosr_app *a = e->apps[i];
      if (!a || a->state == IOSR_APP_FREE || a->uffd < 0) continue;
      pf[np].fd = a->uffd;
      pf[np].events = POLLIN;
      ids[np] = i;
      np++;
    }
    if (poll(pf, np, 100) < 0) continue;
    if (pf[0].revents) {
      ssize_t r = read(e->wake_fd, &v, sizeof v);
      (void)r;
    }
    for (unsigned k = 1; k < np; k++) {
      if (!(pf[k].revents & POLLIN)) continue;
      while (n < IOSR_FORK_BUF) {
        ssize_t r = read(pf[k].fd, &fbuf[n].m, sizeof fbuf[n].m);
        if (r != (ssize_t)sizeof fbuf[n].m) break;
        fbuf[n++].app = ids[k];
      }
      if (n == IOSR_FORK_BUF) full = 1; /* the rest waits in the kernel queues */
    }
  }
  /* fork done: handle what was read, in order */
  for (unsigned i = 0; i < n; i++) {
    iosr_app *a = iosr_engine_app(e, fbuf[i].app);
    if (!a || a->uffd < 0) {
      if (fbuf[i].m.event == UFFD_EVENT_FORK) close((int)fbuf[i].m.arg.fork.ufd);
      continue;
    }
    struct uffd_msg *m = &fbuf[i].m;
    switch (m->event) {
      case UFFD_EVENT_PAGEFAULT:
        iosr_fault_handle(e, a, m->arg.pagefault.address, m->arg.pagefault.flags, m->arg.pagefault.feat.ptid);
        break;
      case UFFD_EVENT_REMOVE: iosr_event_remove(e, a, m->arg.remove.start, m->arg.remove.end); break;
      case UFFD_EVENT_UNMAP: iosr_event_unmap(e, a, m->arg.remove.start, m->arg.remove.end); break;
      case UFFD_EVENT_REMAP: iosr_event_remap(e, a, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len); break;
      case UFFD_EVENT_FORK: iosr_event_fork(e, a, (int)m->arg.fork.ufd); break;
    }
  }
}
