/* Swap-area I/O (design note section 4): O_DIRECT reads and writes through
 * io_uring (liburing), the swap file and the buffer arena registered, every
 * request of a loop turn submitted with one io_uring_submit; or pread/pwrite
 * on worker threads where io_uring is unavailable. Completions are signalled
 * on an eventfd that the engine's epoll loop watches.
 *
 * Not thread-safe: submit/flush/reap belong to the engine thread.
 */
#ifndef IOSR_SWAPAREA_IO_H
#define IOSR_SWAPAREA_IO_H

#include <stddef.h>
#include <stdint.h>

typedef struct iosr_iocb {
  uint64_t off;   /* byte offset in the swap area, 4 KiB aligned */
  void *buf;      /* inside the arena given to iosr_io_open, 4 KiB aligned */
  uint32_t len;   /* bytes, multiple of 4 KiB */
  int write;      /* 1 write, 0 read */
  uint16_t ioprio; /* kernel I/O priority (IOPRIO_PRIO_VALUE), 0 = default */
  int res;        /* on completion: bytes done (a read stops short at the end of the area), or -errno */
  void *user;
} iosr_iocb;

typedef struct iosr_io iosr_io;

/* backend: IOSR_IO_URING (falls back to sync with a warning when io_uring
 * cannot be set up) or IOSR_IO_SYNC. depth: requests in flight at most.
 * Returns NULL with errno. */
iosr_io *iosr_io_open(int fd, int backend, unsigned depth, void *arena, size_t arena_bytes);
void iosr_io_close(iosr_io *io);
/* The eventfd to poll for completions. */
int iosr_io_eventfd(const iosr_io *io);
/* Name of the backend in use ("io_uring" or "pread"). */
const char *iosr_io_backend_name(const iosr_io *io);
/* Queues cb (at most `depth` outstanding); flush hands the queued requests to
 * the kernel in one call. 0 or -1/errno. */
int iosr_io_queue(iosr_io *io, iosr_iocb *cb);
int iosr_io_flush(iosr_io *io);
/* Collects up to max completed requests. Returns the count. Drains the
 * eventfd. */
int iosr_io_reap(iosr_io *io, iosr_iocb **out, int max);
/* Submissions the kernel has seen (io_uring_submit calls, or pread/pwrite
 * calls): the "batches" figure in the statistics. */
uint64_t iosr_io_submit_calls(const iosr_io *io);

#endif
