/* VMA flags that userfaultfd does not report (design note section 10,
 * "What the kernel does not tell"): mlock (VM_LOCKED), MADV_WIPEONFORK and
 * MADV_DONTFORK, read from /proc/PID/smaps ("VmFlags:"). The daemon reads
 * them where they change what it may do: when a reclaim starts (locked pages
 * are not candidates) and when an app forks (the child of a wiped or
 * uncopied range has none of the parent's pages).
 *
 * Permission: root or the app's uid, as process_vm_readv. Allocates; not for
 * fork mode. Thread-safe (no shared state).
 */
#ifndef IOSR_UFFD_VMAS_H
#define IOSR_UFFD_VMAS_H

#include <stdint.h>
#include <sys/types.h>

enum { IOSR_VMA_LOCKED = 1, IOSR_VMA_WIPEONFORK = 2, IOSR_VMA_DONTCOPY = 4 };

typedef struct iosr_vma {
  uint64_t start, end; /* virtual pages [start, end) */
  unsigned flags;      /* IOSR_VMA_* */
} iosr_vma;

/* The VMAs of pid overlapping virtual pages [lo, hi) that carry any flag of
 * `want`, in address order, in *out (malloc'd, NULL when none; the caller
 * frees). Returns their number, or -1 with errno (ESRCH: no such process,
 * EACCES, ENOMEM). */
long iosr_vmas_flagged(pid_t pid, uint64_t lo, uint64_t hi, unsigned want, iosr_vma **out);

/* The flags of the VMA of `v` holding page vpn, given v's n entries from
 * iosr_vmas_flagged (0 when none). *hint: the index to start from (walks in
 * address order cost O(n) in all). */
unsigned iosr_vmas_at(const iosr_vma *v, long n, uint64_t vpn, long *hint);

/* Whether a VMA of pid starts at page vpn: 1, 0, or -1 when unknown (no
 * process, or a kernel without PROCMAP_QUERY, before Linux 6.11). One
 * ioctl on /proc/PID/maps. */
int iosr_vmas_starts_at(pid_t pid, uint64_t vpn);

#endif
