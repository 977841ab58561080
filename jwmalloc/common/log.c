/* See log.h. */
#include "log.h"

#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

typedef struct out {
  char *buf;
  size_t cap, len;
} out;

static void put(out *o, char c) {
  if (o->len + 1 < o->cap) o->buf[o->len] = c;
  o->len++;
}

static void put_num(out *o, uint64_t v, unsigned base, int neg, int width, int left, char pad) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  if (neg) tmp[n++] = '-';
  int fill = width > n ? width - n : 0;
  if (!left && pad == '0' && neg) {
    put(o, '-');
    n--;
  }
  if (!left)
    while (fill-- > 0) put(o, pad);
  while (n > 0) put(o, tmp[--n]);
  if (left)
    while (fill-- > 0) put(o, ' ');
}

size_t jw_vformat(char *buf, size_t cap, const char *fmt, va_list ap) {
  out o = {buf, cap, 0};
  for (const char *f = fmt; *f; f++) {
    if (*f != '%') {
      put(&o, *f);
      continue;
    }
    f++;
    int left = 0, width = 0, lng = 0;
    char pad = ' ';
    for (;; f++) {
      if (*f == '-') left = 1;
      else if (*f == '0') pad = '0';
      else break;
    }
    while (*f >= '0' && *f <= '9') width = width * 10 + (*f++ - '0');
    for (;; f++) {
      if (*f == 'l') lng++;
      else if (*f == 'z') lng = 3; /* size_t: 4 bytes on i386, so not long long */
      else break;
    }
    switch (*f) {
      case 'd':
      case 'i': {
        int64_t v = lng == 3   ? (int64_t)va_arg(ap, ssize_t)
                    : lng ? (lng == 1 ? va_arg(ap, long) : va_arg(ap, long long))
                          : va_arg(ap, int);
        put_num(&o, v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v, 10, v < 0, width, left, pad);
        break;
      }
      case 'u':
      case 'x': {
        uint64_t v = lng == 3   ? (uint64_t)va_arg(ap, size_t)
                     : lng ? (lng == 1 ? va_arg(ap, unsigned long) : va_arg(ap, unsigned long long))
                           : va_arg(ap, unsigned);
        put_num(&o, v, *f == 'x' ? 16 : 10, 0, width, left, pad);
        break;
      }
      case 'p':
        put(&o, '0');
        put(&o, 'x');
        put_num(&o, (uintptr_t)va_arg(ap, void *), 16, 0, 0, 0, ' ');
        break;
      case 's': {
        const char *s = va_arg(ap, const char *);
        if (!s) s = "(null)";
        int n = 0;
        while (s[n]) n++;
        int fill = width > n ? width - n : 0;
        if (!left)
          while (fill-- > 0) put(&o, ' ');
        while (*s) put(&o, *s++);
        if (left)
          while (fill-- > 0) put(&o, ' ');
        break;
      }
      case 'c':
        put(&o, (char)va_arg(ap, int));
        break;
      case '%':
        put(&o, '%');
        break;
      case 0:
        f--;
        break;
      default:
        put(&o, '%');
        put(&o, *f);
    }
  }
  if (cap) buf[o.len < cap ? o.len : cap - 1] = 0;
  return o.len < cap ? o.len : (cap ? cap - 1 : 0);
}

size_t jw_format(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = jw_vformat(buf, cap, fmt, ap);
  va_end(ap);
  return n;
}

static void write_all(int fd, const char *s, size_t n) {
  while (n) {
    ssize_t w = write(fd, s, n);
    if (w <= 0) return;
    s += w;
    n -= (size_t)w;
  }
}

void jw_dprintf(int fd, const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  size_t n = jw_vformat(buf, sizeof buf, fmt, ap);
  va_end(ap);
  write_all(fd, buf, n);
}

void jw_fatal(const char *fmt, ...) {
  char buf[1024];
  size_t n = jw_format(buf, sizeof buf, "jwmalloc: ");
  va_list ap;
  va_start(ap, fmt);
  n += jw_vformat(buf + n, sizeof buf - n - 1, fmt, ap);
  va_end(ap);
  buf[n++] = '\n';
  write_all(2, buf, n);
  abort();
}
