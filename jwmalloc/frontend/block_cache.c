/* See block_cache.h and docs/design/frontend.md ("The block cache"). */
#include "block_cache.h"

#include "../backend/page_source.h"
#include "../common/tier_pages.h"
#include "../midend/midend.h"
#include "../reclaim/reclaim.h"

_Static_assert(JW_BC_MID_BINS == JW_MID_NCLASSES, "one bin per midend class");

#define G(x) ((uint32_t)(x) << 12)

/* Midend classes (jw_mid_class_size), then the range classes of 5..16
 * granules (backend/size_class.h: 5 6 7 8 10 12 14 16). */
const uint32_t jw_bc_bytes[JW_BC_BINS] = {
    2048, 2560, 3072, 3584, 4096, 5120, 6144, 7168, 8192, 10240, 12288, 14336, 16384,
    G(5), G(6), G(7), G(8), G(10), G(12), G(14), G(16),
};

/* Blocks per bin: enough for a class freed and allocated in turn (the
 * common pattern) and a few in flight, few enough that classes the thread
 * stopped using hold little; every bin fits JW_BC_MAX_BYTES. */
const uint8_t jw_bc_cap[JW_BC_BINS] = {
    4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, /* midend: 8-64 KiB a bin */
    3, 3, 3, 3, 2, 2, 2, 2,                /* 20-64 KiB ranges: 60-128 KiB a bin */
};

#define N JW_BC_NONE
const uint8_t jw_bc_range_bin[JW_BC_RANGE_MAX_GRANULES + 1] = {
    N, N, N, N, N, 13, 14, 15, 16, 17, 17, 18, 18, 19, 19, 20, 20, /* granules 0..16 */
};
#undef N

void jw_bc_kick(void) { jw_reclaim_kick(); }

void jw_bc_init(jw_bcache *bc) {
  for (unsigned i = 0; i < JW_BC_BINS; i++) {
    bc->bin[i].bytes = jw_bc_bytes[i];
    bc->bin[i].cap = jw_bc_cap[i];
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
  bc->bytes -= k * jw_bc_bytes[i];
  return k;
}

size_t jw_bc_age_locked(jw_bcache *bc, void **out, uint8_t *out_bin, uint64_t *left) {
  size_t n = 0;
  bc->kicked = 0; /* this pass sees what is cached now; a later put kicks again */
  if (JW_BC_ENABLED && bc->bytes != 0)
    for (unsigned i = 0; i < JW_BC_BINS; i++) {
      jw_bc_bin *b = &bc->bin[i];
      if (b->stale) n += take_bottom(bc, i, b->stale, out + n, out_bin + n);
      b->stale = b->n; /* every entry left is a candidate for the next pass */
    }
  *left = bc->bytes;
  return n;
}

size_t jw_bc_evict_locked(jw_bcache *bc, unsigned i, void *p, void **out, uint8_t *out_bin) {
  size_t n = 0;
  /* Whole bins, the one holding the most bytes first, until p fits: the
   * fewest bins emptied (each a class the thread may ask for again). */
  while (bc->bytes + jw_bc_bytes[i] > JW_BC_MAX_BYTES) {
    unsigned victim = i;
    uint32_t most = 0;
    for (unsigned j = 0; j < JW_BC_BINS; j++) {
      uint32_t held = bc->bin[j].n * jw_bc_bytes[j];
      if (j != i && held > most) most = held, victim = j;
    }
    if (victim == i) break; /* cannot happen: bin i alone fits the cache */
    n += take_bottom(bc, victim, bc->bin[victim].n, out + n, out_bin + n);
    bc->bin[victim].stale = 0;
  }
  jw_bc_bin *b = &bc->bin[i];
  jw_block_set_next(p, b->top); /* fits: a bin holds at most JW_BC_MAX_BYTES */
  b->top = p;
  b->n++;
  bc->bytes += jw_bc_bytes[i];
  return n;
}

void jw_bc_put_evicting(jw_bcache *bc, jw_lock *lk, unsigned i, void *p) {
  void *out[JW_BC_BINS * JW_BC_SLOTS];
  uint8_t bin[JW_BC_BINS * JW_BC_SLOTS];
  size_t n = jw_bc_evict_locked(bc, i, p, out, bin);
  bool kicked = bc->kicked;
  bc->kicked = 1;
  jw_bc_unlock(lk);
  jw_bc_give_back(out, bin, n, false);
  if (!kicked) jw_bc_kick();
}

size_t jw_bc_take_above_locked(jw_bcache *bc, void **out, uint8_t *out_bin) {
  size_t n = 0;
  if (!JW_BC_ENABLED || bc->bytes == 0) return 0;
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
      bc->bytes -= jw_bc_bytes[i];
      len--;
      x = next;
    }
  }
  return n;
}

size_t jw_bc_take_all_locked(jw_bcache *bc, void **out, uint8_t *out_bin) {
  size_t n = 0;
  if (JW_BC_ENABLED && bc->bytes != 0)
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
