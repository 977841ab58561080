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
/* The level in effect: the one given to iosr_log_init, else IOSR_LOG, else
 * warnings. A malformed IOSR_LOG counts as warnings here; the programs and
 * iosr_connect reject it first (iosr_env_check, common/env.h). */
int iosr_log_level(void);
/* Parses a level "0".."3" (IOSR_LOG, --log). Returns it, or -1 for anything
 * else (empty, out of range, trailing characters). */
int iosr_log_parse(const char *s);
void iosr_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prints the message and aborts: for broken invariants only, never for bad input. */
void iosr_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn, cold));

#define iosr_err(...) iosr_log(IOSR_LOG_ERR, __VA_ARGS__)
#define iosr_warn(...) iosr_log(IOSR_LOG_WARN, __VA_ARGS__)
#define iosr_info(...) iosr_log(IOSR_LOG_INFO, __VA_ARGS__)
#define iosr_debug(...) \
  do { if (iosr_log_level() >= IOSR_LOG_DEBUG) iosr_log(IOSR_LOG_DEBUG, __VA_ARGS__); } while (0)

#endif
