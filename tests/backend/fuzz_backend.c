/* libFuzzer target: the fuzzer's bytes are a sequence of backend operations,
 * run through the differential driver (driver.h) with every invariant check
 * on; each input ends by freeing everything, which must merge every root back
 * whole and give every root and its metadata back.
 *
 * Encoding, per operation: one opcode byte, then a 16-bit little-endian
 * argument (missing bytes read as zero).
 *   op % 16: 0-5 allocate class (arg % 36), kind from arg bits
 *            6    allocate arg % 1100 granules (odd sizes, out-of-bounds)
 *            7-10 free live range arg
 *            11   lookup/classify probe
 *            12   mark an interior granule
 *            13   bad free (interior, unaligned, free space, foreign)
 *            14   reclamation step
 *            15   whole-backend check
 * Built with clang -fsanitize=fuzzer,address,undefined (tests/backend/CMakeLists.txt).
 * A short run is part of `make test`, a long one is `make fuzz`. */
#include <stddef.h>
#include <stdint.h>

#include "backend/size_class.h"
#include "driver.h"

static bd d;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int inited;
  if (!inited) {
    bd_init(&d, 64);
    inited = 1;
  }
  for (size_t i = 0; i < size;) {
    uint8_t op = data[i++];
    uint32_t arg = 0;
    for (int k = 0; k < 2 && i < size; k++) arg |= (uint32_t)data[i++] << (8 * k);
    uint64_t x = (uint64_t)arg * 0x9e3779b97f4a7c15ull + op;
    switch (op % 16) {
      case 0: case 1: case 2: case 3: case 4: case 5: {
        unsigned c = arg % JW_NCLASSES;
        uint32_t n = jw_class_granules[c];
        jw_range_kind kind = n == 1 ? (jw_range_kind)(1 + (arg >> 8) % 3)
                             : n <= 16 && (arg & 0x100) ? JW_KIND_MID_SLAB : JW_KIND_LARGE;
        bd_alloc(&d, n, kind);
        break;
      }
      case 6: bd_alloc(&d, arg % 1100, (arg >> 12) & 1 ? JW_KIND_MID_SLAB : JW_KIND_LARGE); break;
      case 7: case 8: case 9: case 10: bd_free(&d, arg); break;
      case 11: bd_probe(&d, x); break;
      case 12: bd_mark(&d, arg, (uint32_t)(x >> 32)); break;
      case 13: bd_bad_free(&d, x); break;
      case 14: bd_reclaim(&d); break;
      default: bd_check_all(&d); break;
    }
  }
  bd_free_all(&d);
  return 0;
}
