/* Regions (brief: "Swappable memory"; design note section 13): private
 * anonymous memory registered with the app's userfaultfd for missing and
 * write-protect faults, announced to the daemon. Never calls malloc: region
 * records come from mmap'd pages, so a page source for a malloc can sit on top.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/client_int.h"
#include "uffd/uffd.h"

static iosr_region *rec_alloc(iosr_ctx *ctx) {
  if (!ctx->free_regions) {
    iosr_region *page = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return NULL;
    for (size_t i = 0; i < 4096 / sizeof *page; i++) {
      page[i].next = ctx->free_regions;
      ctx->free_regions = &page[i];
    }
  }
  iosr_region *r = ctx->free_regions;
  ctx->free_regions = r->next;
  memset(r, 0, sizeof *r);
  return r;
}

iosr_region *iosr_region_create_aligned(iosr_ctx *ctx, size_t bytes, size_t align) {
  if (!ctx || !bytes || align < 4096 || (align & (align - 1)) || bytes > (1ull << 46)) {
    errno = EINVAL;
    return NULL;
  }
  if (ctx->pid != getpid()) {
    errno = ECHILD;
    return NULL;
  }
  size_t size = (bytes + 4095) & ~(size_t)4095;
  size_t span = size + align - 4096;
  uint8_t *m = mmap(NULL, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (m == MAP_FAILED) {
    errno = ENOMEM;
    return NULL;
  }
  uint8_t *base = (uint8_t *)(((uintptr_t)m + align - 1) & ~(uintptr_t)(align - 1));
  if (base > m) munmap(m, (size_t)(base - m));
  if (base + size < m + span) munmap(base + size, (size_t)(m + span - (base + size)));
  /* 4 KiB pages only: every copy, protect and drop is per page */
  madvise(base, size, MADV_NOHUGEPAGE);
  /* without the FORK event (no CAP_SYS_PTRACE) a child would read swapped
   * pages as zero: it gets no copy of the region instead (touching it faults) */
  if (!(ctx->features & UFFD_FEATURE_EVENT_FORK)) madvise(base, size, MADV_DONTFORK);
  int r = iosr_uffd_register(ctx->uffd, (uint64_t)(uintptr_t)base, size);
  if (r) {
    munmap(base, size);
    errno = -r == EPERM ? EPERM : ENOMEM;
    return NULL;
  }
  iosr_m_range rg = {(uint64_t)(uintptr_t)base, size};
  iosr_m_reply rep;
  memset(&rep, 0, sizeof rep);
  if (iosr_ctx_rpc(ctx, IOSR_M_REGION_ADD, &rg, sizeof rg, NULL, 0, &rep, sizeof rep, NULL) || rep.err) {
    int e = rep.err ? rep.err : errno;
    iosr_uffd_unregister(ctx->uffd, (uint64_t)(uintptr_t)base, size);
    munmap(base, size);
    errno = e;
    return NULL;
  }
  pthread_mutex_lock(&ctx->reg_mu);
  iosr_region *reg = rec_alloc(ctx);
  if (reg) {
    reg->ctx = ctx;
    reg->base = base;
    reg->size = size;
    reg->live = 1;
    reg->next = ctx->regions;
    ctx->regions = reg;
  }
  pthread_mutex_unlock(&ctx->reg_mu);
  if (!reg) {
    iosr_ctx_rpc(ctx, IOSR_M_REGION_DEL, &rg, sizeof rg, NULL, 0, &rep, sizeof rep, NULL);
    munmap(base, size);
    errno = ENOMEM;
    return NULL;
  }
  return reg;
}

iosr_region *iosr_region_create(iosr_ctx *ctx, size_t bytes) {
  return iosr_region_create_aligned(ctx, bytes, 2u << 20);
}

void *iosr_region_base(const iosr_region *r) { return r ? r->base : NULL; }
size_t iosr_region_size(const iosr_region *r) { return r ? r->size : 0; }

int iosr_region_discard(iosr_region *r, size_t off, size_t len) {
  if (!r || !r->live || (off | len) & 4095 || off > r->size || len > r->size - off) {
    errno = EINVAL;
    return -1;
  }
  if (!len) return 0;
  return madvise(r->base + off, len, MADV_DONTNEED);
}

int iosr_region_destroy(iosr_region *r) {
  if (!r || !r->live) {
    errno = EINVAL;
    return -1;
  }
  iosr_ctx *ctx = r->ctx;
  if (ctx->pid != getpid()) {
    errno = ECHILD;
    return -1;
  }
  iosr_m_range rg = {(uint64_t)(uintptr_t)r->base, r->size};
  iosr_m_reply rep;
  /* the daemon forgets the pages (and frees their slots) first; then no drop
   * may reach this range once it is unmapped and possibly reused */
  int rc = iosr_ctx_rpc(ctx, IOSR_M_REGION_DEL, &rg, sizeof rg, NULL, 0, &rep, sizeof rep, NULL);
  iosr_ctx_fence_drops(ctx, rg.start, rg.len);
  /* without a daemon, nobody would read the UNMAP event munmap waits for */
  if (rc) iosr_uffd_unregister(ctx->uffd, rg.start, rg.len);
  munmap(r->base, r->size);
  pthread_mutex_lock(&ctx->reg_mu);
  iosr_region **pp = &ctx->regions;
  while (*pp && *pp != r) pp = &(*pp)->next;
  if (*pp) *pp = r->next;
  r->live = 0;
  r->next = ctx->free_regions;
  ctx->free_regions = r;
  pthread_mutex_unlock(&ctx->reg_mu);
  if (rc == 0 && rep.err) {
    errno = rep.err;
    return -1;
  }
  return 0;
}
