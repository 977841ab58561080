#include "uffd.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

static int xioctl(int fd, unsigned long req, void *arg) {
  for (;;) {
    if (ioctl(fd, req, arg) == 0) return 0;
    if (errno != EINTR) return -errno;
  }
}

/* Negotiates `want`. *got: with want 0, what the kernel offers; otherwise
 * what was asked for (the kernel reports everything it supports, not what
 * the descriptor was granted). */
static int api(int fd, uint64_t want, uint64_t *got) {
  struct uffdio_api a = {.api = UFFD_API, .features = want};
  if (ioctl(fd, UFFDIO_API, &a)) return -errno;
  *got = want ? want : a.features;
  return 0;
}

static int reopen(int user_mode_only) {
  if (user_mode_only) return (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | UFFD_USER_MODE_ONLY);
  int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
      fd = ioctl(dev, USERFAULTFD_IOC_NEW, O_CLOEXEC | O_NONBLOCK);
      close(dev);
    }
  }
  return fd;
}

int iosr_uffd_open(uint64_t *features, int *user_mode_only) {
  int fd = reopen(0);
  *user_mode_only = 0;
  if (fd < 0) {
    fd = reopen(1);
    if (fd >= 0) *user_mode_only = 1;
  }
  if (fd < 0) return errno == ENOSYS ? -ENOTSUP : -EPERM;
  /* Probe what the kernel offers (an API call with features 0 reports them),
   * then open a fresh descriptor with what we want: UFFDIO_API may be called
   * only once per descriptor. */
  uint64_t avail = 0;
  int r = api(fd, 0, &avail);
  close(fd);
  if (r) return r;
  if ((avail & IOSR_UFFD_REQUIRED) != IOSR_UFFD_REQUIRED) return -ENOTSUP;
  uint64_t want = IOSR_UFFD_REQUIRED | (avail & IOSR_UFFD_OPTIONAL);
  for (int attempt = 0; attempt < 2; attempt++) {
    fd = reopen(*user_mode_only);
    if (fd < 0) return -EPERM;
    r = api(fd, want, features);
    if (r == 0) return fd;
    close(fd);
    /* EVENT_FORK needs CAP_SYS_PTRACE: without it, regions are not inherited
     * by fork children at all (MADV_DONTFORK) rather than read as zero there */
    if (r != -EPERM || !(want & UFFD_FEATURE_EVENT_FORK)) return r;
    want &= ~(uint64_t)UFFD_FEATURE_EVENT_FORK;
  }
  return -EPERM;
}

int iosr_uffd_register(int uffd, uint64_t addr, uint64_t len) {
  struct uffdio_register r = {.range = {addr, len},
                              .mode = UFFDIO_REGISTER_MODE_MISSING | UFFDIO_REGISTER_MODE_WP};
  return xioctl(uffd, UFFDIO_REGISTER, &r);
}

int iosr_uffd_unregister(int uffd, uint64_t addr, uint64_t len) {
  struct uffdio_range r = {addr, len};
  return xioctl(uffd, UFFDIO_UNREGISTER, &r);
}

/* One UFFDIO_COPY from src, or with zero one UFFDIO_ZEROPAGE. */
static int fill_once(int uffd, int zero, uint64_t dst, const uint8_t *src, uint64_t len, int wake, uint64_t *done) {
  int r;
  int64_t got;
  if (zero != 1) { /* 0: copy, 2: copy write-protected */
    struct uffdio_copy c = {.dst = dst, .src = (uint64_t)(uintptr_t)src, .len = len,
                            .mode = (wake ? 0 : UFFDIO_COPY_MODE_DONTWAKE) | (zero == 2 ? UFFDIO_COPY_MODE_WP : 0)};
    r = ioctl(uffd, UFFDIO_COPY, &c) ? -errno : 0;
    got = c.copy;
  } else {
    struct uffdio_zeropage z = {.range = {dst, len}, .mode = wake ? 0 : UFFDIO_ZEROPAGE_MODE_DONTWAKE};
    r = ioctl(uffd, UFFDIO_ZEROPAGE, &z) ? -errno : 0;
    got = z.zeropage;
  }
  *done = r == 0 ? len : got > 0 ? (uint64_t)got : 0;
  return r;
}

/* The kernel fills inside one VMA per call: a range that leaves its first
 * VMA fails whole with ENOENT, having done nothing, and an app cuts a region
 * into several VMAs with mprotect, mlock or a partial mremap. A range that
 * gets ENOENT without progress is therefore retried in halves (page-aligned)
 * until a part fits: the result is as if each VMA had been filled in turn, a
 * boundary costing about log2(len / 4096) failed calls. ENOENT for a single
 * page means that page is in no registered VMA. */
static int fill(int uffd, int zero, uint64_t dst, const uint8_t *src, uint64_t len, int wake, uint64_t *done) {
  *done = 0;
  while (*done < len) {
    uint64_t part = len - *done, got;
    int r;
    for (;;) {
      r = fill_once(uffd, zero, dst + *done, zero == 1 ? NULL : src + *done, part, wake, &got);
      if (r != -ENOENT || got || part <= 4096) break;
      part = (part / 2 + 4095) & ~4095ull;
    }
    *done += got;
    if (r) return r;
  }
  return 0;
}

int iosr_uffd_copy(int uffd, uint64_t dst, const void *src, uint64_t len, int wake, uint64_t *done) {
  if (!src) return fill_once(uffd, 0, dst, src, len, wake, done); /* a probe: the reap check */
  return fill(uffd, 0, dst, src, len, wake, done);
}

int iosr_uffd_copy_wp(int uffd, uint64_t dst, const void *src, uint64_t len, uint64_t *done) {
  return fill(uffd, 2, dst, src, len, 1, done);
}

int iosr_uffd_zeropage(int uffd, uint64_t dst, uint64_t len, uint64_t *done) {
  return fill(uffd, 1, dst, NULL, len, 1, done);
}

int iosr_uffd_wp(int uffd, uint64_t addr, uint64_t len, int protect) {
  struct uffdio_writeprotect w = {.range = {addr, len},
                                  .mode = protect ? UFFDIO_WRITEPROTECT_MODE_WP : 0};
  return xioctl(uffd, UFFDIO_WRITEPROTECT, &w);
}

int iosr_uffd_wake(int uffd, uint64_t addr, uint64_t len) {
  struct uffdio_range r = {addr, len};
  return xioctl(uffd, UFFDIO_WAKE, &r);
}

int iosr_uffd_poison(int uffd, uint64_t addr, uint64_t len) {
  struct uffdio_poison p = {.range = {addr, len}, .mode = 0};
  return xioctl(uffd, UFFDIO_POISON, &p);
}

int iosr_uffd_move(int uffd, uint64_t dst, uint64_t src, uint64_t len, uint64_t *done) {
  *done = 0;
  while (*done < len) {
    struct uffdio_move m = {.dst = dst + *done, .src = src + *done, .len = len - *done, .mode = 0, .move = 0};
    if (ioctl(uffd, UFFDIO_MOVE, &m) == 0) {
      *done = len;
      break;
    }
    int err = errno;
    if (m.move > 0) *done += (uint64_t)m.move;
    if (err != EINTR) return -err;
  }
  return 0;
}
