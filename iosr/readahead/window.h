/* Read-ahead window arithmetic (design note section 6; brief: "Read-ahead").
 *
 * Pure functions over numbers; the engine (engine/swapin.c) applies them to
 * page tables and the slot map. Not stateful except through the structs the
 * caller owns; not thread-safe per struct.
 */
#ifndef IOSR_READAHEAD_WINDOW_H
#define IOSR_READAHEAD_WINDOW_H

#include <stdint.h>

/* Linux's swap read-ahead sizing (__swapin_nr_pages in mm/swap_state.c,
 * restated): hits + 2 pages rounded up to a power of two (at least 4); with
 * no hits, 1 page unless the fault is next to the previous one; at most
 * max_pages; never below half the previous window. */
unsigned iosr_ra_linux_pages(uint64_t prev_off, uint64_t off, unsigned hits, unsigned max_pages,
                             unsigned prev_win);

/* Linux-like read-ahead state: hits since the last window, the last faulting
 * offset (slot for cluster, virtual page for vma) and the last window. */
typedef struct iosr_ra_linux {
  unsigned hits;
  uint64_t prev_off;
  unsigned prev_win;
} iosr_ra_linux;

/* cluster: the aligned block of win slots around slot (win a power of two). */
static inline void iosr_ra_cluster_block(uint64_t slot, unsigned win, uint64_t *start, uint64_t *end) {
  uint64_t mask = (uint64_t)win - 1;
  *start = slot & ~mask;
  *end = (slot | mask) + 1;
}

/* vma: the window of virtual pages [*lo, *hi) around fault vpn fv, given the
 * previous fault vpn pv and the window size win: forward after a sequential
 * forward fault, backward after a backward one, else centred; clipped to
 * [span_lo, span_hi) and to the 2 MiB page-table block holding fv. */
void iosr_ra_vma_range(uint64_t fv, uint64_t pv, unsigned win, uint64_t span_lo, uint64_t span_hi,
                       uint64_t *lo, uint64_t *hi);

/* adaptive: a window per app, doubled on a probe hit, halved on a miss. */
typedef struct iosr_ra_adaptive {
  unsigned window;
  unsigned min, max;
} iosr_ra_adaptive;
void iosr_ra_adaptive_init(iosr_ra_adaptive *a, unsigned init, unsigned max);
void iosr_ra_adaptive_hit(iosr_ra_adaptive *a);
void iosr_ra_adaptive_miss(iosr_ra_adaptive *a);

/* The verdict on a window of `probes` probes of which `hits` were used and
 * `misses` were not (the rest still pending), as soon as it is certain:
 * +1 grow (hits reach grow_pct% of the probes), -1 shrink (fewer than
 * shrink_pct% can still be hits), 0 keep (resolved in between), 2 not known
 * yet. Percentages 0-100, shrink_pct <= grow_pct (design note section 6). */
int iosr_ra_rate_verdict(unsigned probes, unsigned hits, unsigned misses, unsigned grow_pct, unsigned shrink_pct);

/* Read-ahead state of one region of an app (adaptive window, counters in
 * pages: hits and misses probe-weighted, read = pages read in windows that
 * faults of this region started, needed = faulting pages + hits). */
typedef struct iosr_ra_region {
  uint32_t region;
  uint64_t zone;      /* which zone of the address space (vpn / zone pages; 0 when zones are off) */
  iosr_ra_adaptive ra;
  uint64_t next_slot; /* the slot after the region's last window (0: none) */
  uint64_t hits, misses, read_pages, needed_pages;
  uint64_t majors;    /* the region's major faults: its probes' expiry clock */
  uint64_t shrunk_at; /* 1 + majors when the window last halved (0: never): at most once per fault */
  int32_t probe_head, probe_tail; /* FIFO of the region's probes (the engine's probe indexes; -1: none) */
} iosr_ra_region;

/* Probe placement for n read-ahead pages (indexes 0..n-1, the faulting page
 * excluded): index i is a probe when (i + 1) % stride == 0 or i == n - 1;
 * its weight is the number of pages since the previous probe, itself
 * included. Returns the weight of index i, or 0 when it is not a probe. */
static inline unsigned iosr_ra_probe_weight(unsigned i, unsigned n, unsigned stride) {
  if (i + 1 != n && (i + 1) % stride != 0) return 0;
  unsigned prev = (i / stride) * stride; /* first index after the previous probe */
  return i - prev + 1;
}

#endif
