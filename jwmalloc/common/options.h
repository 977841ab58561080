/* JWMALLOC_* options: the values of the table's rows (option_table.h), read
 * once from the environment by one parser and then read by every tier
 * (docs/design/architecture.md, "Options"). The values are plain data: the
 * parse calls into no tier; a tier that acts on a value at start-up reads
 * it at its own initialization.
 *
 * Thread-safety: values are relaxed atomics; jw_option_set() may change the
 * run-time ones while other threads allocate (each read sees the old or the
 * new value). A string, once stored, never changes.
 */
#ifndef JW_COMMON_OPTIONS_H
#define JW_COMMON_OPTIONS_H

#include "atomic.h"
#include "option_table.h"

/* A number option's value: its environment's value or its default, or what
 * jw_option_set stored since. For the options a tier copies into its own
 * state at its initialization (the backend's, reclamation's), the start-up
 * value; that tier holds the one in force. */
extern jw_atomic_u64 jw_options[JW_OPT_COUNT];

/* The value of an option; relaxed: options are independent settings. */
static inline long jw_opt(jw_option_id id) { return (long)jw_load(&jw_options[id], JW_RELAXED); }

/* JWMALLOC_LOW_MEMORY=1 (docs/design/api.md, "Low-memory configuration"):
 * read where a tier sizes a cache it creates (a thread's block cache, a
 * midend class's cache). A relaxed load of a start-up setting. */
static inline int jw_low_memory(void) { return jw_opt(JW_OPT_LOW_MEMORY) != 0; }

/* Where an option's value came from. */
typedef enum jw_option_origin {
  JW_ORIGIN_DEFAULT,  /* the variable is unset (or ignored: a setuid program) */
  JW_ORIGIN_ENV,      /* the variable's value */
  JW_ORIGIN_REFUSED,  /* the variable is set, to a value refused: the default */
} jw_option_origin;

jw_option_origin jw_opt_origin(jw_option_id id);

/* The variable is set, whatever its value: a setting derived from another
 * option (JWMALLOC_LOW_MEMORY's) leaves this one alone. */
static inline int jw_opt_in_env(jw_option_id id) { return jw_opt_origin(id) != JW_ORIGIN_DEFAULT; }

/* A TEXT option's value: the variable's (copied at the parse: a program may
 * overwrite its environment strings later), or the row's default when it is
 * unset, empty or refused (NULL when the row has none). */
const char *jw_opt_str(jw_option_id id);

/* Parses every JWMALLOC_* variable of environ against the table, once per
 * process: the global initialization calls it, and so does each part that
 * may run before it or without it (the backend, the swap constructor). A
 * refused value keeps the default and gets one line on stderr naming the
 * variable; an unknown JWMALLOC_ name gets one line; a setuid or setgid
 * program (AT_SECURE) ignores every JWMALLOC_* variable. No allocation,
 * no stdio, no lock: a call that races the first parses too, silently,
 * and stores the same numbers (strings are stored by the first alone). */
void jw_options_init(void);

#endif
