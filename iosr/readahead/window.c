#include "window.h"

unsigned iosr_ra_linux_pages(uint64_t prev_off, uint64_t off, unsigned hits, unsigned max_pages,
                             unsigned prev_win) {
  unsigned pages = hits + 2;
  if (pages == 2) {
    if (off != prev_off + 1 && off + 1 != prev_off) pages = 1;
  } else {
    unsigned r = 4;
    while (r < pages) r <<= 1;
    pages = r;
  }
  if (pages > max_pages) pages = max_pages;
  unsigned last = prev_win / 2;
  if (pages < last) pages = last;
  return pages ? pages : 1;
}

void iosr_ra_vma_range(uint64_t fv, uint64_t pv, unsigned win, uint64_t span_lo, uint64_t span_hi,
                       uint64_t *lo, uint64_t *hi) {
  uint64_t l, r;
  if (fv == pv + 1) {
    l = fv;
    r = fv + win;
  } else if (pv == fv + 1) {
    l = fv + 1 >= win ? fv + 1 - win : 0;
    r = fv + 1;
  } else {
    uint64_t left = (win - 1) / 2;
    l = fv >= left ? fv - left : 0;
    r = l + win;
  }
  uint64_t pmd_lo = fv & ~511ull, pmd_hi = pmd_lo + 512;
  if (l < span_lo) l = span_lo;
  if (l < pmd_lo) l = pmd_lo;
  if (r > span_hi) r = span_hi;
  if (r > pmd_hi) r = pmd_hi;
  *lo = l;
  *hi = r;
}

void iosr_ra_adaptive_init(iosr_ra_adaptive *a, unsigned init, unsigned max) {
  a->min = 1;
  a->max = max ? max : 1;
  a->window = init < a->min ? a->min : init > a->max ? a->max : init;
}

void iosr_ra_adaptive_hit(iosr_ra_adaptive *a) {
  a->window = a->window * 2 > a->max ? a->max : a->window * 2;
}

void iosr_ra_adaptive_miss(iosr_ra_adaptive *a) {
  a->window = a->window / 2 < a->min ? a->min : a->window / 2;
}

int iosr_ra_rate_verdict(unsigned probes, unsigned hits, unsigned misses, unsigned grow_pct, unsigned shrink_pct) {
  if (!probes) return 0;
  /* compared as hits * 100 against pct * probes: no rounding */
  if ((uint64_t)hits * 100 >= (uint64_t)grow_pct * probes) return +1;
  unsigned could = probes - (misses < probes ? misses : probes); /* hits if every pending probe hits */
  if ((uint64_t)could * 100 < (uint64_t)shrink_pct * probes) return -1;
  if (hits + misses >= probes) return 0;
  return 2;
}
