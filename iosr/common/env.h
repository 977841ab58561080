/* The IOSR_* environment as a whole: values read outside the engine's
 * settings are checked, and names that no part of IOSR reads are reported
 * (a typo such as IOSR_READAHAED would otherwise go unnoticed; the README's
 * Options table lists every name).
 */
#ifndef IOSR_COMMON_ENV_H
#define IOSR_COMMON_ENV_H

#include <stddef.h>

/* Checks the IOSR_* variables of this process's environment.
 *
 * Each name that is neither an engine option (common/opts.c) nor one of the
 * variables read elsewhere (IOSR_SWAP, IOSR_SOCKET, IOSR_APP,
 * IOSR_RECONNECT_MS, IOSR_LOG, the demo's and the tests') gets one warning
 * line on stderr through iosr_warn, with the nearest known name when one is
 * close; the first call in a process prints them, later calls do not.
 *
 * IOSR_LOG (0..3) and IOSR_RECONNECT_MS (milliseconds, a whole number) are
 * checked as the engine checks its options: returns 0, or -1 with
 * errno=EINVAL and a one-line message naming the variable in err (cap bytes).
 * The engine's own options are checked where the engine reads them
 * (iosr_settings_init).
 *
 * Thread-safe (the environment is only read). Used by iosrd, the iosr tool
 * and iosr_connect (brief: "How this project realizes IOSR", options). */
int iosr_env_check(char *err, size_t cap);

/* The i-th IOSR_* name read outside the engine's options table (upper case,
 * without IOSR_: "SWAP", "SOCKET", ...), NULL past the last. *documented (if
 * not NULL): 1 for the names iosrd, libiosr and the iosr tool read, which
 * the README's options table lists; 0 for the demo's and the tests' own.
 * Thread-safe (constant data). */
const char *iosr_env_other(size_t i, int *documented);

#endif
