/* CRC32C (crc32c.h). The register update is linear over GF(2): after a
 * block X, r' = M_X(r) ^ update(0, X), where M_X appends |X| zero bytes. A
 * page is cut into three lanes of LANE bytes plus a tail; the lanes run as
 * three independent `crc32` chains (the instruction's latency is three times
 * its issue rate) and are joined with a table for M_LANE.
 */
#include "crc32c.h"

#include <pthread.h>
#include <string.h>

#if defined(__x86_64__)
#include <nmmintrin.h>
#define HAVE_X86_CRC 1
#endif

#define POLY 0x82f63b78u /* CRC32C, reflected */
#define LANE 1360u       /* 170 words; 3 lanes = 4080 bytes, then a 16-byte tail */

static uint32_t tab[8][256];      /* slice-by-8 */
static uint32_t shift_tab[4][256]; /* M_LANE, one table per register byte */
static int have_hw;
static int forced_portable;        /* read relaxed: a measurement switch */
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t raw_sw(uint32_t r, const uint8_t *p, size_t n) {
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
  while (n && ((uintptr_t)p & 7)) {
    r = (r >> 8) ^ tab[0][(r ^ *p++) & 0xff];
    n--;
  }
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    w ^= r;
    r = tab[7][w & 0xff] ^ tab[6][(w >> 8) & 0xff] ^ tab[5][(w >> 16) & 0xff] ^ tab[4][(w >> 24) & 0xff] ^
        tab[3][(w >> 32) & 0xff] ^ tab[2][(w >> 40) & 0xff] ^ tab[1][(w >> 48) & 0xff] ^ tab[0][w >> 56];
  }
#endif
  while (n--) r = (r >> 8) ^ tab[0][(r ^ *p++) & 0xff];
  return r;
}

static uint32_t shift_lane(uint32_t r) {
  return shift_tab[0][r & 0xff] ^ shift_tab[1][(r >> 8) & 0xff] ^ shift_tab[2][(r >> 16) & 0xff] ^
         shift_tab[3][r >> 24];
}

static void build(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    tab[0][i] = c;
  }
  for (uint32_t i = 0; i < 256; i++)
    for (int t = 1; t < 8; t++) tab[t][i] = (tab[t - 1][i] >> 8) ^ tab[0][tab[t - 1][i] & 0xff];
  static const uint8_t zeros[LANE];
  uint32_t basis[32];
  for (int b = 0; b < 32; b++) basis[b] = raw_sw(1u << b, zeros, LANE);
  for (int k = 0; k < 4; k++)
    for (uint32_t v = 0; v < 256; v++) {
      uint32_t x = 0;
      for (int bit = 0; bit < 8; bit++)
        if (v >> bit & 1) x ^= basis[8 * k + bit];
      shift_tab[k][v] = x;
    }
#ifdef HAVE_X86_CRC
  have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#ifdef HAVE_X86_CRC
__attribute__((target("sse4.2"))) static uint32_t raw_hw(uint32_t r, const uint8_t *p, size_t n) {
  while (n && ((uintptr_t)p & 7)) {
    r = _mm_crc32_u8(r, *p++);
    n--;
  }
  uint64_t r64 = r;
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    memcpy(&w, p, 8);
    r64 = _mm_crc32_u64(r64, w);
  }
  r = (uint32_t)r64;
  while (n--) r = _mm_crc32_u8(r, *p++);
  return r;
}

__attribute__((target("sse4.2"))) static uint32_t page_hw(const uint8_t *p) {
  const uint64_t *q = (const uint64_t *)(const void *)p;
  enum { W = LANE / 8 };
  uint64_t a = 0xffffffffu, b = 0, c = 0;
  for (unsigned i = 0; i < W; i++) {
    a = _mm_crc32_u64(a, q[i]);
    b = _mm_crc32_u64(b, q[W + i]);
    c = _mm_crc32_u64(c, q[2 * W + i]);
  }
  uint32_t r = shift_lane((uint32_t)a) ^ (uint32_t)b;
  r = shift_lane(r) ^ (uint32_t)c;
  return ~raw_hw(r, p + 3 * LANE, 4096 - 3 * LANE);
}
#endif

static int hw(void) {
  pthread_once(&once, build);
  return have_hw && !__atomic_load_n(&forced_portable, __ATOMIC_RELAXED);
}

uint32_t iosr_crc32c(uint32_t crc, const void *buf, size_t len) {
#ifdef HAVE_X86_CRC
  if (hw()) return ~raw_hw(~crc, buf, len);
#else
  pthread_once(&once, build);
#endif
  return ~raw_sw(~crc, buf, len);
}

uint32_t iosr_crc32c_page(const void *page) {
#ifdef HAVE_X86_CRC
  if (hw()) return page_hw(page);
#else
  pthread_once(&once, build);
#endif
  return ~raw_sw(~0u, page, 4096);
}

const char *iosr_crc32c_impl(void) {
#ifdef HAVE_X86_CRC
  if (hw()) return "sse4.2";
#endif
  return "portable";
}

void iosr_crc32c_force_portable(int on) { __atomic_store_n(&forced_portable, on != 0, __ATOMIC_RELAXED); }
