/* JWMALLOC_* options, read once from the environment at initialization
 * (without getenv's locale or allocation concerns: environ is scanned
 * directly). Every option is documented in the README with its default.
 *
 * Thread-safety: values are relaxed atomics; jw_option_set() may change the
 * run-time ones while other threads allocate (each read sees the old or the
 * new value).
 */
#ifndef JW_COMMON_OPTIONS_H
#define JW_COMMON_OPTIONS_H

#include "atomic.h"
#include "log.h"

typedef enum jw_option_id {
  JW_OPT_STATS,          /* STATS: 1 prints statistics at exit (default 0) */
  JW_OPT_ABORT_ON_ERROR, /* ABORT_ON_ERROR: 0 turns bad-free aborts into warnings (default 1) */
  JW_OPT_POOL_PERCENT,   /* POOL_PERCENT: pool watermark, % of the thread's slabs (default 25) */
  JW_OPT_POOL_MIN,       /* POOL_MIN: pool watermark floor, pages (default 4) */
  JW_OPT_HUGE_CACHE_MB,  /* HUGE_CACHE_MB: freed direct mappings kept for reuse, MiB (default 32) */
  JW_OPT_PLACEMENT,      /* PLACEMENT: 0 never, 1 always, 2 ("auto") when the reclaimer sees a trough; default auto (backend.md 7b) */
  JW_OPT_BIN,            /* BIN: 1 keeps freed blocks in a per-class bin, 0 frees each to its slab (default 1; frontend.md "The bin") */
  JW_OPT_LOW_MEMORY,     /* LOW_MEMORY: 1 trades speed for RSS (api.md "Low-memory configuration"); start-up only, default 0 */
  JW_OPT_LOCK_YIELD,     /* LOCK_YIELD: 1 yields once before a busy lock's fallback (concurrency.md "One yield before a fallback"); default 0 */
  JW_OPT_PAGE_SIZE,      /* PAGE_SIZE: the logical page, bytes; 0 the kernel's (architecture.md "Page size at run time"); start-up only, default 0 */
  JW_OPT_COUNT
} jw_option_id;

extern jw_atomic_u64 jw_options[JW_OPT_COUNT];

/* The value of an option; relaxed: options are independent settings. */
static inline long jw_opt(jw_option_id id) { return (long)jw_load(&jw_options[id], JW_RELAXED); }

/* JWMALLOC_LOW_MEMORY=1 (docs/design/api.md, "Low-memory configuration"):
 * read where a tier sizes a cache it creates (a thread's block cache, a
 * midend class's cache). A relaxed load of a start-up setting. */
static inline int jw_low_memory(void) { return jw_opt(JW_OPT_LOW_MEMORY) != 0; }

/* Parses JWMALLOC_* from environ (called once by global initialization). */
void jw_options_init(void);

/* Path from JWMALLOC_STATS_FILE, or NULL (points into environ). */
const char *jw_options_stats_file(void);

/* Name (without JWMALLOC_) to id; -1 if unknown. */
int jw_option_lookup(const char *name);

/* The one line every JWMALLOC_* parser prints for a value it refuses (here
 * and in reclaim/options.c, which links without this file's .c: hence
 * inline): "jwmalloc: JWMALLOC_<name>=<value>: expected <want>; default <def>
 * kept", def as the README's tables name it. No allocation (jw_dprintf). */
static inline void jw_option_bad(const char *name, const char *value, const char *want, const char *def) {
  jw_dprintf(2, "jwmalloc: JWMALLOC_%s=%s: expected %s; default %s kept\n", name, value, want, def);
}

/* String equality without the C library (usable before it is set up). */
static inline int jw_str_eq(const char *a, const char *b) {
  while (*a && *a == *b) a++, b++;
  return *a == *b;
}

#endif
