/* I/O buffer arena: one mmap'd, 4 KiB-aligned area (registered with io_uring
 * as a fixed buffer) carved by a buddy allocator into blocks of 2^k pages,
 * from one page up to the largest request (IOSR_MAX_IO). O_DIRECT needs
 * aligned buffers (brief, "What the field has learned"); every block here is.
 * Not thread-safe: owned by the engine thread.
 */
#ifndef IOSR_SWAPAREA_BUFPOOL_H
#define IOSR_SWAPAREA_BUFPOOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct iosr_bufpool {
  uint8_t *base;
  size_t bytes;
  uint32_t npages, max_order;
  uint8_t *head_order;  /* per page: order of the free block starting here, 0xff if none */
  int32_t *next, *prev; /* free-list links per page */
  int32_t *free_head;   /* per order */
  uint64_t used_pages, peak_pages;
} iosr_bufpool;

/* bytes is rounded down to a multiple of max_block (a power of two >= 4096).
 * 0 or -1/ENOMEM. */
int iosr_bufpool_init(iosr_bufpool *p, size_t bytes, size_t max_block);
void iosr_bufpool_destroy(iosr_bufpool *p);
/* A block of at least `bytes` (<= max_block), or NULL when the arena is
 * exhausted (the caller retries after completions free blocks). */
void *iosr_bufpool_alloc(iosr_bufpool *p, size_t bytes);
void iosr_bufpool_free(iosr_bufpool *p, void *buf, size_t bytes);

#endif
