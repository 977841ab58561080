#include "slotmap.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define ST_BUSY1 (1u << 16)
#define ST_ZOMBIE (1u << 24)
#define ST_BAD (1u << 25)

int iosr_slotmap_init(iosr_slotmap *m, uint64_t nslots) {
  memset(m, 0, sizeof *m);
  m->nslots = nslots;
  m->nclusters = (uint32_t)((nslots + IOSR_CLUSTER_SLOTS - 1) / IOSR_CLUSTER_SLOTS);
  m->st = calloc(nslots, sizeof *m->st);
  m->rev = calloc(nslots, sizeof *m->rev);
  m->cl_owner = calloc(m->nclusters, sizeof *m->cl_owner);
  m->cl_used = calloc(m->nclusters, sizeof *m->cl_used);
  if (!m->st || !m->rev || !m->cl_owner || !m->cl_used) {
    iosr_slotmap_destroy(m);
    errno = ENOMEM;
    return -1;
  }
  /* The tail of a short last cluster does not exist: count it as used so the
   * cluster is never seen as entirely free by the extent search. */
  uint64_t tail = (uint64_t)m->nclusters * IOSR_CLUSTER_SLOTS - nslots;
  if (tail) m->cl_used[m->nclusters - 1] += (uint32_t)tail;
  m->gcl = UINT32_MAX;
  return 0;
}

void iosr_slotmap_destroy(iosr_slotmap *m) {
  free(m->st);
  free(m->rev);
  free(m->cl_owner);
  free(m->cl_used);
  memset(m, 0, sizeof *m);
}

static void take(iosr_slotmap *m, uint64_t s, uint32_t owner, uint32_t app, uint64_t vpn) {
  uint32_t c = (uint32_t)(s / IOSR_CLUSTER_SLOTS);
  if (m->cl_used[c]++ == 0 || m->cl_owner[c] == IOSR_CL_FREE) m->cl_owner[c] = owner;
  m->st[s] = 1;
  m->rev[s] = iosr_rev_pack(app, vpn);
  m->used++;
}

static void release(iosr_slotmap *m, uint64_t s) {
  uint32_t c = (uint32_t)(s / IOSR_CLUSTER_SLOTS);
  m->rev[s] = 0;
  if (--m->cl_used[c] == 0) {
    m->cl_owner[c] = IOSR_CL_FREE;
    if (c == m->gcl) m->gcl = UINT32_MAX;
  }
}

static int cluster_free(const iosr_slotmap *m, uint32_t c) {
  return c < m->nclusters && m->cl_used[c] == 0;
}

/* Any free slot, from the cursor on (the last resort of both policies). */
static uint32_t any_slot(iosr_slotmap *m, uint32_t owner, uint32_t app, uint64_t vpn) {
  for (uint64_t i = 0; i < m->nslots; i++) {
    uint64_t s = (m->slot_cursor + i) % m->nslots;
    if (iosr_slot_free(m, s)) {
      m->slot_cursor = s + 1;
      uint32_t c = (uint32_t)(s / IOSR_CLUSTER_SLOTS);
      take(m, s, m->cl_used[c] ? m->cl_owner[c] : owner, app, vpn);
      return (uint32_t)s;
    }
  }
  return IOSR_NO_SLOT;
}

uint32_t iosr_slot_alloc_global(iosr_slotmap *m, uint32_t app, uint64_t vpn) {
  for (;;) {
    if (m->gcl != UINT32_MAX) {
      uint64_t base = (uint64_t)m->gcl * IOSR_CLUSTER_SLOTS;
      while (m->gnext < IOSR_CLUSTER_SLOTS) {
        uint64_t s = base + m->gnext++;
        if (s < m->nslots && iosr_slot_free(m, s)) {
          take(m, s, IOSR_CL_GLOBAL, app, vpn);
          return (uint32_t)s;
        }
      }
      m->gcl = UINT32_MAX;
    }
    uint32_t found = UINT32_MAX;
    for (uint32_t i = 0; i < m->nclusters; i++) {
      uint32_t c = (m->cl_cursor + i) % m->nclusters;
      if (cluster_free(m, c)) {
        found = c;
        break;
      }
    }
    if (found == UINT32_MAX) return any_slot(m, IOSR_CL_GLOBAL, app, vpn);
    m->cl_cursor = found + 1;
    m->gcl = found;
    m->gnext = 0;
  }
}

/* ---- process-oriented extents ---- */

void iosr_extmap_init(iosr_extmap *x) {
  x->cur = UINT32_MAX;
  x->next = 0;
}

void iosr_extmap_destroy(iosr_extmap *x) { iosr_extmap_init(x); }

static int extent_free(const iosr_slotmap *m, uint32_t e) {
  return cluster_free(m, 2 * e) && cluster_free(m, 2 * e + 1);
}

/* The extent is the app's: it took it and has not given all of it back. */
static int extent_ours(const iosr_slotmap *m, uint32_t e, uint32_t own) {
  uint32_t c0 = m->cl_owner[2 * e], c1 = m->cl_owner[2 * e + 1];
  return (c0 == own || c1 == own) && (c0 == own || c0 == IOSR_CL_FREE) && (c1 == own || c1 == IOSR_CL_FREE);
}

/* The app's next extent after `from` (cyclic) with a free slot. */
static uint32_t own_extent_with_room(const iosr_slotmap *m, uint32_t own, uint32_t from, uint32_t next) {
  for (uint32_t i = 1; i <= next; i++) {
    uint32_t e = (from + i) % next;
    if (extent_ours(m, e, own) && m->cl_used[2 * e] + m->cl_used[2 * e + 1] < IOSR_EXTENT_SLOTS) return e;
  }
  return UINT32_MAX;
}

uint32_t iosr_slot_alloc_process(iosr_slotmap *m, iosr_extmap *x, uint32_t app, uint64_t vpn) {
  uint32_t next = m->nclusters / 2, own = app + 2;
  for (int round = 0; round < 2; round++) {
    if (x->cur != UINT32_MAX) {
      /* the extent is still ours unless all of it was freed and taken since */
      uint32_t c0 = m->cl_owner[2 * x->cur], c1 = m->cl_owner[2 * x->cur + 1];
      int ours = (c0 == own || c0 == IOSR_CL_FREE) && (c1 == own || c1 == IOSR_CL_FREE);
      while (ours && x->next < IOSR_EXTENT_SLOTS) {
        uint64_t s = (uint64_t)x->cur * IOSR_EXTENT_SLOTS + x->next++;
        if (s < m->nslots && iosr_slot_free(m, s)) {
          take(m, s, own, app, vpn);
          return (uint32_t)s;
        }
      }
    }
    if (round) break;
    /* a new extent: right after the current one if free, else the first free */
    uint32_t e = UINT32_MAX;
    if (x->cur != UINT32_MAX && x->cur + 1 < next && extent_free(m, x->cur + 1)) e = x->cur + 1;
    for (uint32_t i = 0; e == UINT32_MAX && i < next; i++) {
      uint32_t c = (m->ext_cursor + i) % next;
      if (extent_free(m, c)) e = c;
    }
    if (e == UINT32_MAX) {
      /* No free extent: the holes in the app's own extents, left by its pages
       * that came back in, before any other app's space. Without this the
       * area fragments into extents that each keep a few cold pages, and
       * every later swap-out spills single slots across the whole area (seen
       * in the evaluation with an area 1.25x the apps' memory). */
      uint32_t h = own_extent_with_room(m, own, x->cur == UINT32_MAX ? next - 1 : x->cur, next);
      if (h == UINT32_MAX) break;
      m->holes++;
      x->cur = h;
      x->next = 0;
      continue;
    }
    m->ext_cursor = e + 1;
    m->cl_owner[2 * e] = m->cl_owner[2 * e + 1] = own;
    x->cur = e;
    x->next = 0;
  }
  uint32_t s = any_slot(m, own, app, vpn);
  if (s != IOSR_NO_SLOT) m->spills++;
  return s;
}

int iosr_slot_ref(iosr_slotmap *m, uint64_t s) {
  if ((m->st[s] & 0xffffu) == 0xffffu) return -1;
  m->st[s]++;
  m->used += 0; /* used counts slots, not references */
  return 0;
}

void iosr_slot_put(iosr_slotmap *m, uint64_t s) {
  if ((m->st[s] & 0xffffu) == 0) return;
  m->st[s]--;
  if (m->st[s] & 0xffffu) return;
  m->used--;
  if (m->st[s] & ST_BAD) return; /* stays counted in its cluster forever */
  if (m->st[s] & (0xffu << 16)) {
    m->st[s] |= ST_ZOMBIE;
    return;
  }
  release(m, s);
}

void iosr_slot_io_begin(iosr_slotmap *m, uint64_t s) { m->st[s] += ST_BUSY1; }

void iosr_slot_io_end(iosr_slotmap *m, uint64_t s) {
  m->st[s] -= ST_BUSY1;
  if ((m->st[s] & ST_ZOMBIE) && !(m->st[s] & (0xffu << 16))) {
    m->st[s] &= ~ST_ZOMBIE;
    if (!(m->st[s] & ST_BAD)) release(m, s);
  }
}

void iosr_slot_mark_bad(iosr_slotmap *m, uint64_t s) {
  if (m->st[s] & ST_BAD) return;
  m->st[s] |= ST_BAD;
  m->bad++;
}

int iosr_slot_claim(iosr_slotmap *m, int process, uint64_t s, uint32_t app, uint64_t vpn) {
  if (s >= m->nslots || m->st[s] != 0) return -1;
  uint32_t c = (uint32_t)(s / IOSR_CLUSTER_SLOTS);
  uint32_t owner = process ? app + 2 : IOSR_CL_GLOBAL;
  if (m->cl_used[c] && m->cl_owner[c] != owner) owner = m->cl_owner[c];
  take(m, s, owner, app, vpn);
  return 0;
}
