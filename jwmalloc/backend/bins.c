/* See bins.h. Every access is under the backend lock: relaxed throughout. */
#include "bins.h"

#include "../pages/root_map.h"

/* One range of class c entered (in = 1) or left (in = 0) buffer buf. Inlined
 * into push and remove, which are on every backend operation. */
static inline __attribute__((always_inline)) void count(jw_bins *b, unsigned c, unsigned buf, int in) {
  jw_bin *bin = &b->bin[c];
  uint32_t one = in ? 1u : (uint32_t)-1;
  jw_store(&bin->count[buf], jw_load(&bin->count[buf], JW_RELAXED) + one, JW_RELAXED);
  uint32_t total = jw_load(&bin->total, JW_RELAXED) + one;
  jw_store(&bin->total, total, JW_RELAXED);
  uint64_t g = jw_class_granules[c];
  uint64_t was = jw_load(&b->granules[buf], JW_RELAXED);
  jw_store(&b->granules[buf], in ? was + g : was - g, JW_RELAXED);
  /* The mask changes only when the class becomes empty or non-empty. */
  if (total == (uint32_t)in) {
    uint64_t m = jw_load(&b->nonempty, JW_RELAXED);
    jw_store(&b->nonempty, in ? m | ((uint64_t)1 << c) : m & ~((uint64_t)1 << c), JW_RELAXED);
  }
}

/* Lists are circular: the head's prev is the tail, the tail's next the head. */
void jw_bins_push(jw_bins *b, jw_rid r, unsigned c, unsigned buf) {
  jw_rec *rec = jw_bins_rec(r);
  jw_rid first = jw_load(&b->bin[c].head[buf], JW_RELAXED);
  if (first == 0) {
    jw_store(&rec->next, r, JW_RELAXED);
    jw_store(&rec->prev, r, JW_RELAXED);
    jw_store(&b->bin[c].head[buf], r, JW_RELAXED);
  } else {
    jw_rec *f = jw_bins_rec(first);
    jw_rid last = jw_load(&f->prev, JW_RELAXED);
    jw_store(&rec->next, first, JW_RELAXED);
    jw_store(&rec->prev, last, JW_RELAXED);
    jw_store(&jw_bins_rec(last)->next, r, JW_RELAXED);
    jw_store(&f->prev, r, JW_RELAXED);
    /* Low roots first: at the front when its root is not above the front
     * range's root, else at the back (O(1), see bins.h). Roots compare by
     * rank (jw_bins_rank: region in order of first use, then the oldest
     * root of the region first). */
    if (jw_bins_rank(r) <= jw_bins_rank(first)) jw_store(&b->bin[c].head[buf], r, JW_RELAXED);
  }
  jw_rec_update(rec, JW_REC_STATE_MASK, JW_RS_FREE_BUF0 + buf);
  count(b, c, buf, 1);
}

unsigned jw_bins_remove(jw_bins *b, jw_rid r, unsigned c) {
  jw_rec *rec = jw_bins_rec(r);
  unsigned buf = jw_tag_state(jw_load(&rec->tag, JW_RELAXED)) - JW_RS_FREE_BUF0;
  jw_rid next = jw_load(&rec->next, JW_RELAXED), prev = jw_load(&rec->prev, JW_RELAXED);
  if (next == r) {
    jw_store(&b->bin[c].head[buf], 0, JW_RELAXED); /* it was the only one */
  } else {
    jw_store(&jw_bins_rec(prev)->next, next, JW_RELAXED);
    jw_store(&jw_bins_rec(next)->prev, prev, JW_RELAXED);
    if (jw_load(&b->bin[c].head[buf], JW_RELAXED) == r) jw_store(&b->bin[c].head[buf], next, JW_RELAXED);
  }
  jw_store(&rec->next, 0, JW_RELAXED);
  jw_store(&rec->prev, 0, JW_RELAXED);
  count(b, c, buf, 0);
  return buf;
}

jw_rid jw_bins_pop(jw_bins *b, unsigned c, unsigned *buf) {
  unsigned a = jw_bins_active(b);
  const unsigned order[JW_NBUFS] = {a, a ^ 1u, JW_BUF_RELEASED};
  for (unsigned i = 0; i < JW_NBUFS; i++) {
    jw_rid r = jw_load(&b->bin[c].head[order[i]], JW_RELAXED);
    if (r) {
      *buf = jw_bins_remove(b, r, c);
      return r;
    }
  }
  return 0;
}

jw_rid jw_bins_lowest(jw_bins *b, unsigned c, unsigned window, unsigned *k) {
  unsigned a = jw_bins_active(b);
  const unsigned order[JW_NBUFS] = {a, a ^ 1u, JW_BUF_RELEASED};
  uint64_t m = jw_load(&b->nonempty, JW_RELAXED) >> c;
  if (window < 64) m &= ((uint64_t)1 << window) - 1;
  jw_rid best = 0;
  for (unsigned cc = c; m; m >>= 1, cc++) {
    if (!(m & 1)) continue;
    for (unsigned i = 0; i < JW_NBUFS; i++) {
      jw_rid r = jw_load(&b->bin[cc].head[order[i]], JW_RELAXED);
      if (r && (best == 0 || jw_bins_rank(r) < jw_bins_rank(best))) best = r, *k = cc;
    }
  }
  return best;
}
