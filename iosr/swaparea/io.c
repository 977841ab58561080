#include "io.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"
#include "common/opts.h"

#ifdef IOSR_HAVE_URING
#include <liburing.h>
#endif

struct iosr_io {
  int fd, efd, backend;
  unsigned depth;
  uint8_t *arena;
  size_t arena_bytes;
  uint64_t submit_calls;
#ifdef IOSR_HAVE_URING
  struct io_uring ring;
  int fixed_file, fixed_buf;
  unsigned queued;
#endif
  /* sync backend */
  pthread_t *workers;
  unsigned nworkers;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  iosr_iocb **todo, **done;
  unsigned todo_n, done_n, cap;
  int stop;
};

uint64_t iosr_io_submit_calls(const iosr_io *io) { return io->submit_calls; }
int iosr_io_eventfd(const iosr_io *io) { return io->efd; }
const char *iosr_io_backend_name(const iosr_io *io) {
  return io->backend == IOSR_IO_URING ? "io_uring" : "pread";
}

static void *worker(void *arg) {
  iosr_io *io = arg;
  pthread_mutex_lock(&io->mu);
  for (;;) {
    while (!io->stop && io->todo_n == 0) pthread_cond_wait(&io->cv, &io->mu);
    if (io->stop) break;
    iosr_iocb *cb = io->todo[0];
    memmove(io->todo, io->todo + 1, sizeof(*io->todo) * --io->todo_n);
    io->submit_calls++;
    pthread_mutex_unlock(&io->mu);
    if (cb->ioprio) syscall(SYS_ioprio_set, 1 /* IOPRIO_WHO_PROCESS */, 0, (int)cb->ioprio);
    size_t done = 0;
    int res = 0;
    while (done < cb->len) {
      ssize_t n = cb->write ? pwrite(io->fd, (char *)cb->buf + done, cb->len - done, (off_t)(cb->off + done))
                            : pread(io->fd, (char *)cb->buf + done, cb->len - done, (off_t)(cb->off + done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 || (n == 0 && cb->write)) {
        res = n < 0 ? -errno : -EIO;
        break;
      }
      if (n == 0) break; /* a read at the end of the area: short */
      done += (size_t)n;
    }
    cb->res = res ? res : (int)done;
    pthread_mutex_lock(&io->mu);
    io->done[io->done_n++] = cb;
    uint64_t one = 1;
    ssize_t w = write(io->efd, &one, sizeof one);
    (void)w;
  }
  pthread_mutex_unlock(&io->mu);
  return NULL;
}

static int sync_open(iosr_io *io) {
  io->backend = IOSR_IO_SYNC;
  io->cap = io->depth;
  io->todo = calloc(io->cap, sizeof *io->todo);
  io->done = calloc(io->cap, sizeof *io->done);
  io->nworkers = io->depth < 4 ? io->depth : 4;
  io->workers = calloc(io->nworkers, sizeof *io->workers);
  if (!io->todo || !io->done || !io->workers) return -1;
  pthread_mutex_init(&io->mu, NULL);
  pthread_cond_init(&io->cv, NULL);
  for (unsigned i = 0; i < io->nworkers; i++)
    if (pthread_create(&io->workers[i], NULL, worker, io)) {
      io->nworkers = i;
      return -1;
    }
  return 0;
}

iosr_io *iosr_io_open(int fd, int backend, unsigned depth, void *arena, size_t arena_bytes) {
  iosr_io *io = calloc(1, sizeof *io);
  if (!io) return NULL;
  io->fd = fd;
  io->depth = depth;
  io->arena = arena;
  io->arena_bytes = arena_bytes;
  io->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (io->efd < 0) {
    free(io);
    return NULL;
  }
#ifdef IOSR_HAVE_URING
  if (backend == IOSR_IO_URING) {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    int r = io_uring_queue_init_params(depth * 2, &io->ring, &p);
    if (r == 0) {
      io->backend = IOSR_IO_URING;
      if (io_uring_register_files(&io->ring, &fd, 1) == 0) io->fixed_file = 1;
      struct iovec iov = {arena, arena_bytes};
      if (io_uring_register_buffers(&io->ring, &iov, 1) == 0) io->fixed_buf = 1;
      if (io_uring_register_eventfd(&io->ring, io->efd) == 0) return io;
      io_uring_queue_exit(&io->ring);
      r = -errno;
    }
    iosr_warn("io_uring unavailable (%s); using pread/pwrite on worker threads", strerror(-r));
  }
#else
  if (backend == IOSR_IO_URING) iosr_warn("built without liburing; using pread/pwrite on worker threads");
#endif
  if (sync_open(io)) {
    iosr_io_close(io);
    errno = ENOMEM;
    return NULL;
  }
  return io;
}

void iosr_io_close(iosr_io *io) {
  if (!io) return;
#ifdef IOSR_HAVE_URING
  if (io->backend == IOSR_IO_URING) io_uring_queue_exit(&io->ring);
#endif
  if (io->workers) {
    pthread_mutex_lock(&io->mu);
    io->stop = 1;
    pthread_cond_broadcast(&io->cv);
    pthread_mutex_unlock(&io->mu);
    for (unsigned i = 0; i < io->nworkers; i++) pthread_join(io->workers[i], NULL);
  }
  free(io->workers);
  free(io->todo);
  free(io->done);
  close(io->efd);
  free(io);
}

int iosr_io_queue(iosr_io *io, iosr_iocb *cb) {
#ifdef IOSR_HAVE_URING
  if (io->backend == IOSR_IO_URING) {
    struct io_uring_sqe *sqe = io_uring_get_sqe(&io->ring);
    if (!sqe) {
      if (iosr_io_flush(io)) return -1;
      sqe = io_uring_get_sqe(&io->ring);
      if (!sqe) {
        errno = EBUSY;
        return -1;
      }
    }
    int f = io->fixed_file ? 0 : io->fd;
    uint8_t *b = cb->buf;
    int in_arena = b >= io->arena && b + cb->len <= io->arena + io->arena_bytes;
    if (io->fixed_buf && in_arena) {
      if (cb->write) io_uring_prep_write_fixed(sqe, f, cb->buf, cb->len, cb->off, 0);
      else io_uring_prep_read_fixed(sqe, f, cb->buf, cb->len, cb->off, 0);
    } else {
      if (cb->write) io_uring_prep_write(sqe, f, cb->buf, cb->len, cb->off);
      else io_uring_prep_read(sqe, f, cb->buf, cb->len, cb->off);
    }
    if (io->fixed_file) sqe->flags |= IOSQE_FIXED_FILE;
    sqe->ioprio = cb->ioprio;
    io_uring_sqe_set_data(sqe, cb);
    io->queued++;
    return 0;
  }
#endif
  pthread_mutex_lock(&io->mu);
  if (io->todo_n + io->done_n >= io->cap) {
    /* grow: the engine bounds requests in flight, this is only a safety net */
    unsigned nc = io->cap * 2;
    iosr_iocb **t = realloc(io->todo, nc * sizeof *t), **d = t ? realloc(io->done, nc * sizeof *d) : NULL;
    if (t) io->todo = t;
    if (!t || !d) {
      pthread_mutex_unlock(&io->mu);
      errno = ENOMEM;
      return -1;
    }
    io->done = d;
    io->cap = nc;
  }
  io->todo[io->todo_n++] = cb;
  pthread_cond_signal(&io->cv);
  pthread_mutex_unlock(&io->mu);
  return 0;
}

int iosr_io_flush(iosr_io *io) {
#ifdef IOSR_HAVE_URING
  if (io->backend == IOSR_IO_URING) {
    if (!io->queued) return 0;
    for (;;) {
      int r = io_uring_submit(&io->ring);
      if (r >= 0) {
        io->submit_calls++;
        io->queued = 0;
        return 0;
      }
      if (r != -EINTR && r != -EAGAIN && r != -EBUSY) {
        errno = -r;
        return -1;
      }
      /* EAGAIN/EBUSY: completion queue pressure; reaping happens in the loop */
      return 0;
    }
  }
#endif
  (void)io;
  return 0;
}

int iosr_io_reap(iosr_io *io, iosr_iocb **out, int max) {
  uint64_t cnt;
  ssize_t r = read(io->efd, &cnt, sizeof cnt);
  (void)r;
#ifdef IOSR_HAVE_URING
  if (io->backend == IOSR_IO_URING) {
    int n = 0;
    struct io_uring_cqe *cqe;
    while (n < max && io_uring_peek_cqe(&io->ring, &cqe) == 0) {
      iosr_iocb *cb = io_uring_cqe_get_data(cqe);
      cb->res = cqe->res;
      io_uring_cqe_seen(&io->ring, cqe);
      if (cb->res >= 0 && (uint32_t)cb->res < cb->len) {
        /* short transfer: finish it synchronously (rare: end of device) */
        size_t done = (size_t)cb->res;
        while (done < cb->len) {
          ssize_t k = cb->write ? pwrite(io->fd, (char *)cb->buf + done, cb->len - done, (off_t)(cb->off + done))
                                : pread(io->fd, (char *)cb->buf + done, cb->len - done, (off_t)(cb->off + done));
          if (k < 0 || (k == 0 && cb->write)) {
            cb->res = k < 0 ? -errno : -EIO;
            break;
          }
          if (k == 0) break; /* a read at the end of the area: short */
          done += (size_t)k;
        }
        if (cb->res >= 0) cb->res = (int)done;
      }
      out[n++] = cb;
    }
    if (n == max) {
      uint64_t one = 1; /* more may remain: keep the eventfd readable */
      ssize_t w = write(io->efd, &one, sizeof one);
      (void)w;
    }
    return n;
  }
#endif
  pthread_mutex_lock(&io->mu);
  int n = 0;
  while (n < max && io->done_n) out[n++] = io->done[--io->done_n];
  if (io->done_n) {
    uint64_t one = 1;
    ssize_t w = write(io->efd, &one, sizeof one);
    (void)w;
  }
  pthread_mutex_unlock(&io->mu);
  return n;
}
