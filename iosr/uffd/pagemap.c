/* /proc/PID/pagemap reader (pagemap.h): one 64-bit entry per virtual page,
 * bit 63 "present", bit 62 "swapped" (Documentation/admin-guide/mm/pagemap.rst).
 */
#define _GNU_SOURCE
#include "pagemap.h"

#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

int iosr_pagemap_open(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/pagemap", (int)pid);
  return pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
}

int iosr_pagemap_present(int fd, uint64_t vpn) {
  uint64_t ent;
  if (fd < 0 || pread(fd, &ent, sizeof ent, (off_t)(vpn * 8)) != (ssize_t)sizeof ent) return -1;
  return (ent >> 63 & 1) || (ent >> 62 & 1); /* present, or swapped by the kernel */
}
