/* The table of every JWMALLOC_* option: one row each, the only place an
 * option's name, type, default, range, words and time of effect are written
 * (docs/design/architecture.md, "Options"). The parser (options.c), the
 * public jw_option_get/set (api/options.c), the messages and `jwmalloc
 * options` (tools/jwmalloc.c), which prints it for the test that checks the
 * README's and docs/usage/jwmalloc.md's tables against it, all read it.
 *
 * This header is plain data: no code of any tier, no include beyond the C
 * library's, so that the tool can use it too.
 */
#ifndef JW_COMMON_OPTION_TABLE_H
#define JW_COMMON_OPTION_TABLE_H

#include <stddef.h>
#include <stdint.h>

#ifndef JWMALLOC_CHECK_DEFAULT
#define JWMALLOC_CHECK_DEFAULT 0 /* CMake: -DJWMALLOC_CHECK_DEFAULT=ON makes it 1 */
#endif

/* X(NAME, TYPE, DEFAULT, MIN, MAX, UNIT, WORDS, WHEN, READ_BY), one row per
 * option, NAME without the JWMALLOC_ prefix.
 *   TYPE     BOOL 0 or 1; UINT a decimal number; SIZE bytes, with an optional
 *            K, M or G suffix (powers of 1024); WORD one of WORDS only; PAGE
 *            0 or a power of two from the kernel's page to MAX; TEXT a string
 *            of at most MAX bytes, empty being the same as unset.
 *   DEFAULT  the value when the variable is unset or refused; for TEXT the
 *            string then (NULL: none).
 *   MIN, MAX the accepted range (a number's value, a TEXT's length).
 *   UNIT     what a number counts, as the refusal message names it.
 *   WORDS    "word=value ..." taken besides (UINT) or instead of (WORD) a
 *            number; NULL: none.
 *   WHEN     SET  read at start-up, changed by jw_option_set at run time;
 *            GET  start-up only, read back by jw_option_get;
 *            START start-up only, not reachable through jw_option_get/set;
 *            TOOL read by the `jwmalloc` tool, not by the library, which
 *                 knows the name only (a program it runs inherits it).
 *   READ_BY  the tiers that take their value from it (documentation).
 * jw_options[] is indexed by the row, so jw_opt(JW_OPT_X) is one load at a
 * constant offset wherever the row sits. The RECLAIM rows
 * stay together, RECLAIM first and RECLAIM_THREAD last: jw_option_get/set
 * hand that range to reclamation (api/options.c). */
#define JW_OPTION_TABLE(X)                                                                                       \
  X(STATS, BOOL, 0, 0, 1, "", NULL, SET, "api")                                                                  \
  X(ABORT_ON_ERROR, BOOL, 1, 0, 1, "", NULL, SET, "api")                                                         \
  X(POOL_PERCENT, UINT, 25, 0, 1000, "a percentage", NULL, SET, "frontend")                                      \
  X(POOL_MIN, UINT, 4, 0, 1 << 20, "pages", NULL, SET, "frontend")                                               \
  X(HUGE_CACHE_MB, UINT, 32, 0, 65536, "MiB", NULL, SET, "api")                                                  \
  X(PLACEMENT, UINT, 2, 0, 2, "a mode", "auto=2", SET, "api, backend") /* 2: JW_PLACE_AUTO */          \
  X(BIN, BOOL, 1, 0, 1, "", NULL, SET, "frontend")                                                               \
  X(LOW_MEMORY, BOOL, 0, 0, 1, "", NULL, GET, "api, frontend, midend")                                           \
  X(LOCK_YIELD, BOOL, 0, 0, 1, "", NULL, SET, "midend, backend")                                      \
  X(PAGE_SIZE, PAGE, 0, 0, 65536, "", NULL, GET, "api")                                                          \
  X(STATS_FILE, TEXT, NULL, 0, 4095, "a path", NULL, START, "api")                                               \
  X(CHECK, BOOL, JWMALLOC_CHECK_DEFAULT, 0, 1, "", NULL, START, "backend")                                       \
  X(RETAIN_ROOTS, UINT, 1, 0, 1 << 20, "roots", NULL, START, "backend")                                          \
  X(AHEAD_ROOTS, UINT, 2, 0, 4, "roots", NULL, START, "backend") /* 4: JW_AHEAD_MAX */                           \
  X(RECLAIM, BOOL, 1, 0, 1, "", NULL, SET, "reclaim")                                                            \
  X(RECLAIM_INTERVAL_MS, UINT, 500, 1, 600000, "milliseconds", NULL, SET, "reclaim")                             \
  X(RECLAIM_WATERMARK, SIZE, 64 << 20, 0, (uint64_t)1 << 50, "bytes", NULL, SET, "reclaim")                      \
  X(RECLAIM_WATERMARK_MAX, SIZE, 0, 0, (uint64_t)1 << 50, "bytes", NULL, SET, "reclaim")                         \
  X(RECLAIM_GRACE_MS, UINT, 50, 0, 600000, "milliseconds", NULL, SET, "reclaim")                                 \
  X(RECLAIM_POLICY, WORD, 0, 0, 1, "", "lifetime=0 fixed-delay=1", SET, "reclaim") /* jw_reclaim_policy */       \
  X(RECLAIM_THREAD, BOOL, 1, 0, 1, "", NULL, SET, "reclaim")                                                     \
  X(SWAP, TEXT, NULL, 0, 4095, "an app name", NULL, START, "os")                                                 \
  X(SWAP_LIB, TEXT, "libiosr.so", 0, 4095, "a path", NULL, START, "os, tool")                                          \
  X(SWAP_TRIM, BOOL, 1, 0, 1, "", NULL, START, "os")                                                             \
  X(LIB, TEXT, NULL, 0, 4095, "a path", NULL, TOOL, "tool")

typedef enum jw_option_type { JW_OT_BOOL, JW_OT_UINT, JW_OT_SIZE, JW_OT_WORD, JW_OT_PAGE, JW_OT_TEXT } jw_option_type;
typedef enum jw_option_when { JW_OW_SET, JW_OW_GET, JW_OW_START, JW_OW_TOOL } jw_option_when;

/* A row's DEFAULT as a number (TEXT: 0) and as a string (others: NULL). */
#define JW_OT_NUM_BOOL(d) (d)
#define JW_OT_NUM_UINT(d) (d)
#define JW_OT_NUM_SIZE(d) (d)
#define JW_OT_NUM_WORD(d) (d)
#define JW_OT_NUM_PAGE(d) (d)
#define JW_OT_NUM_TEXT(d) 0
#define JW_OT_STR_BOOL(d) NULL
#define JW_OT_STR_UINT(d) NULL
#define JW_OT_STR_SIZE(d) NULL
#define JW_OT_STR_WORD(d) NULL
#define JW_OT_STR_PAGE(d) NULL
#define JW_OT_STR_TEXT(d) (d)

/* JW_OPT_<NAME>: the row's index. */
typedef enum jw_option_id {
#define JW_X_ID(name, ...) JW_OPT_##name,
  JW_OPTION_TABLE(JW_X_ID)
#undef JW_X_ID
  JW_OPT_COUNT
} jw_option_id;

/* JW_OPT_DEFAULT_<NAME>: a number's default, as a constant (a tier's static
 * initial state: the value before the parse). */
enum {
#define JW_X_DEFAULT(name, type, def, ...) JW_OPT_DEFAULT_##name = JW_OT_NUM_##type(def),
  JW_OPTION_TABLE(JW_X_DEFAULT)
#undef JW_X_DEFAULT
};

/* One row (jw_option_defs[id]). */
typedef struct jw_option_def {
  const char *name; /* without JWMALLOC_ */
  jw_option_type type;
  uint64_t def, min, max;
  const char *def_text; /* TEXT: the value when unset; NULL: none */
  const char *unit, *words;
  jw_option_when when;
  const char *read_by;
} jw_option_def;

extern const jw_option_def jw_option_defs[JW_OPT_COUNT];

/* The row named `name` (without JWMALLOC_, ending at `end`, or at its NUL
 * when end is NULL); -1 if none. Any thread; no allocation. */
int jw_option_find(const char *name, const char *end);

/* The value of the word s in the row's WORDS: 1 and *value, or 0. */
int jw_option_word(const jw_option_def *d, const char *s, uint64_t *value);

/* The default as the README names it ("64M", "auto", "the kernel's page",
 * "unset"), and what a value must be ("milliseconds, 1 to 600000"), into
 * buf (NUL-terminated; cap >= 1); returns the length. No allocation. */
size_t jw_option_default_text(jw_option_id id, char *buf, size_t cap);
size_t jw_option_accepts_text(jw_option_id id, char *buf, size_t cap);

#endif
