/* Bookkeeping memory, block patterns and the hand-off ring. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "harness.h"

void *jwb_meta_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    fprintf(stderr, "%s: cannot map %zu bytes of bookkeeping memory\n", jwb.name, bytes);
    exit(2);
  }
  return p;
}

void jwb_meta_free(void *p, size_t bytes) {
  if (p) munmap(p, bytes ? bytes : 1);
}

void *jwb_meta_grow(void *p, size_t used_bytes, size_t old_bytes, size_t new_bytes) {
  void *g = jwb_meta_alloc(new_bytes);
  if (p) {
    memcpy(g, p, used_bytes);
    jwb_meta_free(p, old_bytes);
  }
  return g;
}

void jwb_fill_small(unsigned char *b, size_t n, uint64_t tag) {
  for (size_t i = 0; i < n; i++) b[i] = (unsigned char)(tag >> (8 * i));
}

/* Every case jwb_check's inline path leaves: blocks under 16 bytes, with a
 * header not to check, over one page, and every failure. */
int jwb_check_slow(jwb_thread *t, const void *p, size_t n, uint64_t tag, size_t skip_head) {
  const unsigned char *b = p;
  int ok = 1;
  if (n >= 16) {
    if (skip_head < 8 && jwb_get8(b) != tag) ok = 0;
    if (skip_head + 8 <= n - 8 && jwb_get8(b + n - 8) != tag) ok = 0;
  } else if (skip_head == 0) {
    for (size_t i = 0; i < (n < 8 ? n : 8); i++)
      if (b[i] != (unsigned char)(tag >> (8 * i))) ok = 0;
  }
  for (size_t off = JWB_PAGE; ok && off + 8 < n; off += JWB_PAGE)
    if (off >= skip_head && b[off] != (unsigned char)(tag >> 8)) ok = 0;
  if (!ok) {
    char what[160];
    snprintf(what, sizeof what, "block %p of %zu bytes lost its pattern (overlap or corruption)", p, n);
    jwb_fail(t, what);
  }
  return ok;
}

jwb_ring *jwb_ring_new(size_t capacity) {
  size_t cap = 1;
  while (cap < capacity) cap <<= 1;
  jwb_ring *r = jwb_meta_alloc(sizeof *r);
  r->mask = cap - 1;
  r->items = jwb_meta_alloc(cap * sizeof(jwb_item));
  atomic_init(&r->head, 0);
  atomic_init(&r->tail, 0);
  return r;
}

int jwb_ring_push(jwb_ring *r, jwb_item it) {
  size_t tail = atomic_load_explicit(&r->tail, memory_order_relaxed);
  /* acquire: the consumer has finished reading the slot it released */
  size_t head = atomic_load_explicit(&r->head, memory_order_acquire);
  if (tail - head > r->mask) return 0;
  r->items[tail & r->mask] = it;
  /* release: the item is visible before the consumer sees the new tail */
  atomic_store_explicit(&r->tail, tail + 1, memory_order_release);
  return 1;
}

int jwb_ring_pop(jwb_ring *r, jwb_item *out) {
  size_t head = atomic_load_explicit(&r->head, memory_order_relaxed);
  /* acquire: pairs with the producer's release of tail */
  size_t tail = atomic_load_explicit(&r->tail, memory_order_acquire);
  if (head == tail) return 0;
  *out = r->items[head & r->mask];
  /* release: the slot is read before the producer may reuse it */
  atomic_store_explicit(&r->head, head + 1, memory_order_release);
  return 1;
}
