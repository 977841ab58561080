/* Size classes of the frontend and the midend, derived from their tables:
 * the tail waste of every frontend slab is under the stated cap, midend
 * slabs waste at most 1/16, classes are spaced as documented, and the
 * size-to-class lookups give the smallest fitting class for every size.
 * The free path's division-free block checks (jw_slab_is_block,
 * jw_mid_block_at) agree with the division at every byte offset of a slab
 * of every class, and the block cache's tables agree with the classes they
 * stand for. (docs/design/frontend.md, docs/design/midend.md) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/size_class.h"
#undef JW_NCLASSES /* the backend's count; the frontend's follows */
#include "common/config.h"
#include "frontend/block_cache.h"
#include "frontend/size_class.h"
#include "frontend/slab.h"
#include "midend/midend.h"

static int failures;
#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), failures++)

int main(void) {
  unsigned worst_tail = 0;
  /* The layout of a slab of every page size (architecture.md, "Page size at
   * run time"): the same classes, at least two blocks, the tail under 5% of
   * the page, the reciprocal exact at every offset. The table's spacing rule
   * is the 4 KiB page's, where it was derived. */
  static const size_t pages[] = {4096, 16384, 65536};
  for (unsigned k = 0; k < sizeof pages / sizeof pages[0]; k++) {
    jw_page_init(pages[k]);
    for (unsigned c = 0; c < JW_NCLASSES; c++) {
      unsigned size = jw_class_size[c], blocks = JW_SLAB_USABLE / size;
      unsigned tail = JW_SLAB_USABLE - blocks * size;
      if (size % 16) FAIL("class %u: size %u not a multiple of 16", c, size);
      if (blocks < 2) FAIL("class %u: fewer than two blocks per page", c);
      if (tail > JW_TAIL_WASTE_CAP)
        FAIL("class %u (%u B), %zu-byte page: tail waste %u > cap %u", c, size, pages[k], tail, JW_TAIL_WASTE_CAP);
      if (blocks != jw_class_blocks(c)) FAIL("class %u: block count mismatch", c);
      if (c && size <= jw_class_size[c - 1]) FAIL("class %u: not increasing", c);
      /* Spacing: at most 12.5% (or one 16-byte step), unless the page holds
       * just one block fewer than the previous class (nothing fits between). */
      if (pages[k] == 4096 && c && (size - jw_class_size[c - 1]) * 8 > jw_class_size[c - 1] &&
          size - jw_class_size[c - 1] > 16 && blocks + 1 != jw_class_blocks(c - 1))
        FAIL("class %u: spaced more than 12.5%% from the previous one", c);
      if (pages[k] == 4096 && tail > worst_tail) worst_tail = tail;
      /* The reciprocal that replaces the division on the free path (slab.h). */
      for (uint32_t off = 0; off < JW_SLAB_SIZE; off++)
        if ((uint32_t)(((uint64_t)off * jw_class_recip[c]) >> 32) != off / size) {
          FAIL("class %u: reciprocal gives a wrong quotient at offset %u", c, off);
          break;
        }
    }
  }
  jw_page_init(4096); /* the rest: the 4 KiB layout */
  if (jw_class_size[JW_NCLASSES - 1] != JW_SMALL_MAX) FAIL("largest frontend class is not JW_SMALL_MAX");
  for (size_t n = 0; n <= JW_SMALL_MAX; n++) {
    unsigned c = jw_class_of(n);
    if (jw_class_size[c] < n || (c > 0 && jw_class_size[c - 1] >= n && n > 0))
      FAIL("class_of(%zu) = %u (%u B) is not the smallest fitting class", n, c, jw_class_size[c]);
  }
  unsigned worst_mid = 0;
  for (unsigned m = 0; m < JW_MID_NCLASSES; m++) {
    unsigned slab = jw_mid_class_granules[m] * 4096u, blocks = jw_mid_class_blocks(m);
    unsigned waste = slab - blocks * jw_mid_class_size[m];
    if (blocks < 4) FAIL("midend class %u: %u blocks", m, blocks);
    if (waste * JW_MID_WASTE_DIV > slab) FAIL("midend class %u: waste %u of %u", m, waste, slab);
    if (jw_mid_class_size[m] % 64) FAIL("midend class %u: blocks not 64-aligned", m);
    unsigned g = jw_mid_class_granules[m];
    while (g % 2 == 0) g /= 2;
    if (g > 7) FAIL("midend class %u: %u granules is not a backend range class (> 3 significant bits)", m,
                    jw_mid_class_granules[m]);
    unsigned per_mille = waste * 1000 / slab;
    if (per_mille > worst_mid) worst_mid = per_mille;
  }
  for (size_t n = JW_SMALL_MAX + 1; n <= JW_MID_MAX; n++) {
    unsigned m = jw_mid_class_of(n);
    if (jw_mid_class_size[m] < n || (m > 0 && jw_mid_class_size[m - 1] >= n))
      FAIL("mid_class_of(%zu) = %u is not the smallest fitting class", n, m);
  }
  if (jw_mid_class_size[JW_MID_NCLASSES - 1] != JW_MID_MAX) FAIL("largest midend class is not JW_MID_MAX");

  /* Block starts by multiplication, against the division, at every offset. */
  jw_slab *page = aligned_alloc(4096, 4096);
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    memset(page, 0, sizeof *page);
    page->cls = (uint8_t)c;
    page->capacity = (uint16_t)jw_class_blocks(c);
    for (unsigned off = 0; off < 4096; off++) {
      unsigned rel = off - JW_SLAB_HEADER;
      int want = off >= JW_SLAB_HEADER && rel % jw_class_size[c] == 0 && rel / jw_class_size[c] < page->capacity;
      if (jw_slab_is_block(page, (char *)page + off) != want)
        FAIL("frontend class %u: jw_slab_is_block at offset %u says %d", c, off, !want);
    }
  }
  free(page);
  unsigned mid_checked = 0;
  for (unsigned m = 0; m < JW_MID_NCLASSES; m++) {
    size_t bytes = (size_t)jw_mid_class_granules[m] * 4096;
    jw_mid_slab *s = aligned_alloc(4096, bytes);
    memset(s, 0, sizeof *s);
    s->cls = (uint8_t)m;
    s->granules = jw_mid_class_granules[m];
    s->capacity = jw_mid_class_blocks(m);
    for (unsigned bump = 0; bump <= s->capacity; bump += s->capacity) { /* none handed out, all */
      jw_store(&s->bump, bump, JW_RELAXED);
      jw_range_info info = {s, s->granules, JW_KIND_MID_SLAB};
      for (size_t off = 0; off < bytes; off++) {
        size_t rel = off - JW_MID_HEADER;
        int want = off >= JW_MID_HEADER && rel % jw_mid_class_size[m] == 0 && rel / jw_mid_class_size[m] < bump;
        if (jw_mid_block_at(s, (char *)s + off) != want || jw_mid_is_block(&info, (char *)s + off) != want)
          FAIL("midend class %u: block check at offset %zu (bump %u) says %d", m, off, bump, !want);
        mid_checked++;
      }
    }
    free(s);
  }

  /* The block cache's bins stand for the classes they say. */
  for (unsigned i = 0; i < JW_BC_BINS; i++) {
    if (i < JW_BC_MID_BINS && jw_bc_bytes[i] != jw_mid_class_size[i]) FAIL("block cache bin %u: not its midend class", i);
    if (i >= JW_BC_MID_BINS && (jw_bc_bytes[i] % 4096 || !jw_is_class(jw_bc_bytes[i] / 4096)))
      FAIL("block cache bin %u: %u bytes is not a range class", i, jw_bc_bytes[i]);
    uint32_t budget = i >= JW_BC_BIG_FIRST ? JW_BC_BIG_MAX_BYTES : JW_BC_MAX_BYTES;
    if (jw_bc_cap[i] == 0 || jw_bc_cap[i] > JW_BC_SLOTS || (uint32_t)jw_bc_cap[i] * jw_bc_bytes[i] > budget)
      FAIL("block cache bin %u: cap %u does not fit", i, jw_bc_cap[i]);
    if ((i >= JW_BC_BIG_FIRST) != (jw_bc_bytes[i] > (JW_BC_SMALL_RANGE_MAX_GRANULES << 12)))
      FAIL("block cache bin %u: in the wrong budget group", i);
    if (i >= JW_BC_BIG_FIRST && jw_bc_bytes[i] > JW_BC_BIG_MIN_BYTES)
      FAIL("block cache bin %u: larger than group 1's least budget", i);
  }
  for (uint32_t g = 0; g <= JW_BC_RANGE_MAX_GRANULES; g++) {
    unsigned i = jw_bc_range_bin[g];
    uint32_t want = g < 5 ? 0 : jw_class_granules[jw_class_index_up(g)];
    uint32_t got = i == JW_BC_NONE ? 0 : jw_bc_bytes[i] / 4096;
    if (got != want) FAIL("block cache: %u granules map to a bin of %u granules, want %u", g, got, want);
  }
  if (failures) return 1;
  printf("division-free block checks agree at every offset (%u midend checks); block cache tables agree\n",
         mid_checked);
  printf("size classes: %d frontend classes, worst tail %u B (cap %u B); %d midend classes, worst waste %u.%u%%\n",
         JW_NCLASSES, worst_tail, JW_TAIL_WASTE_CAP, JW_MID_NCLASSES, worst_mid / 10, worst_mid % 10);
  return 0;
}
