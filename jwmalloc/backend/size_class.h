/* Range size classes of the backend: "resolution 3".
 *
 * Brief: "Backend: size-class-exact ranges". Decision and proof sketch in
 * docs/design/backend.md, "The class set".
 *
 * A range size class is a number of 4 KiB granules n, 1 <= n <= 1024, whose
 * binary form has at most three significant bits (from the leading 1 to the
 * trailing 1): n = m * 2^k with m in 1..7. That is 1..8, then four classes per
 * doubling (10 12 14 16, 20 24 28 32, ..., 640 768 896 1024): 36 classes.
 * Class indices run 0..35 in increasing size; index 35 is a whole 4 MiB root.
 *
 * All functions are pure (no shared state), thread-safe, allocation-free.
 */
#ifndef JW_BACKEND_SIZE_CLASS_H
#define JW_BACKEND_SIZE_CLASS_H

#include <stdbool.h>
#include <stdint.h>

#define JW_NCLASSES 36
#define JW_CLASS_MAX_GRANULES 1024u
#define JW_CLASS_NONE 0xffu

/* Granules of class index i (0..35). */
extern const uint16_t jw_class_granules[JW_NCLASSES];

/* True when n granules is exactly a class. */
static inline bool jw_is_class(uint32_t n) {
  if (n == 0 || n > JW_CLASS_MAX_GRANULES) return false;
  return (n >> __builtin_ctz(n)) < 8;
}

/* Index of the smallest class >= n granules (n in 1..1024); JW_CLASS_NONE
 * outside that range. */
static inline unsigned jw_class_index_up(uint32_t n) {
  if (n == 0 || n > JW_CLASS_MAX_GRANULES) return JW_CLASS_NONE;
  if (n <= 8) return n - 1;
  unsigned k = 31u - (unsigned)__builtin_clz(n); /* floor(log2 n) >= 3 */
  uint32_t m = n >> (k - 2);                     /* leading three bits: 4..7 */
  if ((m << (k - 2)) != n) m++;                  /* round up; m may reach 8 */
  return 4u * k + (unsigned)m - 9u;              /* 8 -> 7, 10 -> 8, 1024 -> 35 */
}

/* Index of exactly n granules, which must be a class (jw_is_class(n)). */
static inline unsigned jw_class_index(uint32_t n) { return jw_class_index_up(n); }

/* The size-friendly multi-step split (docs/design/backend.md, "Splitting"):
 * the piece to cut from a free range of s granules on the way to class c
 * (c < s, both classes). Returns c itself when s - c is a class; otherwise the
 * smallest class a, c < a < s, with s - a a class, which maximizes the
 * remainder s - a kept in one piece. Such an a always exists (the class just
 * below s leaves a power of two). */
uint32_t jw_class_split_piece(uint32_t s, uint32_t c);

#endif
