/* See options.h; the design: docs/design/architecture.md, "Options". */
#include "options.h"

#include <sys/auxv.h>

#include "log.h"
#include "page.h"

extern char **environ;

jw_atomic_u64 jw_options[JW_OPT_COUNT] = {
#define JW_X_VALUE(name, type, def, ...) [JW_OPT_##name] = JW_ATOMIC_INIT(JW_OT_NUM_##type(def)),
    JW_OPTION_TABLE(JW_X_VALUE)
#undef JW_X_VALUE
};

/* jw_option_origin of each row; relaxed (written by the parse, the same by
 * every parse). */
static jw_atomic_u32 origin[JW_OPT_COUNT];

/* TEXT values: the copy of each (the environment's strings may be
 * overwritten later: programs that set their process title write over them),
 * published with a release store of its pointer. */
enum {
#define JW_X_TEXT(name, type, ...) +(JW_OT_##type == JW_OT_TEXT)
  TEXT_ROWS = 0 JW_OPTION_TABLE(JW_X_TEXT),
#undef JW_X_TEXT
  TEXT_MAX = 4095,
};
#define JW_X_TEXT_FITS(name, type, def, min, max, ...) \
  _Static_assert(JW_OT_##type != JW_OT_TEXT || (max) <= TEXT_MAX, "JWMALLOC_" #name ": MAX fits text_copy");
JW_OPTION_TABLE(JW_X_TEXT_FITS)
#undef JW_X_TEXT_FITS
static char text_copy[TEXT_ROWS][TEXT_MAX + 1];
static jw_atomic_ptr text[JW_OPT_COUNT];

enum { PARSE_NONE, PARSE_RUNNING, PARSE_DONE };
static jw_atomic_u32 parse_state;

jw_option_origin jw_opt_origin(jw_option_id id) { return (jw_option_origin)jw_load(&origin[id], JW_RELAXED); }

const char *jw_opt_str(jw_option_id id) {
  const char *s = jw_load(&text[id], JW_ACQUIRE); /* pairs with the copy's release */
  return s && *s ? s : jw_option_defs[id].def_text;
}

/* If s starts with prefix, returns the rest, else NULL. */
static const char *after(const char *s, const char *prefix) {
  while (*prefix)
    if (*s++ != *prefix++) return NULL;
  return s;
}

/* A decimal number, with a K, M or G suffix (powers of 1024) when
 * `suffixes`; 1 and *out, or 0 when malformed or above 2^50. */
static int parse_number(const char *s, int suffixes, uint64_t *out) {
  const uint64_t limit = (uint64_t)1 << 50;
  if (*s < '0' || *s > '9') return 0;
  uint64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++)
    if ((v = v * 10 + (uint64_t)(*s - '0')) > limit) return 0;
  if (suffixes && *s) {
    int shift = (*s == 'K' || *s == 'k') ? 10 : (*s == 'M' || *s == 'm') ? 20 : (*s == 'G' || *s == 'g') ? 30 : -1;
    if (shift < 0 || s[1] != 0 || v > (limit >> shift)) return 0;
    v <<= shift;
  } else if (*s) {
    return 0;
  }
  *out = v;
  return 1;
}

/* The value of s for row d: 1 and *out, or 0 when refused. */
static int parse_value(const jw_option_def *d, const char *s, uint64_t *out) {
  if (d->words && jw_option_word(d, s, out)) return 1;
  if (d->type == JW_OT_WORD || !parse_number(s, d->type == JW_OT_SIZE, out)) return 0;
  if (*out < d->min || *out > d->max) return 0;
  return d->type != JW_OT_PAGE || *out == 0 || jw_page_valid((size_t)*out);
}

/* The one line for a refused value: "jwmalloc: JWMALLOC_<name>=<value>:
 * expected <accepts>; default <default> kept". */
static void refuse(jw_option_id id, const char *value) {
  char want[128], def[64];
  jw_option_accepts_text(id, want, sizeof want);
  jw_option_default_text(id, def, sizeof def);
  jw_dprintf(2, "jwmalloc: JWMALLOC_%s=%s: expected %s; default %s kept\n", jw_option_defs[id].name, value, want, def);
}

/* A TEXT value; only the reporting parse stores it (one writer per byte). */
static void take_text(jw_option_id id, const char *v, unsigned slot, int report) {
  const jw_option_def *d = &jw_option_defs[id];
  size_t n = 0;
  while (v[n] && n <= d->max) n++;
  if (n > d->max) {
    jw_store(&origin[id], JW_ORIGIN_REFUSED, JW_RELAXED);
    if (report) jw_dprintf(2, "jwmalloc: JWMALLOC_%s: longer than %llu bytes; ignored\n", d->name, (unsigned long long)d->max);
    return;
  }
  jw_store(&origin[id], JW_ORIGIN_ENV, JW_RELAXED);
  if (!report || d->when == JW_OW_TOOL) return; /* the tool's: known, not kept */
  for (size_t i = 0; i <= n; i++) text_copy[slot][i] = v[i];
  jw_store(&text[id], (void *)text_copy[slot], JW_RELEASE); /* see jw_opt_str */
}

/* One "NAME=value" after the JWMALLOC_ prefix. */
static void take(const char *rest, int report) {
  const char *eq = rest;
  while (*eq && *eq != '=') eq++;
  int id = jw_option_find(rest, eq);
  if (id < 0) {
    char name[64];
    size_t n = 0;
    for (; rest + n < eq && n < sizeof name - 1; n++) name[n] = rest[n];
    name[n] = 0;
    if (report)
      jw_dprintf(2, "jwmalloc: JWMALLOC_%s: unknown option, ignored (the options: README \"Options\", "
                 "`jwmalloc options`)\n", name);
    return;
  }
  if (*eq == 0) return; /* a name without '=' (not a variable): nothing to take */
  const jw_option_def *d = &jw_option_defs[id];
  if (d->type == JW_OT_TEXT) {
    unsigned slot = 0;
    for (int i = 0; i < id; i++) slot += jw_option_defs[i].type == JW_OT_TEXT;
    take_text((jw_option_id)id, eq + 1, slot, report);
    return;
  }
  uint64_t v;
  if (parse_value(d, eq + 1, &v)) {
    jw_store(&jw_options[id], v, JW_RELAXED); /* independent setting */
    jw_store(&origin[id], JW_ORIGIN_ENV, JW_RELAXED);
  } else {
    jw_store(&origin[id], JW_ORIGIN_REFUSED, JW_RELAXED); /* the default stays */
    if (report) refuse((jw_option_id)id, eq + 1);
  }
}

void jw_options_init(void) {
  /* Acquire: a finished parse's values come with it. */
  uint32_t s = jw_load(&parse_state, JW_ACQUIRE);
  if (s == PARSE_DONE) return;
  /* The first caller reports; a caller racing it parses the same numbers
   * silently rather than wait for it (no malloc waits). */
  int report = s == PARSE_NONE && jw_cas(&parse_state, &s, PARSE_RUNNING, JW_RELAXED, JW_RELAXED);
  /* A setuid or setgid program (AT_SECURE): its environment comes from a less
   * privileged user, who must not choose where it writes (STATS_FILE) or
   * what it prints. Every JWMALLOC_* variable is ignored there, as glibc
   * ignores its MALLOC_* tunables. */
  if (environ != NULL && !getauxval(AT_SECURE))
    for (char **e = environ; *e; e++) {
      const char *rest = after(*e, "JWMALLOC_");
      if (rest) take(rest, report);
    }
  /* Only the reporting parse marks it done: a racing silent one stores no
   * strings, and a caller that then saw "done" would read their defaults. */
  if (report) jw_store(&parse_state, PARSE_DONE, JW_RELEASE);
}
