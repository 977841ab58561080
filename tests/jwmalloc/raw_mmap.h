/* The mmap system call itself, for tests that replace mmap (and must not
 * call back into their own replacement). x86-64 has one mmap call taking a
 * byte offset; i386's SYS_mmap is the old one taking a pointer to its six
 * arguments, and its six-argument call is mmap2, whose offset counts 4 KiB
 * units (whatever the page size) and whose off_t here is 32 bits. */
#ifndef JW_TEST_RAW_MMAP_H
#define JW_TEST_RAW_MMAP_H

#include <errno.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

static inline void *jw_raw_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
#ifdef SYS_mmap2
  if (off & 4095) {
    errno = EINVAL;
    return MAP_FAILED;
  }
  return (void *)syscall(SYS_mmap2, addr, len, prot, flags, fd, (long)(off >> 12));
#else
  return (void *)syscall(SYS_mmap, addr, len, prot, flags, fd, off);
#endif
}

#endif
