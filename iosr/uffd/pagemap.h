/* Which pages the kernel holds (/proc/PID/pagemap), where a failed drop, a
 * restart or a region registered after mlockall must find out what was
 * discarded or populated behind the engine's back (design note sections 3
 * and 12).
 *
 * Permission: root or the app's uid (the kernel hides the bits read here
 * from others). Thread-safe (no shared state); a descriptor serves one
 * process.
 */
#ifndef IOSR_UFFD_PAGEMAP_H
#define IOSR_UFFD_PAGEMAP_H

#include <stdint.h>
#include <sys/types.h>

/* /proc/PID/pagemap, opened for iosr_pagemap_present; -1 when unreadable. */
int iosr_pagemap_open(pid_t pid);
/* Whether the kernel holds page vpn (mapped, or in the kernel's own swap):
 * 1, 0, or -1 when unknown (fd < 0, read error). */
int iosr_pagemap_present(int fd, uint64_t vpn);

#endif
