/* See size_class.h. */
#include "size_class.h"

const uint16_t jw_class_granules[JW_NCLASSES] = {
    1,   2,   3,   4,   5,   6,   7,   8,                    /* every size up to 8 */
    10,  12,  14,  16,  20,  24,  28,  32,  40,  48,  56,  64, /* then 4 per doubling */
    80,  96,  112, 128, 160, 192, 224, 256, 320, 384, 448, 512,
    640, 768, 896, 1024,
};

uint32_t jw_class_split_piece(uint32_t s, uint32_t c) {
  if (jw_is_class(s - c)) return c;
  /* Classes between c and s in increasing order: the first that leaves a
   * class keeps the largest remainder. At most 35 candidates. */
  for (unsigned i = jw_class_index(c) + 1; i < JW_NCLASSES; i++) {
    uint32_t a = jw_class_granules[i];
    if (a >= s) break;
    if (jw_is_class(s - a)) return a;
  }
  return 0; /* unreachable for valid classes c < s (see header) */
}
