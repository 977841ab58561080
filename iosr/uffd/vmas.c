/* /proc/PID/smaps reader (vmas.h). A VMA's header line is
 * "START-END PERMS OFFSET DEV INODE [PATH]"; its "VmFlags:" line lists
 * two-letter flags: "lo" VM_LOCKED, "wf" VM_WIPEONFORK, "dc" VM_DONTCOPY.
 */
#define _GNU_SOURCE
#include "vmas.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

static unsigned parse_flags(const char *s) {
  unsigned f = 0;
  for (const char *p = s; p[0] && p[1]; p++) {
    if (p != s && p[-1] != ' ') continue;
    if (p[2] && p[2] != ' ' && p[2] != '\n') continue;
    if (p[0] == 'l' && p[1] == 'o') f |= IOSR_VMA_LOCKED;
    else if (p[0] == 'w' && p[1] == 'f') f |= IOSR_VMA_WIPEONFORK;
    else if (p[0] == 'd' && p[1] == 'c') f |= IOSR_VMA_DONTCOPY;
  }
  return f;
}

long iosr_vmas_flagged(pid_t pid, uint64_t lo, uint64_t hi, unsigned want, iosr_vma **out) {
  *out = NULL;
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/smaps", (int)pid);
  FILE *f = fopen(path, "re");
  if (!f) return -1;
  char *line = NULL;
  size_t cap = 0;
  long n = 0, vcap = 0;
  uint64_t s = 0, t = 0;
  int in = 0; /* the current VMA overlaps [lo, hi) */
  while (getline(&line, &cap, f) > 0) {
    uint64_t a, b;
    char c;
    if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %c", &a, &b, &c) == 3 && strchr(line, '-') < strchr(line, ' ')) {
      s = a >> 12;
      t = b >> 12;
      in = s < hi && t > lo;
      continue;
    }
    if (!in || strncmp(line, "VmFlags:", 8)) continue;
    unsigned fl = parse_flags(line + 8) & want;
    in = 0;
    if (!fl) continue;
    if (n == vcap) {
      vcap = vcap ? vcap * 2 : 16;
      iosr_vma *nv = realloc(*out, (size_t)vcap * sizeof *nv);
      if (!nv) {
        free(*out);
        *out = NULL;
        free(line);
        fclose(f);
        errno = ENOMEM;
        return -1;
      }
      *out = nv;
    }
    (*out)[n++] = (iosr_vma){s, t, fl};
  }
  free(line);
  fclose(f);
  return n;
}

unsigned iosr_vmas_at(const iosr_vma *v, long n, uint64_t vpn, long *hint) {
  long i = *hint > 0 && *hint < n && v[*hint].start <= vpn ? *hint : 0;
  while (i < n && v[i].end <= vpn) i++;
  *hint = i;
  return i < n && v[i].start <= vpn ? v[i].flags : 0;
}

/* The kernel's PROCMAP_QUERY (Linux 6.11, include/uapi/linux/fs.h), declared
 * here for older headers: the VMA covering an address, one ioctl on
 * /proc/PID/maps instead of parsing the file. */
struct iosr_procmap_query {
  uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size, vma_offset, inode;
  uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
  uint64_t vma_name_addr, build_id_addr;
};
#define IOSR_PROCMAP_QUERY _IOWR('f', 17, struct iosr_procmap_query)

int iosr_vmas_starts_at(pid_t pid, uint64_t vpn) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/maps", (int)pid);
  int fd = pid > 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
  if (fd < 0) return -1;
  struct iosr_procmap_query q = {.size = sizeof q, .query_addr = vpn << 12};
  int r = ioctl(fd, IOSR_PROCMAP_QUERY, &q);
  int err = errno;
  close(fd);
  if (r) return err == ENOENT ? 0 : -1;
  return q.vma_start == vpn << 12;
}
