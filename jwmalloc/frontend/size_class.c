/* See size_class.h; the table and its derivation: docs/design/frontend.md.
 * Every size is floor(4032 / blocks / 16) * 16 for its block count, spaced at
 * most 12.5% apart up to 1008; test_size_class checks cap and lookup. */
#include "size_class.h"

/* The class sizes, once: the size table and its reciprocals are made from it. */
#define JW_CLASS_SIZES(X)                                                                                  \
  X(16) X(32) X(48) X(64) X(80) X(96) X(112) X(128) X(144) X(160) X(176) X(192) X(208) X(224) X(240)      \
  X(256) X(288) X(304) X(336) X(352) X(400) X(448) X(496) X(576) X(672) X(800) X(1008) X(1344) X(2016)

#define JW_SIZE_ENTRY(s) s,
#define JW_RECIP_ENTRY(s) (uint32_t)((((uint64_t)1 << 32) + (s) - 1) / (s)),

const uint16_t jw_class_size[JW_NCLASSES] = {JW_CLASS_SIZES(JW_SIZE_ENTRY)};
const uint32_t jw_class_recip[JW_NCLASSES] = {JW_CLASS_SIZES(JW_RECIP_ENTRY)};
/* The bin's bound (frontend.md, "The bin"): a 4 KiB page's blocks, at least
 * 16 and at most 64 (the same at every page size: a bound on what a bin
 * holds, not a slab's layout). */
#define JW_BIN_LIMIT(s) (JW_SLAB_USABLE_MIN / (s))
#define JW_BIN_LIMIT_ENTRY(s) (JW_BIN_LIMIT(s) > 64 ? 64 : JW_BIN_LIMIT(s) < 16 ? 16 : JW_BIN_LIMIT(s)),
const uint8_t jw_class_bin_limit[JW_NCLASSES] = {JW_CLASS_SIZES(JW_BIN_LIMIT_ENTRY)};
_Static_assert(sizeof((const uint16_t[]){JW_CLASS_SIZES(JW_SIZE_ENTRY)}) == JW_NCLASSES * sizeof(uint16_t),
               "one size per class");

const uint8_t jw_class_of_table[128] = {
     0,  0,  1,  2,  3,  4,  5,  6,  7,  8,  9, 10, 11, 12, 13, 14, 15, 16, 16, 17, 18, 18,
    19, 20, 20, 20, 21, 21, 21, 22, 22, 22, 23, 23, 23, 23, 23, 24, 24, 24, 24, 24, 24, 25,
    25, 25, 25, 25, 25, 25, 25, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 26, 27, 27,
    27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 27, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
    28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28, 28,
};
