/* Helpers for the clients that run jwmalloc's real code (issue 9, phase 2).
 *
 * jwv_malloc/jwv_free call the allocator's public entry points (jw_malloc,
 * jw_free: fast paths, tier dispatch, thread caches, midend, backend, reclaim
 * hooks) between vrf_enter_allocator()/vrf_leave_allocator(), and declare
 * the blocks they hand out live for the memory-safety check: allocator code
 * may not touch a live block, client code may touch nothing else.
 *
 * jwv_box is a one-word mailbox between client threads: a release store of
 * a pointer, and an await (jw_cpu_relax) until it is there. It gives the
 * program's own happens-before that a real program has when it passes a
 * pointer to another thread. */
#ifndef VRF_JW_CLIENT_H
#define VRF_JW_CLIENT_H

#include <stddef.h>
#include <string.h>

#include "backend/page_source.h"
#include "common/atomic.h"
#include "jwmalloc.h"
#include "vrf.h"

static inline void *jwv_malloc(size_t n) {
  vrf_enter_allocator();
  void *p = jw_malloc(n);
  vrf_leave_allocator();
  VRF_ASSERT(p != NULL);
  VRF_ASSERT(((uintptr_t)p & 15) == 0);
  vrf_block_live(p, n);
  return p;
}

static inline void jwv_free(void *p) {
  vrf_block_dead(p);
  vrf_enter_allocator();
  jw_free(p);
  vrf_leave_allocator();
}

/* A backend range of `granules` 4 KiB granules (jw_pages_alloc, the page
 * source's own entry), as allocator code. The client does not touch it. */
static inline void *jwv_range(size_t granules) {
  vrf_enter_allocator();
  void *p = jw_pages_alloc(granules, JW_KIND_LARGE, NULL, NULL);
  vrf_leave_allocator();
  VRF_ASSERT(p != NULL);
  return p;
}

/* jw_option_set, as allocator code. */
static inline void jwv_option(const char *name, long v) {
  vrf_enter_allocator();
  int r = jw_option_set(name, v);
  vrf_leave_allocator();
  VRF_ASSERT(r == 0);
}

/* Fills a block with a pattern (plain writes: the race detector sees them)
 * and checks it back. */
static inline void jwv_fill(void *p, size_t n, int v) { memset(p, v, n); }
static inline void jwv_check(const void *p, size_t n, int v) {
  const unsigned char *c = p;
  for (size_t i = 0; i < n; i++) VRF_ASSERT(c[i] == (unsigned char)v);
}

typedef struct {
  jw_atomic_ptr v;
} jwv_box;

static inline void jwv_send(jwv_box *b, void *p) {
  jw_store(&b->v, p, JW_RELEASE); /* the program's own hand-off */
}

static inline void *jwv_receive(jwv_box *b) {
  void *p;
  while ((p = jw_load(&b->v, JW_ACQUIRE)) == NULL) jw_cpu_relax();
  return p;
}

#endif
