/* Binary format of allocation traces (docs/design/bench.md, "Traces").
 *
 * File: header, records, footer record. Integers are unsigned LEB128 varints.
 *   header : "JWTRACE1", u32 version (1), u32 pid, u64 start time (unix ns),
 *            u32 length + bytes of the command line (NUL-separated arguments)
 *   record : one byte: low 4 bits the operation, bit 4 set when a varint thread
 *            index follows; varint microseconds since the previous record; then
 *            the arguments of the operation (below).
 * Object ids are implicit: the n-th allocating record (malloc, calloc, realloc,
 * aligned forms) creates object n (from 1). A record names an existing object by
 * `ref` = newest id - id + 1 (so 1 is the newest), 0 meaning NULL.
 *   MALLOC size | CALLOC nmemb size | REALLOC ref size | FREE ref
 *   POSIX_MEMALIGN, ALIGNED_ALLOC, MEMALIGN: alignment size | VALLOC size | PVALLOC size
 *   END (footer): records, then the count of each operation 1..9, then the
 *   frees of pointers the recorder never saw (not recorded).
 * Shared by the recorder (recorder.c) and the replayer (replay.c).
 */
#ifndef JWB_TRACE_FORMAT_H
#define JWB_TRACE_FORMAT_H

#include <stddef.h>
#include <stdint.h>

#define JWT_MAGIC "JWTRACE1"
#define JWT_VERSION 1u
#define JWT_THREAD_FLAG 0x10u

enum jwt_op {
  JWT_MALLOC = 1,
  JWT_CALLOC = 2,
  JWT_REALLOC = 3,
  JWT_FREE = 4,
  JWT_POSIX_MEMALIGN = 5,
  JWT_ALIGNED_ALLOC = 6,
  JWT_MEMALIGN = 7,
  JWT_VALLOC = 8,
  JWT_PVALLOC = 9,
  JWT_NOPS = 10,
  JWT_END = 15,
};

static inline const char *jwt_op_name(unsigned op) {
  static const char *const names[] = {"?", "malloc", "calloc", "realloc", "free", "posix_memalign",
                                      "aligned_alloc", "memalign", "valloc", "pvalloc"};
  return op < JWT_NOPS ? names[op] : op == JWT_END ? "end" : "?";
}

/* Appends v to buf (at most 10 bytes); returns the bytes written. */
static inline size_t jwt_put(uint8_t *buf, uint64_t v) {
  size_t n = 0;
  while (v >= 0x80) {
    buf[n++] = (uint8_t)(v | 0x80);
    v >>= 7;
  }
  buf[n++] = (uint8_t)v;
  return n;
}

/* Reads a varint at *pos (< end); returns 0 on a truncated or over-long value. */
static inline int jwt_get(const uint8_t *buf, size_t end, size_t *pos, uint64_t *out) {
  uint64_t v = 0;
  for (unsigned shift = 0; shift < 64; shift += 7) {
    if (*pos >= end) return 0;
    uint8_t b = buf[(*pos)++];
    v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) {
      *out = v;
      return 1;
    }
  }
  return 0;
}

/* True for the operations that create an object. */
static inline int jwt_allocates(unsigned op) { return op != JWT_FREE && op >= JWT_MALLOC && op < JWT_NOPS; }

#endif
