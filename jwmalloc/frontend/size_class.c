/* See size_class.h; the table and its derivation: docs/design/frontend.md.
 * Every size is floor(4032 / blocks / 16) * 16 for its block count, spaced at
 * most 12.5% apart up to 1008; test_size_class checks cap and lookup. */
#include "size_class.h"

const uint16_t jw_class_size[JW_NCLASSES] = {
    16,  32,  48,  64,  80,  96,  112, 128, 144, 160, 176, 192,  208,  224, 240,
    256, 288, 304, 336, 352, 400, 448, 496, 576, 672, 800, 1008, 1344, 2016,
};

const uint8_t jw_class_of_table[128] = {
     0,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 16, 17, 18, 18,
    19, 20, 20, 20, 21, 21, 21, 22, 22, 22, 23, 23, 23, 23, 23, 24, 24, 24, 24, 24, 24, 25,
    25, 25, 25, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27,
    27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
};

/* ceil(65536 / (size / 16)): a block index by multiplication (slab.h,
 * jw_slab_is_block; exact for every offset of a slab, test_size_class). */
const uint32_t jw_class_recip[JW_NCLASSES] = {
    65536, 32768, 21846, 16384, 13108, 10923, 9363, 8192, 7282, 6554,
    5958, 5462, 5042, 4682, 4370, 4096, 3641, 3450, 3121, 2979,
    2622, 2341, 2115, 1821, 1561, 1311, 1041, 781, 521,
};
