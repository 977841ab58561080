/* See os_mem.h. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1 /* mremap */
#endif
#include "os_mem.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/asan.h"
#include "../common/atomic.h"
#include "../common/page.h"
#include "os_swap.h"

/* The swap layer (os_swap.c, docs/design/stack.md) where it is linked in. */
#pragma weak jw_os_swap_map
#pragma weak jw_os_swap_unmap
#pragma weak jw_os_swap_size

static jw_atomic_u64 n_mmap, n_munmap, n_madvise, mapped, peak_mapped;

/* Counters are statistics only: relaxed, no ordering with anything. */
static void account_mapped(int64_t delta) {
  uint64_t now = jw_fetch_add(&mapped, (uint64_t)delta, JW_RELAXED) + (uint64_t)delta;
  uint64_t peak = jw_load(&peak_mapped, JW_RELAXED);
  while (now > peak && !jw_cas_weak(&peak_mapped, &peak, now, JW_RELAXED, JW_RELAXED)) {
  }
}

static void *raw_map(size_t size, int extra) {
  jw_fetch_add(&n_mmap, 1, JW_RELAXED);
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

/* As raw_map, asking for `hint` (a hint only: the kernel places the
 * mapping elsewhere when that range is taken). */
static void *raw_map_at(void *hint, size_t size, int extra) {
  jw_fetch_add(&n_mmap, 1, JW_RELAXED);
  void *p = mmap(hint, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | extra, -1, 0);
  return p == MAP_FAILED ? NULL : p;
}

static void raw_unmap(void *p, size_t size) {
  jw_fetch_add(&n_munmap, 1, JW_RELAXED);
  munmap(p, size);
}

static void *map_aligned(size_t size, size_t align, int extra) {
  /* The kernel's page, not the logical one: all mmap needs (an alignment
   * below it is what every mapping has anyway). */
  size_t k = jw_page.kernel;
  if (align < k) align = k;
  if (size == 0 || (size & (k - 1)) != 0 || (align & (align - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  void *p = raw_map(size, extra);
  if (p == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  if (((uintptr_t)p & (align - 1)) != 0) {
    /* Over-map by the alignment and trim both ends: two extra munmaps, paid
     * only when the kernel's placement was not already aligned. */
    raw_unmap(p, size);
    if (size + align < size) {
      errno = ENOMEM;
      return NULL;
    }
    char *q = raw_map(size + align, extra);
    if (q == NULL) {
      errno = ENOMEM;
      return NULL;
    }
    char *a = (char *)(((uintptr_t)q + align - 1) & ~(uintptr_t)(align - 1));
    if (a > q) raw_unmap(q, (size_t)(a - q));
    size_t tail = (size_t)((q + size + align) - (a + size));
    if (tail) raw_unmap(a + size, tail);
    p = a;
  }
  account_mapped((int64_t)size);
  return p;
}

void *jw_os_map(size_t size, size_t align) { return map_aligned(size, align, MAP_NORESERVE); }

/* ---- roots at a random place (docs/design/api.md, "Randomized addresses") ---- */

/* Where the next root is asked for: 0 until the first root, then just below
 * the last one (top-down, as the kernel places mappings: placement's rank
 * of roots relies on it, page_source.h). */
static jw_atomic_uptr next_root;

/* The first root's hint: a random multiple of `align` below the address the
 * kernel maps at now, within a quarter of the space below it and at most
 * 2^24 roots down; on x86-64 that is 23 random bits above the root's
 * alignment, on a 32-bit process 8. The kernel's own placement gives the
 * bits up to its mmap randomization (28 bits of pages on x86-64), of which
 * the 4 MiB alignment keeps 18. The random number is the kernel's
 * (getrandom), not derived from the seed of jwmalloc's secret keys, so that
 * a heap address seen by an attacker says nothing about them. */
static uintptr_t first_hint(size_t align) {
  uint64_t rnd = 0;
  if (syscall(SYS_getrandom, &rnd, sizeof rnd, 1 /* GRND_NONBLOCK */) != (long)sizeof rnd) return 0;
  void *probe = raw_map(jw_page.kernel, MAP_NORESERVE);
  if (probe == NULL) return 0;
  uintptr_t top = (uintptr_t)probe & ~(uintptr_t)(align - 1);
  raw_unmap(probe, jw_page.kernel);
  uintptr_t slots = top / 4 / align, cap = (uintptr_t)1 << 24;
  if (slots > cap) slots = cap;
  if (slots < 2) return 0;
  uintptr_t r = (uintptr_t)(rnd % slots);
  return top - (r + 1) * align;
}

void *jw_os_map_root(size_t size, size_t align) {
  if (jw_os_swap_map) {
    void *r = jw_os_swap_map(size, align, 0);
    if (r != NULL) {
      jw_fetch_add(&n_mmap, 1, JW_RELAXED);
      account_mapped((int64_t)size);
      return r;
    }
  }
  /* Each mapping claims its own place (a CAS moves the next hint one root
   * down before the mmap): threads mapping at once would otherwise ask for
   * the same place, and every loser's mapping, not at the hint, would be
   * one more mmap and munmap before the aligned path. Relaxed: only the hint
   * itself is shared; the kernel decides where the mapping goes. */
  uintptr_t cur = jw_load(&next_root, JW_RELAXED), hint;
  do {
    hint = cur != 0 ? cur : first_hint(align);
    if (hint < size) break; /* no random number, or no room below: the kernel's choice */
  } while (!jw_cas(&next_root, &cur, hint - size, JW_RELAXED, JW_RELAXED));
  if (hint >= size) {
    void *p = raw_map_at((void *)hint, size, MAP_NORESERVE);
    if (p != NULL && ((uintptr_t)p & (align - 1)) == 0) {
      account_mapped((int64_t)size);
      return p;
    }
    if (p != NULL) raw_unmap(p, size);
  }
  void *p = map_aligned(size, align, MAP_NORESERVE);
  if (p != NULL) jw_store(&next_root, (uintptr_t)p - size, JW_RELAXED); /* on from the kernel's choice */
  return p;
}

void *jw_os_map_committed(size_t size, size_t align) {
  if (jw_os_swap_map) { /* a huge block in an IOSR region too (docs/design/stack.md) */
    void *r = jw_os_swap_map(size, align, 1);
    if (r != NULL) {
      jw_fetch_add(&n_mmap, 1, JW_RELAXED);
      account_mapped((int64_t)size);
      return r;
    }
  }
  return map_aligned(size, align, 0);
}

int jw_os_unmap(void *p, size_t size) {
  /* ASan variant: memory given back to the OS keeps no poison, or a later
   * mapping at the same address (a root, a direct mapping) would read as
   * poisoned. */
  jw_unpoison(p, size);
  jw_fetch_add(&n_munmap, 1, JW_RELAXED);
  if (jw_os_swap_unmap && jw_os_swap_unmap(p, size)) {
    account_mapped(-(int64_t)size);
    return 0;
  }
  if (munmap(p, size) != 0) return -1;
  account_mapped(-(int64_t)size);
  return 0;
}

int jw_os_release(void *p, size_t size) {
  jw_fetch_add(&n_madvise, 1, JW_RELAXED);
  return madvise(p, size, MADV_DONTNEED);
}

/* A huge block in an IOSR region, which mremap may not move or resize:
 * shrunk in place (the tail discarded; the region keeps its size), grown in
 * place up to the region's size, else copied to a new mapping. */
static void *remap_region(void *p, size_t old, size_t size, size_t region) {
  if (size <= region) {
    if (size < old) jw_os_release((char *)p + size, old - size);
    account_mapped((int64_t)size - (int64_t)old);
    return p;
  }
  void *q = jw_os_map_committed(size, jw_page.kernel);
  if (q == NULL) return NULL;
  memcpy(q, p, old);
  jw_os_unmap(p, old);
  return q;
}

void *jw_os_remap(void *p, size_t old, size_t size) {
  size_t region = jw_os_swap_size ? jw_os_swap_size(p) : 0;
  if (region) return remap_region(p, old, size, region);
  jw_fetch_add(&n_mmap, 1, JW_RELAXED); /* counted as a mapping call */
  void *q = mremap(p, old, size, MREMAP_MAYMOVE);
  if (q == MAP_FAILED) return NULL;
  account_mapped((int64_t)size - (int64_t)old);
  return q;
}

void jw_os_get_counts(jw_os_counts *out) {
  out->mmap_calls = jw_load(&n_mmap, JW_RELAXED);
  out->munmap_calls = jw_load(&n_munmap, JW_RELAXED);
  out->madvise_calls = jw_load(&n_madvise, JW_RELAXED);
  out->mapped_bytes = jw_load(&mapped, JW_RELAXED);
  out->peak_mapped_bytes = jw_load(&peak_mapped, JW_RELAXED);
}

long jw_os_read_file(const char *path, char *buf, size_t cap) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, cap - 1);
  close(fd);
  if (n < 0) return -1;
  buf[n] = 0;
  return (long)n;
}

static uint64_t parse_u64(const char *s) {
  uint64_t v = 0;
  while (*s >= '0' && *s <= '9') v = v * 10 + (uint64_t)(*s++ - '0');
  return v;
}

uint64_t jw_os_resident_bytes(void) {
  /* /proc/self/statm field 2 is resident pages; parsed by hand (no stdio). */
  char buf[128];
  if (jw_os_read_file("/proc/self/statm", buf, sizeof buf) <= 0) return 0;
  const char *s = buf;
  while (*s && *s != ' ') s++;
  while (*s == ' ') s++;
  return parse_u64(s) * (uint64_t)sysconf(_SC_PAGESIZE);
}

uint64_t jw_os_peak_resident_bytes(void) {
  char buf[4096];
  if (jw_os_read_file("/proc/self/status", buf, sizeof buf) <= 0) return 0;
  for (const char *s = buf; *s; s++) {
    if ((s == buf || s[-1] == '\n') && s[0] == 'V' && s[1] == 'm' && s[2] == 'H' && s[3] == 'W' && s[4] == 'M' &&
        s[5] == ':') {
      s += 6;
      while (*s == ' ' || *s == '\t') s++;
      return parse_u64(s) << 10; /* kB */
    }
  }
  return 0;
}
