/* Size classes of the frontend and the midend, derived from their tables:
 * the tail waste of every frontend slab is under the stated cap, midend
 * slabs waste at most 1/16, classes are spaced as documented, and the
 * size-to-class lookups give the smallest fitting class for every size.
 * (docs/design/frontend.md, docs/design/midend.md) */
#include <stdio.h>

#include "common/config.h"
#include "frontend/size_class.h"
#include "midend/midend.h"

static int failures;
#define FAIL(...) (fprintf(stderr, __VA_ARGS__), fputc('\n', stderr), failures++)

int main(void) {
  unsigned worst_tail = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    unsigned size = jw_class_size[c], blocks = JW_SLAB_USABLE / size;
    unsigned tail = JW_SLAB_USABLE - blocks * size;
    if (size % 16) FAIL("class %u: size %u not a multiple of 16", c, size);
    if (blocks < 2) FAIL("class %u: fewer than two blocks per page", c);
    if (tail > JW_TAIL_WASTE_CAP) FAIL("class %u (%u B): tail waste %u > cap %u", c, size, tail, JW_TAIL_WASTE_CAP);
    if (blocks != jw_class_blocks(c)) FAIL("class %u: block count mismatch", c);
    if (c && size <= jw_class_size[c - 1]) FAIL("class %u: not increasing", c);
    /* Spacing: at most 12.5% (or one 16-byte step), unless the page holds
     * just one block fewer than the previous class (nothing fits between). */
    if (c && (size - jw_class_size[c - 1]) * 8 > jw_class_size[c - 1] && size - jw_class_size[c - 1] > 16 &&
        blocks + 1 != jw_class_blocks(c - 1))
      FAIL("class %u: spaced more than 12.5%% from the previous one", c);
    if (tail > worst_tail) worst_tail = tail;
    /* The reciprocal that replaces the division on the free path (slab.h). */
    for (uint32_t off = 0; off < JW_SLAB_SIZE; off++)
      if ((uint32_t)(((uint64_t)off * jw_class_recip[c]) >> 32) != off / size) {
        FAIL("class %u: reciprocal gives a wrong quotient at offset %u", c, off);
        break;
      }
  }
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
  if (failures) return 1;
  printf("size classes: %d frontend classes, worst tail %u B (cap %u B); %d midend classes, worst waste %u.%u%%\n",
         JW_NCLASSES, worst_tail, JW_TAIL_WASTE_CAP, JW_MID_NCLASSES, worst_mid / 10, worst_mid % 10);
  return 0;
}
