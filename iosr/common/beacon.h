/* The dropper's marks (design note section 9, "Telling our drop from the
 * app's"): libiosr reserves a beacon area of IOSR_BEACON_PAGES pages in the
 * app (PROT_NONE, never populated, registered with the app's userfaultfd) and
 * its dropper discards a small range of it just before and just after the
 * madvise of each drop. The REMOVE events of those discards reach the daemon
 * in the same queue as the drop's own, so every REMOVE between a drop's two
 * marks may be the dropper's, and every other one is the app's.
 *
 * A mark names the drop by its range: the first half of the area marks a
 * drop's start, the second its end; inside a half, the page offset carries
 * the id's low 8 bits and the length (1 to 256 pages) the next 8, so the
 * daemon matches the low 16 bits of an outstanding drop's id (fewer than
 * 65536 drops are ever outstanding at once).
 *
 * Pure arithmetic: no state, thread-safe.
 */
#ifndef IOSR_COMMON_BEACON_H
#define IOSR_COMMON_BEACON_H

#include <stdint.h>

#define IOSR_BEACON_PAGES 1024u
#define IOSR_BEACON_HALF (IOSR_BEACON_PAGES / 2)

/* The mark of drop `id` (end: 0 start, 1 end): first page and page count,
 * relative to the area's first page. */
static inline void iosr_beacon_mark(uint64_t id, int end, uint64_t *first, uint64_t *pages) {
  *first = (end ? IOSR_BEACON_HALF : 0) + (id & 255u);
  *pages = 1 + ((id >> 8) & 255u);
}

/* Reads a REMOVE of pages [first, first + pages) of the area: 0 with *end and
 * the id's low 16 bits, or -1 when it is no mark. */
static inline int iosr_beacon_read(uint64_t first, uint64_t pages, int *end, uint16_t *id16) {
  if (first >= IOSR_BEACON_PAGES || pages < 1 || pages > 256) return -1;
  *end = first >= IOSR_BEACON_HALF;
  uint64_t off = first - (*end ? IOSR_BEACON_HALF : 0);
  if (off > 255) return -1;
  *id16 = (uint16_t)(off | (pages - 1) << 8);
  return 0;
}

/* The first page of a beacon area an app names (a byte address), or 0
 * when it names none or one that cannot be (unaligned, out of range). */
static inline uint64_t iosr_beacon_page(uint64_t addr) {
  if (!addr || (addr & 4095u) || addr >= (1ull << 57) - (uint64_t)IOSR_BEACON_PAGES * 4096) return 0;
  return addr >> 12;
}

#endif
