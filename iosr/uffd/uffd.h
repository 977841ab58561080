/* userfaultfd wrappers (design note sections 2 and 7).
 *
 * Every ioctl returns 0 or a negative errno (never sets errno), and reports
 * how far a partial copy got, because the engine must resume partial copies
 * (EAGAIN) and treat EEXIST as "present, wake it" (brief: "What the field has
 * learned the hard way"). Thread-safe (plain system calls).
 */
#ifndef IOSR_UFFD_UFFD_H
#define IOSR_UFFD_UFFD_H

#include <linux/userfaultfd.h>
#include <stddef.h>
#include <stdint.h>

#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(0xAA, 0x00)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON (1 << 14)
#endif
#ifndef UFFDIO_POISON
#define _UFFDIO_POISON (0x08)
struct uffdio_poison {
  struct uffdio_range range;
#define UFFDIO_POISON_MODE_DONTWAKE ((__u64)1 << 0)
  __u64 mode;
  __s64 updated;
};
#define UFFDIO_POISON _IOWR(UFFDIO, _UFFDIO_POISON, struct uffdio_poison)
#endif

#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE (1 << 16)
#endif
#ifndef UFFDIO_MOVE
#define _UFFDIO_MOVE (0x05)
struct uffdio_move {
  __u64 dst;
  __u64 src;
  __u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE ((__u64)1 << 0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES ((__u64)1 << 1)
  __u64 mode;
  __s64 move;
};
#define UFFDIO_MOVE _IOWR(UFFDIO, _UFFDIO_MOVE, struct uffdio_move)
#endif

/* Features the engine needs / uses when present. */
#define IOSR_UFFD_REQUIRED \
  (UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP | \
   UFFD_FEATURE_EVENT_REMAP)
#define IOSR_UFFD_OPTIONAL \
  (UFFD_FEATURE_EVENT_FORK | UFFD_FEATURE_THREAD_ID | UFFD_FEATURE_POISON | UFFD_FEATURE_MOVE)

/* Creates a userfaultfd (O_CLOEXEC | O_NONBLOCK): the system call, then
 * /dev/userfaultfd, then the system call with UFFD_USER_MODE_ONLY (sets
 * *user_mode_only). Negotiates the API with the required features and the
 * optional ones the kernel has; *features gets what was granted. Returns the
 * descriptor, or -errno: ENOTSUP when a required feature is missing, EPERM
 * when no way of creating one is allowed. */
int iosr_uffd_open(uint64_t *features, int *user_mode_only);

/* Registers [addr, addr+len) for MISSING and WP faults. */
int iosr_uffd_register(int uffd, uint64_t addr, uint64_t len);
int iosr_uffd_unregister(int uffd, uint64_t addr, uint64_t len);
/* Copies len bytes (a multiple of 4096, page-aligned dst) from src (this
 * process) to dst (the uffd's process); zeropage maps the zero page there.
 * The range may span several VMAs (the kernel fills one per call; these
 * split the range for it). *done gets the bytes mapped even on error; the
 * error concerns the page at dst + *done: -EEXIST present, -EAGAIN an event
 * is pending (resume after reading it), -ENOENT in no registered VMA (an
 * UNMAP or REMAP event follows or came), -ESRCH the process is gone. A NULL
 * src makes one plain call (the reap probe of engine.c). */
int iosr_uffd_copy(int uffd, uint64_t dst, const void *src, uint64_t len, int wake, uint64_t *done);
/* As iosr_uffd_copy (waking), the pages mapped write-protected: a write to
 * one is a write-protect fault (a clean page, design note section 3). */
int iosr_uffd_copy_wp(int uffd, uint64_t dst, const void *src, uint64_t len, uint64_t *done);
int iosr_uffd_zeropage(int uffd, uint64_t dst, uint64_t len, uint64_t *done);
/* Write-protects (protect=1) or un-protects (0, which wakes waiters) a range. */
int iosr_uffd_wp(int uffd, uint64_t addr, uint64_t len, int protect);
int iosr_uffd_wake(int uffd, uint64_t addr, uint64_t len);
/* Marks a missing page poisoned: access then raises SIGBUS. */
int iosr_uffd_poison(int uffd, uint64_t addr, uint64_t len);
/* Moves the pages of [src, src+len) of the uffd's process to [dst, ...)
 * of it (UFFDIO_MOVE, Linux 6.8; both page-aligned, len a multiple of
 * 4096, each range inside one VMA; dst registered with this uffd and
 * empty). *done gets the bytes moved even on error; the error concerns the
 * page at src + *done: -EAGAIN an event is pending, -EBUSY the page is
 * shared (a fork), -EINVAL the two VMAs differ (access, lock) or a range
 * spans VMAs, -EEXIST dst is occupied, -ENOENT no page at src, -ESRCH the
 * process is gone. Design note section 3, "Moved out". */
int iosr_uffd_move(int uffd, uint64_t dst, uint64_t src, uint64_t len, uint64_t *done);

#endif
