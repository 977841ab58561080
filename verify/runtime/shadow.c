/* Data-race detection on plain (non-atomic) accesses, FastTrack-style with
 * full per-byte precision: each byte of application memory that was touched
 * has a cell with its last plain write (thread, epoch) and the epoch of the
 * last plain read by every thread. An access races with a previous one when
 * that one does not happen before it (vector clocks). Cells live in shadow
 * chunks allocated on first touch. */
#include <stdio.h>
#include <string.h>

#include "rt.h"

enum { CELL_W = 1, CELL_ATOMIC = 2 };

typedef struct cell {
  uint32_t wep;
  uint8_t wtid, flags;
  uint16_t pad;
  uint32_t rep[MAXT];
} cell_t;

/* Shadow cells are allocated per 64-byte chunk of application memory, so a
 * thread's stack or a scattered structure costs a few KiB, not 160 KiB per page. */
#define CHUNK_SHIFT 6
#define CHUNK (1u << CHUNK_SHIFT)
#define NPBUCKETS (1u << 16)

typedef struct spage {
  uintptr_t page; /* chunk number */
  struct spage *next;
  cell_t cell[CHUNK];
} spage_t;

static spage_t **pbuckets;

static unsigned pbucket(uintptr_t pg) { return (unsigned)((pg * 0x9E3779B97F4A7C15ull) >> 48) & (NPBUCKETS - 1); }

static spage_t *page_of(uintptr_t a, bool create) {
  uintptr_t pg = a >> CHUNK_SHIFT;
  if (!pbuckets) {
    if (!create) return NULL;
    pbuckets = arena_alloc(NPBUCKETS * sizeof *pbuckets);
  }
  unsigned b = pbucket(pg);
  for (spage_t *p = pbuckets[b]; p; p = p->next)
    if (p->page == pg) return p;
  if (!create) return NULL;
  spage_t *p = arena_alloc(sizeof *p);
  p->page = pg;
  p->next = pbuckets[b];
  pbuckets[b] = p;
  return p;
}

static cell_t *cell_of(uintptr_t a, bool create) {
  spage_t *p = page_of(a, create);
  return p ? &p->cell[a & (CHUNK - 1)] : NULL;
}

static void race(vthread_t *t, uintptr_t a, unsigned n, bool write, bool atomic, int other, bool other_write,
                 bool other_atomic, const vrf_site *s, uintptr_t pc) {
  char site[300], addr[200];
  fmt_site(site, sizeof site, s, pc);
  fmt_addr(addr, sizeof addr, a);
  fail("data race", a, n,
       "T%d %s%s %u byte%s at %s (%s) is not ordered by happens-before with an earlier %s%s by T%d "
       "(see the accesses to this address below)",
       t->id, atomic ? "atomic " : "plain ", write ? "write of" : "read of", n, n == 1 ? "" : "s", addr, site,
       other_atomic ? "atomic " : "plain ", other_write ? "write" : "read", other);
}

void shadow_access(vthread_t *t, uintptr_t a, unsigned n, bool write, uintptr_t pc) {
  if (++t->plain > PLAIN_BOUND)
    fail("loop bound", a, n,
         "T%d made more than %u memory accesses without an atomic operation: a loop that does not terminate "
         "within the bound",
         t->id, PLAIN_BOUND);
  if (tracing()) trace_watch(t, a, n, write, false, pc, NULL);
  regions_check(t, a, n, write, pc, NULL);
  uint32_t ep = t->vc.c[t->id];
  int me = t->id;
  bool atomic = false;
  spage_t *pg = NULL;
  for (unsigned i = 0; i < n; i++) {
    uintptr_t b = a + i;
    if (!pg || pg->page != b >> CHUNK_SHIFT) pg = page_of(b, true);
    cell_t *c = &pg->cell[b & (CHUNK - 1)];
    atomic |= (c->flags & CELL_ATOMIC) != 0;
    if ((c->flags & CELL_W) && c->wtid != me && c->wep > t->vc.c[c->wtid])
      race(t, a, n, write, false, c->wtid, true, false, NULL, pc);
    if (write) {
      for (int u = 0; u < rt.nthreads; u++)
        if (u != me && c->rep[u] > t->vc.c[u]) race(t, a, n, write, false, u, false, false, NULL, pc);
      c->flags |= CELL_W;
      c->wtid = (uint8_t)me;
      c->wep = ep;
      memset(c->rep, 0, sizeof c->rep);
    } else {
      c->rep[me] = ep;
    }
  }
  if (atomic) model_plain_overlap(t, a, n, write);
}

void shadow_check_atomic(vthread_t *t, uintptr_t a, unsigned n, bool write, const vrf_site *s) {
  for (unsigned i = 0; i < n; i++) {
    cell_t *c = cell_of(a + i, false);
    if (!c) continue;
    if ((c->flags & CELL_W) && c->wtid != t->id && c->wep > t->vc.c[c->wtid])
      race(t, a, n, write, true, c->wtid, true, false, s, 0);
    if (write)
      for (int u = 0; u < rt.nthreads; u++)
        if (u != t->id && c->rep[u] > t->vc.c[u]) race(t, a, n, write, true, u, false, false, s, 0);
  }
}

void shadow_set_atomic(uintptr_t a, unsigned n) {
  for (unsigned i = 0; i < n; i++) cell_of(a + i, true)->flags |= CELL_ATOMIC;
}

bool shadow_is_atomic(uintptr_t a, unsigned n) {
  for (uintptr_t b = a >= 7 ? a - 7 : 0; b < a + n; b++) {
    cell_t *c = cell_of(b, false);
    if (c && (c->flags & CELL_ATOMIC)) return true;
  }
  return false;
}

uint32_t shadow_last_writer(uintptr_t a, int *tid) {
  cell_t *c = cell_of(a, false);
  if (!c || !(c->flags & CELL_W)) return 0;
  *tid = c->wtid;
  return c->wep;
}

/* Fresh memory (mmap) or memory returned to the OS: forget its history. */
void shadow_forget(uintptr_t a, size_t n) {
  if (!pbuckets) return;
  for (uintptr_t p = a & ~(uintptr_t)(CHUNK - 1); p < a + n; p += CHUNK) {
    spage_t *pg = page_of(p, false);
    if (!pg) continue;
    uintptr_t lo = p < a ? a : p, hi = p + CHUNK > a + n ? a + n : p + CHUNK;
    memset(&pg->cell[lo & (CHUNK - 1)], 0, (hi - lo) * sizeof(cell_t));
  }
}

/* Memory about to become illegal or change under everyone (a block freed,
 * memory unmapped or released to the OS): every earlier access to it by
 * another thread must happen before this, else that thread may still use it.
 * Only bytes that have shadow cells were ever accessed. */
void shadow_check_release(vthread_t *t, uintptr_t a, size_t n, const char *what) {
  if (!pbuckets || !t) return;
  for (uintptr_t p = a & ~(uintptr_t)(CHUNK - 1); p < a + n; p += CHUNK) {
    spage_t *pg = page_of(p, false);
    if (!pg) continue;
    uintptr_t lo = p < a ? a : p, hi = p + CHUNK > a + n ? a + n : p + CHUNK;
    for (uintptr_t b = lo; b < hi; b++) {
      cell_t *c = &pg->cell[b & (CHUNK - 1)];
      int other = -1;
      bool w = false;
      if ((c->flags & CELL_W) && c->wtid != t->id && c->wep > t->vc.c[c->wtid]) other = c->wtid, w = true;
      for (int u = 0; u < rt.nthreads && other < 0; u++)
        if (u != t->id && c->rep[u] > t->vc.c[u]) other = u;
      if (other >= 0) {
        char addr[200];
        fmt_addr(addr, sizeof addr, b);
        fail("out of bounds", b, 1,
             "T%d %s [%#lx, +%zu) while T%d's %s of %s is not ordered before it (use after free)", t->id, what,
             (unsigned long)a, n, other, w ? "write" : "read", addr);
      }
    }
  }
  model_check_release(t, a, n, what);
}
