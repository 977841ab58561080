/* See block_cache.h and docs/design/frontend.md ("The block cache"). */
#include "block_cache.h"

#include "../pages/page_source.h"
#include "../common/options.h"
#include "../pages/tier_pages.h"
#include "../midend/midend.h"
#include "../reclaim/reclaim.h"

_Static_assert(JW_BC_MID_BINS == JW_MID_NCLASSES, "one bin per midend class");

#define G(x) ((uint32_t)(x) << 12)

/* Midend classes (jw_mid_class_size), then the range classes of 5..256
 * granules (backend/size_class.h: 5 6 7 8 10 12 14 16 | 20 ... 256). */
const uint32_t jw_bc_bytes[JW_BC_BINS] = {
    2048,   2560,   3072,   3584,   4096,   5120,   6144,   7168,   8192,   10240,  12288,  14336,  16384,
    G(5),   G(6),   G(7),   G(8),   G(10),  G(12),  G(14),  G(16),  /* group 0 */
    G(20),  G(24),  G(28),  G(32),  G(40),  G(48),  G(56),  G(64),  /* group 1 */
    G(80),  G(96),  G(112), G(128), G(160), G(192), G(224), G(256),
};

/* Blocks per bin: enough for a class freed and allocated in turn (the
 * common pattern) and a few in flight, few enough that classes the thread
 * stopped using hold little; every bin of group 0 fits JW_BC_MAX_BYTES and
 * of group 1 JW_BC_BIG_MAX_BYTES (test_size_class). */
const uint8_t jw_bc_cap[JW_BC_BINS] = {
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* midend: 8-64 KiB a bin */
    3, 3, 3, 3, 2, 2, 2, 2,                /* 20-64 KiB ranges: 60-128 KiB a bin */
    4, 4, 4, 4, 4, 4, 4, 4,                /* 80-256 KiB ranges: 320 KiB-1 MiB a bin */
    3, 3, 3, 3, 2, 2, 2, 2,                /* 320 KiB-1 MiB ranges: 0.94-2 MiB a bin */
};

#define N JW_BC_NONE
const uint8_t jw_bc_range_bin[JW_BC_RANGE_MAX_GRANULES + 1] = {
    N, N, N, N, N, 13, 14, 15, 16, 17, 17, 18, 18, 19, 19, 20, /* granules 0..15 */
    20, 21, 21, 21, 21, 22, 22, 22, 22, 23, 23, 23, 23, 24, 24, 24, /* granules 16..31 */
    24, 25, 25, 25, 25, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, /* granules 32..47 */
    26, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28, 28, 28, 28, 28, /* granules 48..63 */
    28, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, 29, /* granules 64..79 */
    29, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, 30, /* granules 80..95 */
    30, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, 31, /* granules 96..111 */
    31, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, 32, /* granules 112..127 */
    32, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, /* granules 128..143 */
    33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, 33, /* granules 144..159 */
    33, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, /* granules 160..175 */
    34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, 34, /* granules 176..191 */
    34, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, /* granules 192..207 */
    35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, 35, /* granules 208..223 */
    35, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, /* granules 224..239 */
    36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, 36, /* granules 240..255 */
    36, /* granules 256..256 */
};
#undef N

void jw_bc_kick(void) { jw_reclaim_kick(); }

void jw_bc_init(jw_bcache *bc) {
  for (unsigned i = 0; i < JW_BC_BINS; i++) {
    bc->bin[i].bytes = jw_bc_bytes[i];
    bc->bin[i].cap = jw_bc_cap[i];
    bc->bin[i].grp = i >= JW_BC_BIG_FIRST;
  }
  bc->limit[0] = JW_BC_MAX_BYTES;
  bc->limit[1] = JW_BC_BIG_MIN_BYTES;
  if (jw_low_memory()) {
    /* docs/design/api.md, "Low-memory configuration": at most two blocks a
     * bin and 64 KiB in all for midend blocks and ranges up to 64 KiB; no
     * 80 KiB-1 MiB range is kept (a bin of capacity 0 refuses every put). */
    for (unsigned i = 0; i < JW_BC_BINS; i++)
      bc->bin[i].cap = i >= JW_BC_BIG_FIRST ? 0 : (uint8_t)(jw_bc_cap[i] < 2 ? jw_bc_cap[i] : 2);
    bc->limit[0] = JW_BC_LOW_MEMORY_BYTES;
  }
}

/* Moves the k oldest blocks of bin i (the end of its list) to out. */
static size_t take_bottom(jw_bcache *bc, unsigned i, unsigned k, void **out, uint8_t *out_bin) {
  jw_bc_bin *b = &bc->bin[i];
  jw_block *x = b->top, *last_kept = NULL;
  for (unsigned j = k; j < b->n; j++) last_kept = x, x = jw_block_next(x);
  if (last_kept) jw_block_set_next(last_kept, NULL);
  else b->top = NULL;
  for (unsigned j = 0; j < k; j++, x = jw_block_next(x)) {
    out[j] = x;
    out_bin[j] = (uint8_t)i;
  }
  b->n = (uint8_t)(b->n - k);
  bc->used[b->grp] -= k * jw_bc_bytes[i];
  return k;
}

/* Moves out whole bins of group g other than `keep` (the one holding the
 * most bytes first: the fewest classes emptied, each one the thread may ask
 * for again) until `need` more bytes fit the group's budget. */
static size_t evict_group(jw_bcache *bc, unsigned g, unsigned keep, uint32_t need, void **out, uint8_t *out_bin) {
  size_t n = 0;
  unsigned lo = g ? JW_BC_BIG_FIRST : 0, hi = g ? JW_BC_BINS : JW_BC_BIG_FIRST;
  while (bc->used[g] + need > bc->limit[g]) {
    unsigned victim = keep;
    uint32_t most = 0;
    for (unsigned j = lo; j < hi; j++) {
      uint32_t held = bc->bin[j].n * jw_bc_bytes[j];
      if (j != keep && held > most) most = held, victim = j;
    }
    if (victim == keep) break; /* only `keep` holds bytes */
    n += take_bottom(bc, victim, bc->bin[victim].n, out + n, out_bin + n);
    bc->bin[victim].stale = 0;
  }
  return n;
}

size_t jw_bc_age_locked(jw_bcache *bc, void **out, uint8_t *out_bin, uint64_t *left) {
  size_t n = 0;
  bc->kicked = 0; /* this pass sees what is cached now; a later put kicks again */
  if (!JW_BC_ENABLED) {
    *left = 0;
    return 0;
  }
  if ((bc->used[0] | bc->used[1]) != 0) {
    for (unsigned i = 0; i < JW_BC_BINS; i++) {
      jw_bc_bin *b = &bc->bin[i];
      if (b->stale) n += take_bottom(bc, i, b->stale, out + n, out_bin + n);
      b->stale = b->n; /* every entry left is a candidate for the next pass */
    }
  }
  /* Group 1's budget for the next interval: what stayed cached, the entries
   * put or taken during the one that ended (so it holds at once). */
  bc->limit[1] = bc->used[1] > JW_BC_BIG_MIN_BYTES ? bc->used[1] : JW_BC_BIG_MIN_BYTES;
  *left = (uint64_t)bc->used[0] + bc->used[1];
  return n;
}

size_t jw_bc_evict_locked(jw_bcache *bc, unsigned i, void *p, void **out, uint8_t *out_bin) {
  jw_bc_bin *b = &bc->bin[i];
  size_t n = evict_group(bc, b->grp, i, jw_bc_bytes[i], out, out_bin);
  /* Bin i's own oldest entries when the other bins did not make room (a
   * budget the aging pass lowered below what bin i holds). */
  while (bc->used[b->grp] + jw_bc_bytes[i] > bc->limit[b->grp] && b->n != 0) {
    n += take_bottom(bc, i, 1, out + n, out_bin + n);
    if (b->stale) b->stale--; /* the bottom entry was the oldest stale one */
  }
  return n + jw_bc_keep_locked(bc, i, p);
}

size_t jw_bc_keep_locked(jw_bcache *bc, unsigned i, void *p) {
  jw_bc_bin *b = &bc->bin[i];
  jw_block_set_next(p, b->top); /* fits: the caller checked */
  b->top = p;
  b->n++;
  bc->used[b->grp] += jw_bc_bytes[i];
  return 0;
}

void jw_bc_put_evicting(jw_bcache *bc, jw_lock *lk, unsigned i, void *p) {
  void *out[JW_BC_BINS * JW_BC_SLOTS];
  uint8_t bin[JW_BC_BINS * JW_BC_SLOTS];
  unsigned g = bc->bin[i].grp;
  if (g) { /* freeing into a full cache: the budget grows by what it needs */
    uint32_t l = bc->limit[1] + jw_bc_bytes[i];
    bc->limit[1] = l < JW_BC_BIG_MAX_BYTES ? l : JW_BC_BIG_MAX_BYTES;
  }
  size_t n = bc->used[g] + jw_bc_bytes[i] > bc->limit[g] ? jw_bc_evict_locked(bc, i, p, out, bin)
                                                         : jw_bc_keep_locked(bc, i, p);
  bool kicked = bc->kicked;
  bc->kicked = 1;
  jw_bc_unlock(lk);
  jw_bc_give_back(out, bin, n, false);
  if (!kicked) jw_bc_kick();
}

size_t jw_bc_take_above_locked(jw_bcache *bc, void **out, uint8_t *out_bin) {
  size_t n = 0;
  if (!JW_BC_ENABLED || (bc->used[0] | bc->used[1]) == 0) return 0;
  for (unsigned i = 0; i < JW_BC_BINS; i++) {
    jw_bc_bin *b = &bc->bin[i];
    jw_block *prev = NULL, *x = b->top;
    unsigned pos = 0, len = b->n;
    while (x) {
      jw_block *next = jw_block_next(x); /* blocks are poisoned: through the helpers */
      if (!jw_pages_above_place(x)) {
        prev = x;
        x = next;
        pos++;
        continue;
      }
      if (prev) jw_block_set_next(prev, next);
      else b->top = next;
      out[n] = x;
      out_bin[n++] = (uint8_t)i;
      /* One of the `stale` bottom entries (positions len - stale .. len - 1) leaves. */
      if (pos >= len - b->stale) b->stale--;
      b->n--;
      bc->used[b->grp] -= jw_bc_bytes[i];
      len--;
      x = next;
    }
  }
  return n;
}

size_t jw_bc_take_all_locked(jw_bcache *bc, void **out, uint8_t *out_bin) {
  size_t n = 0;
  if (JW_BC_ENABLED && (bc->used[0] | bc->used[1]) != 0)
    for (unsigned i = 0; i < JW_BC_BINS; i++) {
      jw_bc_bin *b = &bc->bin[i];
      n += take_bottom(bc, i, b->n, out + n, out_bin + n);
      b->stale = 0;
    }
  return n;
}

void jw_bc_give_back(void **blocks, const uint8_t *bins, size_t n, bool aged) {
  for (size_t k = 0; k < n; k++) {
    unsigned i = bins[k];
    jw_block *b = blocks[k];
    if (i < JW_BC_MID_BINS) {
      jw_mid_give_back(b, aged);
      continue;
    }
    jw_block_set_free(b, NULL, 0); /* no FREE_KEY outside a thread cache */
    size_t granules = jw_bc_bytes[i] >> JW_GRANULE_SHIFT;
    if (aged) jw_tier_release_aged(b, granules);
    else jw_tier_release_pages(b, granules);
  }
}
