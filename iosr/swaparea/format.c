#define _GNU_SOURCE
#include "format.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define ERR(...) (err && cap ? (void)snprintf(err, cap, __VA_ARGS__) : (void)0)

uint32_t iosr_swap_checksum(const iosr_swap_header *h) {
  const uint8_t *p = (const uint8_t *)h;
  uint32_t x = 2166136261u;
  for (size_t i = 0; i < offsetof(iosr_swap_header, checksum); i++) x = (x ^ p[i]) * 16777619u;
  return x;
}

static int write_header(int fd, const iosr_swap_header *h) {
  void *page;
  if (posix_memalign(&page, 4096, 4096)) return -1;
  memset(page, 0, 4096);
  memcpy(page, h, sizeof *h);
  ssize_t n = pwrite(fd, page, 4096, 0);
  free(page);
  if (n != 4096) {
    if (n >= 0) errno = EIO;
    return -1;
  }
  return fdatasync(fd);
}

static int read_header_fd(int fd, iosr_swap_header *h, char *err, size_t cap) {
  void *page;
  if (posix_memalign(&page, 4096, 4096)) return -1;
  ssize_t n = pread(fd, page, 4096, 0);
  if (n != 4096) {
    free(page);
    if (n < 0) ERR("cannot read the swap header (%s)", strerror(errno));
    else ERR("not an IOSR swap area (shorter than its header)");
    errno = EINVAL;
    return -1;
  }
  memcpy(h, page, sizeof *h);
  free(page);
  if (memcmp(h->magic, IOSR_SWAP_MAGIC, 8) != 0) {
    ERR("not an IOSR swap area (no magic; make one with `iosr mkswap`)");
    errno = EINVAL;
    return -1;
  }
  if (h->checksum != iosr_swap_checksum(h)) {
    ERR("swap header checksum mismatch (corrupted header)");
    errno = EINVAL;
    return -1;
  }
  if (h->version != IOSR_SWAP_VERSION) {
    ERR("swap area version %u, this build reads version %u", h->version, IOSR_SWAP_VERSION);
    errno = EINVAL;
    return -1;
  }
  if (h->page_size != 4096 || sysconf(_SC_PAGESIZE) != 4096) {
    ERR("swap area page size %u does not match this machine's %ld", h->page_size,
        sysconf(_SC_PAGESIZE));
    errno = EINVAL;
    return -1;
  }
  if (h->slots < IOSR_SWAP_MIN_SLOTS || h->slots > (1ull << 32) - 2) {
    ERR("swap area slot count %llu out of range", (unsigned long long)h->slots);
    errno = EINVAL;
    return -1;
  }
  return 0;
}

static int dev_size(int fd, uint64_t *out) {
  struct stat st;
  if (fstat(fd, &st)) return -1;
  if (S_ISBLK(st.st_mode)) {
    uint64_t b;
    if (ioctl(fd, BLKGETSIZE64, &b)) return -1;
    *out = b;
  } else {
    *out = (uint64_t)st.st_size;
  }
  return 0;
}

static int holds_data(int fd, int is_blk, off_t size) {
  if (!is_blk) return size > 0;
  char buf[4096];
  for (off_t off = 0; off < 65536; off += (off_t)sizeof buf) {
    ssize_t n = pread(fd, buf, sizeof buf, off);
    if (n <= 0) break;
    for (ssize_t i = 0; i < n; i++)
      if (buf[i]) return 1;
  }
  return 0;
}

/* Writes zeros over [4096, size) of a regular file. fallocate leaves
 * "unwritten" extents on ext4 and xfs: the first O_DIRECT write to each then
 * converts it, a metadata update and a journal commit inside the swap-out
 * path (measured by the evaluation, docs/design/iosr-eval.md: writes held for
 * seconds behind journal flushes). Written once here, every later swap
 * write is a plain overwrite, as Linux's swap writes are (they bypass the
 * file system). 0 or -1 with errno. */
static int zero_fill(const char *path, uint64_t size) {
  const size_t chunk = 8u << 20;
  int fd = open(path, O_WRONLY | O_DIRECT | O_CLOEXEC);
  int direct = fd >= 0;
  if (!direct) fd = open(path, O_WRONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  void *buf;
  if (posix_memalign(&buf, 4096, chunk)) {
    close(fd);
    errno = ENOMEM;
    return -1;
  }
  memset(buf, 0, chunk);
  int rc = 0;
  for (uint64_t off = 4096; off < size && !rc;) {
    size_t n = size - off < chunk ? (size_t)(size - off) : chunk;
    ssize_t w = pwrite(fd, buf, n, (off_t)off);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) rc = -1;
    else off += (uint64_t)w;
  }
  if (!rc && fdatasync(fd)) rc = -1;
  int e = errno;
  free(buf);
  close(fd);
  errno = e;
  return rc;
}

int iosr_mkswap(const char *path, uint64_t bytes, const char *label, int force, char *err,
                size_t cap) {
  int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    ERR("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  struct stat st;
  if (fstat(fd, &st)) goto fail_errno;
  int is_blk = S_ISBLK(st.st_mode);
  if (!is_blk && !S_ISREG(st.st_mode)) {
    ERR("%s is neither a regular file nor a block device", path);
    errno = EINVAL;
    goto fail;
  }
  if (flock(fd, LOCK_EX | LOCK_NB)) {
    ERR("%s is in use by a running iosrd", path);
    errno = EBUSY;
    goto fail;
  }
  if (!force && holds_data(fd, is_blk, st.st_size)) {
    ERR("%s holds data; use --force to overwrite it", path);
    errno = ENOTEMPTY;
    goto fail;
  }
  uint64_t size = bytes;
  if (is_blk) {
    uint64_t dsz;
    if (dev_size(fd, &dsz)) goto fail_errno;
    if (!size || size > dsz) size = dsz;
  }
  size &= ~4095ull;
  if (size < 4096 + IOSR_SWAP_MIN_SLOTS * 4096ull) {
    ERR("swap area too small: need at least %u KiB", 4 + IOSR_SWAP_MIN_SLOTS * 4);
    errno = EINVAL;
    goto fail;
  }
  if (!is_blk) {
    if (ftruncate(fd, 0) || ftruncate(fd, (off_t)size)) goto fail_errno;
    int r = posix_fallocate(fd, 0, (off_t)size);
    if (r && r != EOPNOTSUPP && r != EINVAL) {
      ERR("cannot allocate %llu bytes for %s: %s", (unsigned long long)size, path, strerror(r));
      errno = r;
      goto fail;
    }
    if (zero_fill(path, size)) {
      ERR("cannot write %s: %s", path, strerror(errno));
      goto fail;
    }
  }
  iosr_swap_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, IOSR_SWAP_MAGIC, 8);
  h.version = IOSR_SWAP_VERSION;
  h.page_size = 4096;
  h.slots = size / 4096 - 1;
  if (h.slots > (1ull << 32) - 2) h.slots = (1ull << 32) - 2;
  int ufd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (ufd < 0 || read(ufd, h.uuid, sizeof h.uuid) != (ssize_t)sizeof h.uuid) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    memcpy(h.uuid, &ts, sizeof ts < sizeof h.uuid ? sizeof ts : sizeof h.uuid);
  }
  if (ufd >= 0) close(ufd);
  h.uuid[6] = (uint8_t)((h.uuid[6] & 0x0f) | 0x40); /* version 4 UUID */
  h.uuid[8] = (uint8_t)((h.uuid[8] & 0x3f) | 0x80);
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  h.created_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
  h.clean = 1;
  if (label) snprintf(h.label, sizeof h.label, "%s", label);
  h.checksum = iosr_swap_checksum(&h);
  if (write_header(fd, &h)) goto fail_errno;
  close(fd);
  return 0;
fail_errno:
  ERR("%s: %s", path, strerror(errno));
fail: {
  int e = errno;
  close(fd);
  errno = e;
  return -1;
}
}

int iosr_swap_read_header(const char *path, iosr_swap_header *out, char *err, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    ERR("cannot open %s: %s", path, strerror(errno));
    return -1;
  }
  int r = read_header_fd(fd, out, err, cap);
  int e = errno;
  close(fd);
  errno = e;
  return r;
}

int iosr_swap_open(iosr_swap_area *a, const char *path, int want_direct, char *err, size_t cap) {
  memset(a, 0, sizeof *a);
  a->fd = -1;
  snprintf(a->path, sizeof a->path, "%s", path);
  int fd = -1;
  if (want_direct) {
    fd = open(path, O_RDWR | O_DIRECT | O_CLOEXEC);
    if (fd >= 0) a->direct = 1;
    else if (errno != EINVAL) {
      ERR("cannot open swap area %s: %s", path, strerror(errno));
      return -1;
    } else {
      iosr_warn("%s: the filesystem refuses O_DIRECT; swap I/O goes through the page cache", path);
    }
  }
  if (fd < 0) fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) {
    ERR("cannot open swap area %s: %s", path, strerror(errno));
    return -1;
  }
  /* A daemon that just died may hold the lock a little longer: its io_uring
   * releases the registered swap file asynchronously after exit. */
  int locked = 0;
  for (int i = 0; i < 300 && !(locked = flock(fd, LOCK_EX | LOCK_NB) == 0); i++) usleep(10000);
  if (!locked) {
    ERR("swap area %s is in use by another iosrd", path);
    close(fd);
    errno = EBUSY;
    return -1;
  }
  if (read_header_fd(fd, &a->hdr, err, cap)) goto fail;
  uint64_t size;
  if (dev_size(fd, &size)) goto fail;
  if (size < iosr_slot_offset(a->hdr.slots)) {
    ERR("swap area %s is %llu bytes, its header says %llu slots", path,
        (unsigned long long)size, (unsigned long long)a->hdr.slots);
    errno = EINVAL;
    goto fail;
  }
  a->was_clean = a->hdr.clean == 1;
  a->hdr.clean = 0;
  a->hdr.checksum = iosr_swap_checksum(&a->hdr);
  if (write_header(fd, &a->hdr)) {
    ERR("cannot write the swap header of %s: %s", path, strerror(errno));
    goto fail;
  }
  a->fd = fd;
  return 0;
fail: {
  int e = errno;
  close(fd);
  errno = e;
  return -1;
}
}

void iosr_swap_close(iosr_swap_area *a, int clean) {
  if (a->fd < 0) return;
  if (clean) {
    a->hdr.clean = 1;
    a->hdr.checksum = iosr_swap_checksum(&a->hdr);
    if (write_header(a->fd, &a->hdr)) iosr_warn("cannot mark %s clean: %s", a->path, strerror(errno));
  }
  close(a->fd);
  a->fd = -1;
}
