/* See option_table.h. Linked into the library and into the `jwmalloc` tool;
 * needs only log.c (jw_format). */
#include "option_table.h"

#include "log.h"

const jw_option_def jw_option_defs[JW_OPT_COUNT] = {
#define JW_X_ROW(name_, type_, def_, min_, max_, unit_, words_, when_, by_)                                      \
  [JW_OPT_##name_] = {.name = #name_,                                                                            \
                      .type = JW_OT_##type_,                                                                     \
                      .def = JW_OT_NUM_##type_(def_),                                                            \
                      .min = (min_),                                                                             \
                      .max = (max_),                                                                             \
                      .def_text = JW_OT_STR_##type_(def_),                                                       \
                      .unit = (unit_),                                                                           \
                      .words = (words_),                                                                         \
                      .when = JW_OW_##when_,                                                                     \
                      .read_by = (by_)},
    JW_OPTION_TABLE(JW_X_ROW)
#undef JW_X_ROW
};

int jw_option_find(const char *name, const char *end) {
  for (int i = 0; i < JW_OPT_COUNT; i++) {
    const char *a = name, *b = jw_option_defs[i].name;
    while (a != end && *a && *a == *b) a++, b++;
    if (*b == 0 && (a == end || *a == 0)) return i;
  }
  return -1;
}

/* WORDS is "word=value word=value ...": the next word from *w (its length
 * in *len, its value in *value), advancing *w; 0 at the end. */
static int next_word(const char **w, const char **word, size_t *len, uint64_t *value) {
  const char *p = *w;
  if (p == NULL || *p == 0) return 0;
  *word = p;
  while (*p && *p != '=') p++;
  *len = (size_t)(p - *word);
  uint64_t v = 0;
  if (*p == '=') p++;
  while (*p >= '0' && *p <= '9') v = v * 10 + (uint64_t)(*p++ - '0');
  while (*p == ' ') p++;
  *value = v;
  *w = p;
  return 1;
}

int jw_option_word(const jw_option_def *d, const char *s, uint64_t *value) {
  const char *w = d->words, *word;
  size_t len, i;
  uint64_t v;
  while (next_word(&w, &word, &len, &v)) {
    for (i = 0; i < len && s[i] == word[i]; i++) continue;
    if (i == len && s[len] == 0) {
      *value = v;
      return 1;
    }
  }
  return 0;
}

/* Appends n bytes of s to buf (length *len, capacity cap), truncating. */
static void append(char *buf, size_t cap, size_t *len, const char *s, size_t n) {
  while (n-- && *len + 1 < cap) buf[(*len)++] = *s++;
  buf[*len] = 0;
}

static void append_str(char *buf, size_t cap, size_t *len, const char *s) {
  size_t n = 0;
  while (s[n]) n++;
  append(buf, cap, len, s, n);
}

/* Appends the words as "a, b or c". */
static void append_words(const char *words, char *buf, size_t cap, size_t *len) {
  const char *w = words, *word;
  size_t n, count = 0, k;
  uint64_t v;
  while (next_word(&w, &word, &n, &v)) count++;
  for (w = words, k = 0; next_word(&w, &word, &n, &v); k++) {
    if (k > 0) append_str(buf, cap, len, k + 1 == count ? " or " : ", ");
    append(buf, cap, len, word, n);
  }
}

size_t jw_option_default_text(jw_option_id id, char *buf, size_t cap) {
  const jw_option_def *d = &jw_option_defs[id];
  if (d->type == JW_OT_TEXT) return jw_format(buf, cap, "%s", d->def_text ? d->def_text : "unset");
  if (d->type == JW_OT_PAGE && d->def == 0) return jw_format(buf, cap, "the kernel's page");
  const char *w = d->words, *word;
  size_t n, len = 0;
  uint64_t wv;
  while (next_word(&w, &word, &n, &wv))
    if (wv == d->def) {
      buf[0] = 0;
      append(buf, cap, &len, word, n);
      return len;
    }
  uint64_t v = d->def;
  int shift = 0;
  if (d->type == JW_OT_SIZE && v != 0) /* as the README writes sizes: 64M, not 67108864 */
    shift = v % (1u << 30) == 0 ? 30 : v % (1u << 20) == 0 ? 20 : v % 1024 == 0 ? 10 : 0;
  return jw_format(buf, cap, "%llu%s", (unsigned long long)(v >> shift),
                   shift == 30 ? "G" : shift == 20 ? "M" : shift == 10 ? "K" : "");
}

size_t jw_option_accepts_text(jw_option_id id, char *buf, size_t cap) {
  const jw_option_def *d = &jw_option_defs[id];
  unsigned long long lo = d->min, hi = d->max;
  switch (d->type) {
    case JW_OT_BOOL:
      return jw_format(buf, cap, "0 or 1");
    case JW_OT_SIZE:
      return jw_format(buf, cap, "%s with an optional K, M or G suffix", d->unit);
    case JW_OT_PAGE:
      return jw_format(buf, cap, "a power of two from the kernel's page size to %llu", hi);
    case JW_OT_TEXT:
      return jw_format(buf, cap, "%s of at most %llu bytes", d->unit, hi);
    case JW_OT_WORD: {
      size_t len = 0;
      buf[0] = 0;
      append_words(d->words, buf, cap, &len);
      return len;
    }
    case JW_OT_UINT:
    default: {
      size_t len = jw_format(buf, cap, "%s, %llu to %llu", d->unit, lo, hi);
      if (d->words) {
        append_str(buf, cap, &len, ", or ");
        append_words(d->words, buf, cap, &len);
      }
      return len;
    }
  }
}
