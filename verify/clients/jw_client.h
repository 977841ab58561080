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

#include "backend/backend.h"
#include "pages/page_source.h"
#include "midend/midend.h"
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

/* Frees backend range `start` through the backend's own entry (bitmap put,
 * locked merge or deferred list), as allocator code; it must succeed. */
static inline void jwv_range_free(void *start) {
  vrf_enter_allocator();
  int rc = jw_backend_free(start);
  vrf_leave_allocator();
  VRF_ASSERT(rc == 0);
}

/* The backend's root counts: now mapped, and mapped since the start. */
static inline jw_backend_stats jwv_backend_stats(void) {
  jw_backend_stats st;
  vrf_enter_allocator();
  jw_backend_get_stats(&st);
  vrf_leave_allocator();
  return st;
}

/* Call when nothing is live in the backend: every mapped root must have
 * merged back whole, so each root still mapped serves a whole-root (4 MiB)
 * request without a new mapping (a range lost on a list, or a merge
 * missed, leaves pieces that never join, and a new root is mapped instead).
 * A root may also go back to the OS during a request (whole, beyond the
 * kept count): it merged, and there is one root fewer to ask for. Which root
 * serves first does not matter: an allocation that found the lock busy may
 * have mapped a second root without it (issue 8). */
static inline void jwv_check_roots_whole(void) {
  uint64_t mapped = jwv_backend_stats().roots_mapped_total;
  for (uint64_t i = 0; i < jwv_backend_stats().pages.roots; i++) {
    void *root = jwv_range(JW_ROOT_GRANULES);
    if (jwv_backend_stats().roots_mapped_total != mapped)
      vrf_fail("whole-root request %lu (at %p) mapped a new root: the free ranges of a root did not merge back",
               (unsigned long)i + 1, root);
  }
}

/* One aging pass of the reclaimer over the tiers' caches (page pools, block
 * caches), as allocator code: what the reclaim thread's cycle runs first. */
uint64_t jw_tc_age_pools(void); /* frontend/thread_cache.h (not included: its class constants clash with the
                                 backend's in clients that use both) */
static inline void jwv_age_tiers(void) {
  vrf_enter_allocator();
  jw_tc_age_pools();
  vrf_leave_allocator();
}

/* jw_option_set, as allocator code. */
static inline void jwv_option(const char *name, long v) {
  vrf_enter_allocator();
  int r = jw_option_set(name, v);
  vrf_leave_allocator();
  VRF_ASSERT(r == 0);
}

/* Reclamation on, driven by the client: no reclaim thread (a client thread
 * runs its work instead), no cycle due by time or by the watermark. */
static inline void jwv_reclaim_by_client(void) {
  jwv_option("RECLAIM_THREAD", 0);
  jwv_option("RECLAIM_INTERVAL_MS", 600000);
  jwv_option("RECLAIM_WATERMARK", 1L << 40);
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
