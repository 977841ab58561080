#define _GNU_SOURCE
#include "pagetable.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define PT_RESERVE (16ull << 30)
#define PT_DIR_OFF 4096ull
#define PT_ENT_OFF (PT_DIR_OFF + (uint64_t)IOSR_PT_MAX_SPANS * sizeof(iosr_span))

static int grow(iosr_ptable *pt, uint64_t need) {
  if (need <= pt->size) return 0;
  if (need > PT_RESERVE) {
    errno = ENOMEM;
    return -1;
  }
  uint64_t ns = pt->size ? pt->size : 1ull << 20;
  while (ns < need) ns *= 2;
  if (ns > PT_RESERVE) ns = PT_RESERVE;
  if (ftruncate(pt->fd, (off_t)ns)) return -1;
  pt->size = ns;
  return 0;
}

static int map_it(iosr_ptable *pt) {
  pt->map = mmap(NULL, PT_RESERVE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_NORESERVE, pt->fd, 0);
  if (pt->map == MAP_FAILED) {
    pt->map = NULL;
    return -1;
  }
  pt->hdr = (iosr_pt_hdr *)pt->map;
  pt->spans = (iosr_span *)(pt->map + PT_DIR_OFF);
  return 0;
}

int iosr_pt_create(iosr_ptable *pt, uint64_t token, const char *name) {
  memset(pt, 0, sizeof *pt);
  pt->fd = memfd_create("iosr-pagetable", MFD_CLOEXEC);
  if (pt->fd < 0) return -1;
  if (grow(pt, PT_ENT_OFF + (1u << 20)) || map_it(pt)) {
    int e = errno;
    close(pt->fd);
    pt->fd = -1;
    errno = e;
    return -1;
  }
  pt->hdr->magic = IOSR_PT_MAGIC;
  pt->hdr->version = IOSR_PT_VERSION;
  pt->hdr->nspans = 0;
  pt->hdr->bump = PT_ENT_OFF;
  pt->hdr->token = token;
  if (name) strncpy(pt->hdr->name, name, sizeof pt->hdr->name - 1);
  return 0;
}

int iosr_pt_attach(iosr_ptable *pt, int fd) {
  memset(pt, 0, sizeof *pt);
  struct stat st;
  if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size < PT_ENT_OFF ||
      (uint64_t)st.st_size > PT_RESERVE) {
    errno = EINVAL;
    return -1;
  }
  pt->fd = fd;
  pt->size = (uint64_t)st.st_size;
  if (map_it(pt)) return -1;
  iosr_pt_hdr *h = pt->hdr;
  int ok = h->magic == IOSR_PT_MAGIC && h->version == IOSR_PT_VERSION && h->nspans <= IOSR_PT_MAX_SPANS &&
           h->bump >= PT_ENT_OFF && h->bump <= pt->size;
  for (uint32_t i = 0; ok && i < h->nspans; i++) {
    iosr_span *s = &pt->spans[i];
    ok = s->n && s->off >= PT_ENT_OFF && s->n < (1ull << 36) &&
         s->off + s->n * sizeof(iosr_pte) <= h->bump && (i == 0 || pt->spans[i - 1].start + pt->spans[i - 1].n <= s->start);
  }
  if (!ok) {
    munmap(pt->map, PT_RESERVE);
    memset(pt, 0, sizeof *pt);
    pt->fd = -1;
    errno = EINVAL;
    return -1;
  }
  return 0;
}

void iosr_pt_destroy(iosr_ptable *pt) {
  if (pt->map) munmap(pt->map, PT_RESERVE);
  if (pt->fd >= 0) close(pt->fd);
  memset(pt, 0, sizeof *pt);
  pt->fd = -1;
}

/* index of the first span with start + n > vpn */
static uint32_t lower(const iosr_ptable *pt, uint64_t vpn) {
  uint32_t lo = 0, hi = pt->hdr->nspans;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (pt->spans[mid].start + pt->spans[mid].n <= vpn) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

iosr_span *iosr_pt_first_from(iosr_ptable *pt, uint64_t vpn) {
  uint32_t i = lower(pt, vpn);
  return i < pt->hdr->nspans ? &pt->spans[i] : NULL;
}

iosr_span *iosr_pt_find(iosr_ptable *pt, uint64_t vpn) {
  iosr_span *s = iosr_pt_first_from(pt, vpn);
  return s && s->start <= vpn ? s : NULL;
}

iosr_pte *iosr_pt_lookup(iosr_ptable *pt, uint64_t vpn, iosr_span **span) {
  iosr_span *s = iosr_pt_find(pt, vpn);
  if (span) *span = s;
  return s ? iosr_pt_pte(pt, s, vpn) : NULL;
}

static iosr_span *insert(iosr_ptable *pt, const iosr_span *ns) {
  if (pt->hdr->nspans >= IOSR_PT_MAX_SPANS) {
    errno = ENOSPC;
    return NULL;
  }
  uint32_t i = lower(pt, ns->start);
  memmove(&pt->spans[i + 1], &pt->spans[i], (pt->hdr->nspans - i) * sizeof(iosr_span));
  pt->spans[i] = *ns;
  pt->hdr->nspans++;
  return &pt->spans[i];
}

iosr_span *iosr_pt_add(iosr_ptable *pt, uint64_t start, uint64_t n, uint32_t region) {
  iosr_span *o = iosr_pt_first_from(pt, start);
  if (!n || (o && o->start < start + n)) {
    errno = n ? EEXIST : EINVAL;
    return NULL;
  }
  uint64_t bytes = (n * sizeof(iosr_pte) + 63) & ~63ull;
  uint64_t off = pt->hdr->bump;
  if (grow(pt, off + bytes)) return NULL;
  /* fresh file pages read as zero: every entry starts as ZERO */
  iosr_span ns = {.start = start, .n = n, .off = off, .region = region};
  iosr_span *s = insert(pt, &ns);
  if (s) pt->hdr->bump = off + bytes;
  return s;
}

int iosr_pt_cut(iosr_ptable *pt, uint64_t start, uint64_t n, iosr_pt_cb cb, void *arg) {
  uint64_t end = start + n;
  uint32_t i = lower(pt, start);
  while (i < pt->hdr->nspans && pt->spans[i].start < end) {
    iosr_span s = pt->spans[i];
    uint64_t a = s.start > start ? s.start : start;
    uint64_t b = s.start + s.n < end ? s.start + s.n : end;
    if (cb)
      for (uint64_t v = a; v < b; v++) cb(arg, v, iosr_pt_pte(pt, &s, v));
    int keep_left = s.start < a, keep_right = b < s.start + s.n;
    if (keep_left && keep_right) {
      if (pt->hdr->nspans >= IOSR_PT_MAX_SPANS) {
        errno = ENOSPC;
        return -1;
      }
      pt->spans[i].n = a - s.start;
      iosr_span r = s;
      r.start = b;
      r.n = s.start + s.n - b;
      r.off = s.off + (b - s.start) * sizeof(iosr_pte);
      insert(pt, &r);
      return 0;
    } else if (keep_left) {
      pt->spans[i].n = a - s.start;
      i++;
    } else if (keep_right) {
      pt->spans[i].off = s.off + (b - s.start) * sizeof(iosr_pte);
      pt->spans[i].n = s.start + s.n - b;
      pt->spans[i].start = b;
      i++;
    } else {
      memmove(&pt->spans[i], &pt->spans[i + 1], (pt->hdr->nspans - i - 1) * sizeof(iosr_span));
      pt->hdr->nspans--;
    }
  }
  return 0;
}

int iosr_pt_move(iosr_ptable *pt, uint64_t from, uint64_t to, uint64_t n, iosr_pt_cb cb, void *arg) {
  /* Every span piece of the source range moves, however many: one mremap may
   * move a VMA that merged many adjacent regions. */
  uint64_t end = from + n;
  uint32_t first = lower(pt, from), np = 0;
  while (first + np < pt->hdr->nspans && pt->spans[first + np].start < end) np++;
  iosr_span *piece = np ? malloc(np * sizeof *piece) : NULL;
  if (np && !piece) return -1; /* ENOMEM: nothing changed */
  for (uint32_t k = 0; k < np; k++) {
    iosr_span s = pt->spans[first + k];
    uint64_t a = s.start > from ? s.start : from;
    uint64_t b = s.start + s.n < end ? s.start + s.n : end;
    piece[k] = s;
    piece[k].start = a;
    piece[k].n = b - a;
    piece[k].off = s.off + (a - s.start) * sizeof(iosr_pte);
  }
  int rc = -1;
  if (iosr_pt_cut(pt, from, n, NULL, NULL) || iosr_pt_cut(pt, to, n, cb, arg)) goto out;
  for (uint32_t k = 0; k < np; k++) {
    piece[k].start = to + (piece[k].start - from);
    if (!insert(pt, &piece[k])) goto out;
  }
  rc = 0;
out:
  free(piece);
  return rc;
}
