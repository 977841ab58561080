/* Bump allocation for the model's data. The arena is reserved once in the
 * zygote; each exploration child inherits it copy-on-write, so whatever a
 * child allocates vanishes with it and nothing is ever freed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "rt.h"

#define ARENA_SIZE (8ull << 30) /* address space only (MAP_NORESERVE) */

static char *arena_base, *arena_top, *arena_end;

void arena_init(void) {
  arena_base = mmap(NULL, ARENA_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                    -1, 0);
  if (arena_base == MAP_FAILED) {
    perror("vrf: cannot reserve the model arena");
    exit(2);
  }
  arena_top = arena_base;
  arena_end = arena_base + ARENA_SIZE;
}

void *arena_alloc(size_t n) {
  n = (n + 15) & ~(size_t)15;
  if ((size_t)(arena_end - arena_top) < n) fail("internal", 0, 0, "model arena exhausted (%zu bytes)", n);
  void *p = arena_top;
  arena_top += n; /* fresh pages are zero */
  return p;
}

void *arena_grow(void *old, size_t old_n, size_t new_n) {
  void *p = arena_alloc(new_n);
  if (old_n) memcpy(p, old, old_n);
  return p;
}

void vc_join(vc_t *a, const vc_t *b) {
  for (int i = 0; i < MAXT; i++)
    if (b->c[i] > a->c[i]) a->c[i] = b->c[i];
}

/* Two events are dependent when they touch one location and one of them reads
 * while the other writes. Two writes commute: mo placement already explores
 * both orders (docs/design/verification.md, "Exploration and reduction"). */
bool fp_dependent(const footprint_t *a, const footprint_t *b) {
  if (a->any || b->any) {
    /* `any` reads every location (an await of many): it depends on writes. */
    const footprint_t *y = a->any ? b : a;
    if (y->any) return false;
    for (int i = 0; i < y->n; i++)
      if (y->e[i].rw & FP_W) return true;
    return false;
  }
  for (int i = 0; i < a->n; i++)
    for (int j = 0; j < b->n; j++)
      if (a->e[i].loc == b->e[j].loc &&
          (((a->e[i].rw & FP_W) && (b->e[j].rw & FP_R)) || ((a->e[i].rw & FP_R) && (b->e[j].rw & FP_W))))
        return true;
  return false;
}

/* Whether reversing a race (a executed before b) can produce new behaviour:
 * only if a reads and b writes. A load that moves before a store can read only
 * a subset of what it could read after it, and the store's own choices do not
 * depend on the load, so such a reversal is dominated by the explored order. */
bool fp_reversible(const footprint_t *a, const footprint_t *b) {
  if (a->any) {
    for (int i = 0; i < b->n; i++)
      if (b->e[i].rw & FP_W) return true;
    return false;
  }
  for (int i = 0; i < a->n; i++) {
    if (!(a->e[i].rw & FP_R)) continue;
    if (b->any) return false;
    for (int j = 0; j < b->n; j++)
      if (a->e[i].loc == b->e[j].loc && (b->e[j].rw & FP_W)) return true;
  }
  return false;
}
