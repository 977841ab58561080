#include "json.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int grow(iosr_buf *b, size_t need) {
  if (b->failed) return -1;
  if (b->len + need + 1 <= b->cap) return 0;
  size_t cap = b->cap ? b->cap : 256;
  while (cap < b->len + need + 1) cap *= 2;
  char *p = realloc(b->data, cap);
  if (!p) {
    b->failed = 1;
    return -1;
  }
  b->data = p;
  b->cap = cap;
  return 0;
}

void iosr_buf_append(iosr_buf *b, const void *p, size_t n) {
  if (grow(b, n)) return;
  memcpy(b->data + b->len, p, n);
  b->len += n;
  b->data[b->len] = 0;
}

void iosr_buf_printf(iosr_buf *b, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(NULL, 0, fmt, ap);
  va_end(ap);
  if (n < 0 || grow(b, (size_t)n)) return;
  va_start(ap, fmt);
  vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
  va_end(ap);
  b->len += (size_t)n;
}

void iosr_buf_json_str(iosr_buf *b, const char *s) {
  iosr_buf_append(b, "\"", 1);
  for (; s && *s; s++) {
    unsigned char c = (unsigned char)*s;
    if (c == '"' || c == '\\') {
      char e[2] = {'\\', (char)c};
      iosr_buf_append(b, e, 2);
    } else if (c < 0x20) {
      iosr_buf_printf(b, "\\u%04x", c);
    } else {
      iosr_buf_append(b, s, 1);
    }
  }
  iosr_buf_append(b, "\"", 1);
}

void iosr_buf_json_u64s(iosr_buf *b, const uint64_t *v, unsigned n) {
  iosr_buf_append(b, "[", 1);
  for (unsigned i = 0; i < n; i++) iosr_buf_printf(b, i ? ",%llu" : "%llu", (unsigned long long)v[i]);
  iosr_buf_append(b, "]", 1);
}

void iosr_buf_free(iosr_buf *b) {
  free(b->data);
  memset(b, 0, sizeof *b);
}
