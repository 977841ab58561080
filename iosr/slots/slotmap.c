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
  m->ext_chunk = calloc(m->nclusters / 2 + 1, sizeof *m->ext_chunk);
  if (!m->st || !m->rev || !m->cl_owner || !m->cl_used || !m->ext_chunk) {
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
  free(m->ext_chunk);
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

/* ---- extent map ---- */

static uint32_t hash64(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdull;
  k ^= k >> 33;
  return (uint32_t)k;
}

static uint32_t *ext_find(iosr_extmap *x, uint64_t chunk) {
  if (!x->cap) return NULL;
  for (uint32_t i = hash64(chunk) & (x->cap - 1);; i = (i + 1) & (x->cap - 1)) {
    if (x->key[i] == chunk + 1) return &x->ext[i];
    if (!x->key[i]) return NULL;
  }
}

static int ext_put(iosr_extmap *x, uint64_t chunk, uint32_t e) {
  uint32_t *p = ext_find(x, chunk);
  if (p) {
    *p = e;
    return 0;
  }
  if ((x->n + 1) * 2 > x->cap) {
    uint32_t nc = x->cap ? x->cap * 2 : 64;
    uint64_t *nk = calloc(nc, sizeof *nk);
    uint32_t *ne = calloc(nc, sizeof *ne);
    if (!nk || !ne) {
      free(nk);
      free(ne);
      return -1;
    }
    for (uint32_t i = 0; i < x->cap; i++) {
      if (!x->key[i]) continue;
      uint32_t j = hash64(x->key[i] - 1) & (nc - 1);
      while (nk[j]) j = (j + 1) & (nc - 1);
      nk[j] = x->key[i];
      ne[j] = x->ext[i];
    }
    free(x->key);
    free(x->ext);
    x->key = nk;
    x->ext = ne;
    x->cap = nc;
  }
  uint32_t i = hash64(chunk) & (x->cap - 1);
  while (x->key[i]) i = (i + 1) & (x->cap - 1);
  x->key[i] = chunk + 1;
  x->ext[i] = e;
  x->n++;
  return 0;
}

void iosr_extmap_destroy(iosr_extmap *x) {
  free(x->key);
  free(x->ext);
  memset(x, 0, sizeof *x);
}

static int extent_free(const iosr_slotmap *m, uint32_t e) {
  return cluster_free(m, 2 * e) && cluster_free(m, 2 * e + 1);
}

/* Does the app still hold extent e for chunk? (Lazy validation: an extent whose
 * last slot was freed went back to the pool and may belong to someone else.) */
static int holds(const iosr_slotmap *m, uint32_t e, uint32_t app, uint64_t chunk) {
  uint32_t own = app + 2;
  return 2 * e + 1 < m->nclusters && m->ext_chunk[e] == chunk &&
         (m->cl_owner[2 * e] == own || m->cl_owner[2 * e + 1] == own) &&
         m->cl_owner[2 * e] != IOSR_CL_GLOBAL && m->cl_owner[2 * e + 1] != IOSR_CL_GLOBAL &&
         (m->cl_owner[2 * e] == own || m->cl_owner[2 * e] == IOSR_CL_FREE) &&
         (m->cl_owner[2 * e + 1] == own || m->cl_owner[2 * e + 1] == IOSR_CL_FREE);
}

uint32_t iosr_slot_alloc_process(iosr_slotmap *m, iosr_extmap *x, uint32_t app, uint64_t vpn) {
  uint64_t chunk = vpn >> IOSR_EXTENT_SHIFT;
  uint32_t next = m->nclusters / 2;
  uint32_t *pe = ext_find(x, chunk);
  uint32_t e = UINT32_MAX;
  if (pe && holds(m, *pe, app, chunk)) e = *pe;
  if (e == UINT32_MAX) {
    uint32_t *prev = chunk ? ext_find(x, chunk - 1) : NULL;
    if (prev && *prev + 1 < next && extent_free(m, *prev + 1)) e = *prev + 1;
    for (uint32_t i = 0; e == UINT32_MAX && i < next; i++) {
      uint32_t c = (m->cl_cursor / 2 + i) % next;
      if (extent_free(m, c)) e = c;
    }
    if (e != UINT32_MAX) {
      m->ext_chunk[e] = chunk;
      m->cl_owner[2 * e] = m->cl_owner[2 * e + 1] = app + 2;
      if (ext_put(x, chunk, e)) e = UINT32_MAX;
    }
  }
  if (e != UINT32_MAX) {
    uint64_t s = (uint64_t)e * IOSR_EXTENT_SLOTS + (vpn & (IOSR_EXTENT_SLOTS - 1));
    if (s < m->nslots && iosr_slot_free(m, s)) {
      take(m, s, app + 2, app, vpn);
      return (uint32_t)s;
    }
  }
  uint32_t s = any_slot(m, app + 2, app, vpn);
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

int iosr_slot_claim(iosr_slotmap *m, iosr_extmap *x, uint64_t s, uint32_t app, uint64_t vpn) {
  if (s >= m->nslots || m->st[s] != 0) return -1;
  uint32_t c = (uint32_t)(s / IOSR_CLUSTER_SLOTS);
  uint32_t owner = IOSR_CL_GLOBAL;
  if (x) {
    uint64_t chunk = vpn >> IOSR_EXTENT_SHIFT;
    uint32_t e = (uint32_t)(s / IOSR_EXTENT_SLOTS);
    if ((s & (IOSR_EXTENT_SLOTS - 1)) == (vpn & (IOSR_EXTENT_SLOTS - 1)) && 2 * e + 1 < m->nclusters &&
        (m->cl_owner[2 * e] == IOSR_CL_FREE || m->cl_owner[2 * e] == app + 2) &&
        (m->cl_owner[2 * e + 1] == IOSR_CL_FREE || m->cl_owner[2 * e + 1] == app + 2)) {
      owner = app + 2;
      m->ext_chunk[e] = chunk;
      m->cl_owner[2 * e] = m->cl_owner[2 * e + 1] = owner;
      ext_put(x, chunk, e);
    }
  }
  if (m->cl_used[c] && m->cl_owner[c] != owner) owner = m->cl_owner[c];
  take(m, s, owner, app, vpn);
  return 0;
}
