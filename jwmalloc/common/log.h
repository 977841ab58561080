/* Formatted output that never allocates: usable inside malloc, before main,
 * in a forked child and at exit, where stdio is not.
 *
 * Supported conversions: %s %c %d %i %u %x %p %% with optional '-' flag, '0'
 * flag and width, and length modifiers l, ll, z. Output is built in a stack
 * buffer (1 KiB per call, truncated beyond) and written with one write(2).
 * Thread-safe (no shared state).
 */
#ifndef JW_COMMON_LOG_H
#define JW_COMMON_LOG_H

#include <stdarg.h>
#include <stddef.h>

/* Formats into buf (always NUL terminated when cap > 0); returns the length. */
size_t jw_vformat(char *buf, size_t cap, const char *fmt, va_list ap);
size_t jw_format(char *buf, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Writes a formatted line to fd. */
void jw_dprintf(int fd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Prints "jwmalloc: <message>\n" on stderr and aborts. */
void jw_fatal(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, cold));

#endif
