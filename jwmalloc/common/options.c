/* See options.h. */
#include "options.h"

#include <stddef.h>
#include <sys/auxv.h>

#include "../pages/page_source.h"
#include "config.h"
#include "log.h"
#include "page.h"

extern char **environ;

static const struct {
  const char *name;
  uint64_t def, max;
  const char *want; /* what a bad value is told it should be */
  const char *def_text; /* the default as the README names it, or NULL: the number */
} table[JW_OPT_COUNT] = {
    [JW_OPT_STATS] = {"STATS", 0, 1, "0 or 1", NULL},
    [JW_OPT_ABORT_ON_ERROR] = {"ABORT_ON_ERROR", 1, 1, "0 or 1", NULL},
    [JW_OPT_POOL_PERCENT] = {"POOL_PERCENT", 25, 1000, "a percentage, 0 to 1000", NULL},
    [JW_OPT_POOL_MIN] = {"POOL_MIN", 4, 1 << 20, "pages, 0 to 1048576", NULL},
    [JW_OPT_HUGE_CACHE_MB] = {"HUGE_CACHE_MB", 32, 65536, "MiB, 0 to 65536", NULL},
    [JW_OPT_PLACEMENT] = {"PLACEMENT", JW_PLACE_AUTO, 2, "0, 1 or auto", "auto"},
    [JW_OPT_BIN] = {"BIN", 1, 1, "0 or 1", NULL},
    [JW_OPT_LOW_MEMORY] = {"LOW_MEMORY", 0, 1, "0 or 1", NULL},
    [JW_OPT_LOCK_YIELD] = {"LOCK_YIELD", 0, 1, "0 or 1", NULL},
    [JW_OPT_PAGE_SIZE] = {"PAGE_SIZE", 0, 65536, "a power of two from the kernel's page size to 65536",
                          "the kernel's page"},
};

/* JWMALLOC_* names read elsewhere (each reader checks its own values), so
 * that only a name no part of jwmalloc reads is reported as unknown. A new
 * option is added here too (tests/jwmalloc/options_test.sh checks every
 * name of the README's tables). */
static const char *const others[] = {
    "STATS_FILE",                                     /* here, below */
    "LIB",                                            /* the jwmalloc run tool; inherited by its programs */
    "SWAP", "SWAP_LIB", "SWAP_TRIM",                  /* os/os_swap.c (docs/design/stack.md) */
    "CHECK", "RETAIN_ROOTS", "AHEAD_ROOTS",             /* backend/backend.c */
    "RECLAIM", "RECLAIM_INTERVAL_MS", "RECLAIM_WATERMARK", "RECLAIM_WATERMARK_MAX", "RECLAIM_POLICY", "RECLAIM_THREAD", "RECLAIM_GRACE_MS", /* reclaim/ */
};

jw_atomic_u64 jw_options[JW_OPT_COUNT] = {
    [JW_OPT_STATS] = JW_ATOMIC_INIT(0),
    [JW_OPT_ABORT_ON_ERROR] = JW_ATOMIC_INIT(1),
    [JW_OPT_POOL_PERCENT] = JW_ATOMIC_INIT(25),
    [JW_OPT_POOL_MIN] = JW_ATOMIC_INIT(4),
    [JW_OPT_HUGE_CACHE_MB] = JW_ATOMIC_INIT(32),
    [JW_OPT_PLACEMENT] = JW_ATOMIC_INIT(JW_PLACE_AUTO), /* docs/design/backend.md 7b, "Placement on demand" */
    [JW_OPT_BIN] = JW_ATOMIC_INIT(1),
    [JW_OPT_LOW_MEMORY] = JW_ATOMIC_INIT(0),
    [JW_OPT_LOCK_YIELD] = JW_ATOMIC_INIT(0), /* docs/design/concurrency.md, "One yield before a fallback" */
    [JW_OPT_PAGE_SIZE] = JW_ATOMIC_INIT(0),  /* docs/design/architecture.md, "Page size at run time" */
};

static jw_atomic_ptr stats_file;

/* If s starts with prefix, returns the rest, else NULL. */
static const char *after(const char *s, const char *prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return NULL;
  return s;
}

int jw_option_lookup(const char *name) {
  for (int i = 0; i < JW_OPT_COUNT; i++)
    if (jw_str_eq(name, table[i].name)) return i;
  return -1;
}

/* Decimal value, or -1 when not a number (the option keeps its default). */
static int64_t parse(const char *s) {
  if (*s < '0' || *s > '9') return -1;
  int64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++) {
    v = v * 10 + (*s - '0');
    if (v > (int64_t)1 << 40) return -1;
  }
  return *s ? -1 : v;
}

/* The JWMALLOC_STATS_FILE path, copied: the environment's strings may be
 * overwritten later (programs that set their process title write over them). */
static char stats_path[4096];

/* "NAME=value" of a JWMALLOC_ variable: is NAME one of `others`? */
static int known_elsewhere(const char *rest) {
  for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
    const char *v = after(rest, others[i]);
    if (v && (*v == '=' || *v == 0)) return 1;
  }
  return 0;
}

void jw_options_init(void) {
  /* A setuid or setgid program (AT_SECURE): its environment comes from a less
   * privileged user, who must not choose where it writes (STATS_FILE) or
   * what it prints. Every JWMALLOC_* variable is ignored there, as glibc
   * ignores its MALLOC_* tunables. */
  if (environ == NULL || getauxval(AT_SECURE)) {
    jw_page_init(0);
    jw_pages_set_place_mode((unsigned)jw_opt(JW_OPT_PLACEMENT)); /* the default, as at the end */
    return;
  }
  for (char **e = environ; *e; e++) {
    const char *rest = after(*e, "JWMALLOC_");
    if (rest == NULL) continue;
    const char *v = after(rest, "STATS_FILE=");
    if (v) {
      size_t n = 0;
      while (v[n] && n < sizeof stats_path) n++;
      if (n == sizeof stats_path) {
        jw_dprintf(2, "jwmalloc: JWMALLOC_STATS_FILE: path longer than %zu bytes; ignored\n", sizeof stats_path - 1);
        continue;
      }
      for (size_t i = 0; i <= n; i++) stats_path[i] = v[i];
      /* Relaxed: read by the exit path of the same process after init. */
      jw_store(&stats_file, (void *)stats_path, JW_RELAXED);
      continue;
    }
    int matched = 0;
    for (int i = 0; i < JW_OPT_COUNT && !matched; i++) {
      v = after(rest, table[i].name);
      if (v == NULL || *v != '=') continue;
      matched = 1;
      int64_t x = i == JW_OPT_PLACEMENT && jw_str_eq(v + 1, "auto") ? JW_PLACE_AUTO : parse(v + 1);
      /* PAGE_SIZE: 0 (the kernel's) or a page jw_page_valid takes. */
      int ok = x >= 0 && (uint64_t)x <= table[i].max && (i != JW_OPT_PAGE_SIZE || x == 0 || jw_page_valid((size_t)x));
      if (ok) {
        jw_store(&jw_options[i], (uint64_t)x, JW_RELAXED); /* independent setting */
      } else {
        char def[24];
        if (table[i].def_text == NULL) jw_format(def, sizeof def, "%llu", (unsigned long long)table[i].def);
        jw_option_bad(table[i].name, v + 1, table[i].want, table[i].def_text ? table[i].def_text : def);
      }
    }
    if (!matched && !known_elsewhere(rest)) {
      char name[64];
      size_t n = 0;
      for (; rest[n] && rest[n] != '=' && n < sizeof name - 1; n++) name[n] = rest[n];
      name[n] = 0;
      jw_dprintf(2, "jwmalloc: JWMALLOC_%s: unknown option, ignored (options: README, \"Options\", \"jwmalloc backend\", \"jwmalloc reclamation\")\n", name);
    }
  }
  /* Before any tier maps memory: the page every slab and range is made of. */
  jw_page_init((size_t)jw_opt(JW_OPT_PAGE_SIZE));
  /* The backend keeps the placement mode (it also runs without the tiers). */
  jw_pages_set_place_mode((unsigned)jw_opt(JW_OPT_PLACEMENT));
}

const char *jw_options_stats_file(void) { return jw_load(&stats_file, JW_RELAXED); }

/* Public option API: include/jwmalloc.h. The reclamation options live in
 * reclaim/ and are reached through the same two calls. */
#include <errno.h>

#include "../reclaim/reclaim.h"

JW_EXPORT int jw_option_get(const char *name, long *value) {
  int id = name ? jw_option_lookup(name) : -1;
  if (id < 0 && name && value) {
    int rc = jw_reclaim_option(name, value, 0);
    if (rc != -2) return rc;
  }
  if (id < 0 || value == NULL) {
    errno = EINVAL;
    return -1;
  }
  /* PLACEMENT: the backend's mode, the one in force (two concurrent sets
   * may store the table and the mode in opposite orders). */
  *value = id == JW_OPT_PLACEMENT ? (long)jw_pages_place_mode() : (long)jw_opt((jw_option_id)id);
  if (id == JW_OPT_PAGE_SIZE) *value = (long)jw_page.size; /* the page in force, the kernel's by default */
  return 0;
}

JW_EXPORT int jw_option_set(const char *name, long value) {
  int id = name ? jw_option_lookup(name) : -1;
  if (id < 0 && name) {
    int rc = jw_reclaim_option(name, &value, 1);
    if (rc != -2) return rc;
  }
  /* LOW_MEMORY sizes caches as they are created, PAGE_SIZE every slab and
   * range: start-up only. */
  if (id < 0 || id == JW_OPT_LOW_MEMORY || id == JW_OPT_PAGE_SIZE || value < 0 || (uint64_t)value > table[id].max) {
    errno = EINVAL;
    return -1;
  }
  jw_store(&jw_options[id], (uint64_t)value, JW_RELAXED); /* independent setting */
  if (id == JW_OPT_PLACEMENT) jw_pages_set_place_mode((unsigned)value); /* switches at once for 0 and 1 */
  return 0;
}
