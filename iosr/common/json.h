/* A growing string buffer with JSON helpers, for `iosr stat --json`.
 * Allocates with malloc (daemon and tools only, never on a page-source path).
 * Not thread-safe. On allocation failure the buffer is marked failed and
 * further appends are ignored (check ->failed). */
#ifndef IOSR_COMMON_JSON_H
#define IOSR_COMMON_JSON_H

#include <stddef.h>
#include <stdint.h>

typedef struct iosr_buf {
  char *data;
  size_t len, cap;
  int failed;
} iosr_buf;

void iosr_buf_printf(iosr_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void iosr_buf_append(iosr_buf *b, const void *p, size_t n);
/* Appends s as a JSON string literal (quotes and escapes included). */
void iosr_buf_json_str(iosr_buf *b, const char *s);
/* Appends "[a,b,c]" of n unsigned counts. */
void iosr_buf_json_u64s(iosr_buf *b, const uint64_t *v, unsigned n);
void iosr_buf_free(iosr_buf *b);

#endif
