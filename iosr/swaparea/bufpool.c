#include "bufpool.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static unsigned order_of(size_t bytes) {
  unsigned o = 0;
  while (((size_t)4096 << o) < bytes) o++;
  return o;
}

static void push(iosr_bufpool *p, uint32_t pg, unsigned o) {
  p->head_order[pg] = (uint8_t)o;
  p->prev[pg] = -1;
  p->next[pg] = p->free_head[o];
  if (p->free_head[o] >= 0) p->prev[p->free_head[o]] = (int32_t)pg;
  p->free_head[o] = (int32_t)pg;
}

static void unlink_block(iosr_bufpool *p, uint32_t pg, unsigned o) {
  if (p->prev[pg] >= 0) p->next[p->prev[pg]] = p->next[pg];
  else p->free_head[o] = p->next[pg];
  if (p->next[pg] >= 0) p->prev[p->next[pg]] = p->prev[pg];
  p->head_order[pg] = 0xff;
}

int iosr_bufpool_init(iosr_bufpool *p, size_t bytes, size_t max_block) {
  memset(p, 0, sizeof *p);
  p->max_order = order_of(max_block);
  size_t blk = (size_t)4096 << p->max_order;
  bytes -= bytes % blk;
  if (!bytes) bytes = blk;
  p->base = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p->base == MAP_FAILED) {
    p->base = NULL;
    errno = ENOMEM;
    return -1;
  }
  p->bytes = bytes;
  p->npages = (uint32_t)(bytes / 4096);
  p->head_order = malloc(p->npages);
  p->next = malloc(sizeof(int32_t) * p->npages);
  p->prev = malloc(sizeof(int32_t) * p->npages);
  p->free_head = malloc(sizeof(int32_t) * (p->max_order + 1));
  if (!p->head_order || !p->next || !p->prev || !p->free_head) {
    iosr_bufpool_destroy(p);
    errno = ENOMEM;
    return -1;
  }
  memset(p->head_order, 0xff, p->npages);
  for (unsigned o = 0; o <= p->max_order; o++) p->free_head[o] = -1;
  uint32_t step = 1u << p->max_order;
  for (uint32_t pg = p->npages; pg >= step; pg -= step) push(p, pg - step, p->max_order);
  return 0;
}

void iosr_bufpool_destroy(iosr_bufpool *p) {
  if (p->base) munmap(p->base, p->bytes);
  free(p->head_order);
  free(p->next);
  free(p->prev);
  free(p->free_head);
  memset(p, 0, sizeof *p);
}

void *iosr_bufpool_alloc(iosr_bufpool *p, size_t bytes) {
  unsigned want = order_of(bytes);
  if (want > p->max_order) return NULL;
  unsigned o = want;
  while (o <= p->max_order && p->free_head[o] < 0) o++;
  if (o > p->max_order) return NULL;
  uint32_t pg = (uint32_t)p->free_head[o];
  unlink_block(p, pg, o);
  while (o > want) {
    o--;
    push(p, pg + (1u << o), o);
  }
  p->used_pages += 1u << want;
  if (p->used_pages > p->peak_pages) p->peak_pages = p->used_pages;
  return p->base + (size_t)pg * 4096;
}

void iosr_bufpool_free(iosr_bufpool *p, void *buf, size_t bytes) {
  unsigned o = order_of(bytes);
  uint32_t pg = (uint32_t)(((uint8_t *)buf - p->base) / 4096);
  p->used_pages -= 1u << o;
  while (o < p->max_order) {
    uint32_t buddy = pg ^ (1u << o);
    if (buddy >= p->npages || p->head_order[buddy] != o) break;
    unlink_block(p, buddy, o);
    pg &= ~(1u << o);
    o++;
  }
  push(p, pg, o);
}
