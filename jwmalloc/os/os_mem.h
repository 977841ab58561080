/* OS interface for memory: every mmap, munmap and madvise jwmalloc makes goes
 * through here, so the counts in the statistics are the real system calls.
 *
 * Brief: "Tiers" (over 4 MiB: direct system calls) and "Lifetime-based
 * reclamation" (release with madvise). Sizes are bytes, multiples of the
 * kernel's page (jw_page.kernel: docs/design/architecture.md, "Page size at
 * run time").
 * Thread-safe; never allocates. Errors: NULL / -1 with errno from the kernel.
 */
#ifndef JW_OS_MEM_H
#define JW_OS_MEM_H

#include <stddef.h>
#include <stdint.h>

/* Maps `size` bytes of fresh zeroed read-write memory aligned to `align`
 * (a power of two; one below the kernel's page gets the kernel's page).
 * NULL with errno=EINVAL for a size that is no multiple of the kernel's page,
 * ENOMEM when the kernel refuses. */
void *jw_os_map(size_t size, size_t align);

/* jw_os_map for the backend's roots: the first at a random place below the
 * kernel's mapping area (chosen once, from the process's random keys), each
 * later one just below the last, where the kernel would have put it, unless
 * that range is taken (then wherever the kernel maps, aligned). Costs no
 * extra system call once the first root is placed (an aligned hint needs no
 * over-mapping). docs/design/api.md, "Randomized addresses". */
void *jw_os_map_root(size_t size, size_t align);

/* Like jw_os_map, but the mapping is charged to the kernel's overcommit
 * accounting (no MAP_NORESERVE), so an absurd size fails with ENOMEM at
 * once instead of succeeding and faulting later: used for blocks handed to
 * the program whole (direct mappings). */
void *jw_os_map_committed(size_t size, size_t align);

/* Unmaps [p, p+size). Returns 0, or -1 with errno. */
int jw_os_unmap(void *p, size_t size);

/* Gives the physical pages of [p, p+size) back to the OS; the range stays
 * mapped and reads as zero afterwards (MADV_DONTNEED). Returns 0 or -1. */
int jw_os_release(void *p, size_t size);

/* Resizes the mapping [p, p+old) to `size` bytes (multiples of 4 KiB) with
 * mremap, moving it if needed; the new address, or NULL with errno (the old
 * mapping intact). */
void *jw_os_remap(void *p, size_t old, size_t size);

/* System calls made so far (relaxed counters, for statistics and tests). */
typedef struct jw_os_counts {
  uint64_t mmap_calls, munmap_calls, madvise_calls;
  uint64_t mapped_bytes, peak_mapped_bytes; /* all bytes currently mapped by us */
} jw_os_counts;
void jw_os_get_counts(jw_os_counts *out);

/* Resident bytes of the whole process (VmRSS) read from /proc without
 * allocating; 0 if unavailable. */
uint64_t jw_os_resident_bytes(void);

/* Reads the start of a small file (/proc) into buf, NUL terminated, without
 * allocating. Returns the bytes read, or -1 with errno. */
long jw_os_read_file(const char *path, char *buf, size_t cap);

/* Peak resident bytes of the whole process (VmHWM from /proc/self/status),
 * without allocating; 0 if unavailable. */
uint64_t jw_os_peak_resident_bytes(void);

#endif
