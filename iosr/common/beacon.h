/* The dropper's marks (design note section 3, "Whose discard"): libiosr
 * reserves a beacon area of IOSR_BEACON_PAGES pages in the app (PROT_NONE,
 * never populated, registered with the app's userfaultfd), and its dropper
 * discards small ranges of it to tell the daemon what it is about to
 * discard. The REMOVE events of those discards reach the daemon in the same
 * queue as the dropper's own, so the daemon knows which REMOVE may be the
 * dropper's: one over the pages the dropper announced, read after that
 * announcement and before the next. Every other REMOVE is the app's.
 *
 * Three kinds of mark, each one discard of a range of the area:
 * - a drop mark names the drop the dropper begins: pages [0, 512) of the
 *   area; the page offset carries the id's low 8 bits, the length (1 to 256
 *   pages) the next 8, so the daemon matches the low 16 bits of an
 *   outstanding drop's id (fewer than 65536 are ever outstanding at once);
 * - a run mark announces the run of that drop's pages that the dropper
 *   discards next: pages [513, 513 + 1024) of the area, the range of the
 *   run's pages counted from the drop's first (a drop has at most 1024);
 * - the end mark, page 512, says the dropper is done with the drop.
 *
 * Pure arithmetic: no state, thread-safe.
 */
#ifndef IOSR_COMMON_BEACON_H
#define IOSR_COMMON_BEACON_H

#include <stdint.h>

#define IOSR_BEACON_DROPS 512u  /* pages of drop marks; the end mark is the next */
#define IOSR_BEACON_RUNS 1024u  /* pages of run marks: the most pages of one drop */
#define IOSR_BEACON_PAGES (IOSR_BEACON_DROPS + 1 + IOSR_BEACON_RUNS)

/* The drop mark of drop `id`: first page and page count, relative to the
 * area's first page. */
static inline void iosr_beacon_drop_mark(uint64_t id, uint64_t *first, uint64_t *pages) {
  *first = id & 255u;
  *pages = 1 + ((id >> 8) & 255u);
}

/* The run mark of pages [k, k + n) of a drop (k + n <= IOSR_BEACON_RUNS). */
static inline void iosr_beacon_run_mark(uint64_t k, uint64_t n, uint64_t *first, uint64_t *pages) {
  *first = IOSR_BEACON_DROPS + 1 + k;
  *pages = n;
}

/* The end mark. */
static inline void iosr_beacon_end_mark(uint64_t *first, uint64_t *pages) {
  *first = IOSR_BEACON_DROPS;
  *pages = 1;
}

enum { IOSR_MARK_DROP = 1, IOSR_MARK_RUN = 2, IOSR_MARK_END = 3 };

/* Reads a REMOVE of pages [first, first + pages) of the area: IOSR_MARK_DROP
 * with the id's low 16 bits in *a, IOSR_MARK_RUN with the run's first page
 * (from the drop's) in *a and its length in *n, IOSR_MARK_END, or 0 when it
 * is no mark. */
static inline int iosr_beacon_read(uint64_t first, uint64_t pages, uint64_t *a, uint64_t *n) {
  if (!pages || first + pages > IOSR_BEACON_PAGES) return 0;
  if (first > IOSR_BEACON_DROPS) {
    *a = first - IOSR_BEACON_DROPS - 1;
    *n = pages;
    return IOSR_MARK_RUN;
  }
  if (first == IOSR_BEACON_DROPS) return pages == 1 ? IOSR_MARK_END : 0;
  if (first > 255 || pages > 256) return 0;
  *a = first | (pages - 1) << 8;
  return IOSR_MARK_DROP;
}

/* The graveyard (design note section 3, "Moved out"): IOSR_GRAVE_PAGES
 * pages of read-write address space right after the beacon area, where the
 * daemon moves written pages out of the app (UFFDIO_MOVE) for the dropper
 * to discard. A client that maps it says so (IOSR_ATTACH_GRAVEYARD). */
#define IOSR_GRAVE_PAGES 4096u

/* The first page of a beacon area an app names (a byte address), or 0
 * when it names none or one that cannot be (unaligned, out of range; room is
 * left for the graveyard after it). */
static inline uint64_t iosr_beacon_page(uint64_t addr) {
  if (!addr || (addr & 4095u) ||
      addr >= (1ull << 57) - (uint64_t)(IOSR_BEACON_PAGES + IOSR_GRAVE_PAGES) * 4096)
    return 0;
  return addr >> 12;
}

#endif
