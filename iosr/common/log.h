/* Logging for iosrd, libiosr and the tools: one line per message on stderr,
 * prefixed with the program's role ("iosrd", "iosr", "libiosr").
 *
 * Levels: 0 errors only, 1 warnings (default), 2 info, 3 debug; set by
 * IOSR_LOG. Thread-safe (one write(2) per line). Uses a stack buffer of
 * 1 KiB per line; longer messages are truncated. Never allocates.
 */
#ifndef IOSR_COMMON_LOG_H
#define IOSR_COMMON_LOG_H

#include <stdarg.h>

enum { IOSR_LOG_ERR = 0, IOSR_LOG_WARN = 1, IOSR_LOG_INFO = 2, IOSR_LOG_DEBUG = 3 };

/* Sets the prefix printed before every line (a static string) and the level. */
void iosr_log_init(const char *who, int level);
int iosr_log_level(void);
void iosr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the message and aborts: for broken invariants only, never for bad input. */
void iosr_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, cold));

#define iosr_err(...) iosr_log(IOSR_LOG_ERR, __VA_ARGS__)
#define iosr_warn(...) iosr_log(IOSR_LOG_WARN, __VA_ARGS__)
#define iosr_info(...) iosr_log(IOSR_LOG_INFO, __VA_ARGS__)
#define iosr_debug(...) \
  do { if (iosr_log_level() >= IOSR_LOG_DEBUG) iosr_log(IOSR_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
