#include "opts.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *iosr_slot_name(int v) { return v == IOSR_SLOT_GLOBAL ? "global" : "process"; }
const char *iosr_ra_name(int v) {
  return v == IOSR_RA_CLUSTER ? "cluster" : v == IOSR_RA_VMA ? "vma" : "adaptive";
}
const char *iosr_sched_name(int v) { return v == IOSR_SCHED_FIFO ? "fifo" : "sios"; }

int iosr_parse_size(const char *s, uint64_t *out) {
  /* strtoull skips leading blanks and takes a sign ("-1" wraps to 2^64-1):
   * a size starts with a digit or it is refused */
  if (!s || !isdigit((unsigned char)s[0])) goto bad;
  errno = 0;
  char *end;
  unsigned long long v = strtoull(s, &end, 10);
  if (errno || end == s) goto bad;
  uint64_t mul = 1;
  if (*end) {
    switch (toupper((unsigned char)*end)) {
      case 'K': mul = 1ull << 10; break;
      case 'M': mul = 1ull << 20; break;
      case 'G': mul = 1ull << 30; break;
      case 'T': mul = 1ull << 40; break;
      default: goto bad;
    }
    end++;
    if (*end == 'B' || *end == 'b') end++;
    if (*end) goto bad;
  }
  if (v > UINT64_MAX / mul) goto bad;
  *out = v * mul;
  return 0;
bad:
  errno = EINVAL;
  return -1;
}

/* The options table: every IOSR_* option, one row each (README, "IOSR"). A
 * row gives the key, how its value reads, the field it sets, its range
 * (K_U32, K_SIZE), its default (K_ENUM: the index of its value's name) and
 * whether `iosr set` may change it while the engine runs. */
enum kind { K_U32, K_SIZE, K_BOOL, K_ENUM, K_I32 };
struct key {
  const char *name;
  enum kind kind;
  size_t off;
  uint64_t min, max;
  const char *const *names; /* K_ENUM: values in order */
  int64_t def;
  int runtime;
};

static const char *const slot_names[] = {"global", "process", NULL};
static const char *const ra_names[] = {"cluster", "vma", "adaptive", NULL};
static const char *const sched_names[] = {"fifo", "sios", NULL};
static const char *const io_names[] = {"uring", "sync", NULL};
static const char *const wprio_names[] = {"be7", "idle", NULL};

#define OFF(f) offsetof(iosr_settings, f)
enum { START = 0, RUN = 1 }; /* read when the engine starts / also `iosr set` */
static const struct key keys[] = {
    {"slot", K_ENUM, OFF(slot), 0, 0, slot_names, IOSR_SLOT_PROCESS, RUN},
    {"readahead", K_ENUM, OFF(readahead), 0, 0, ra_names, IOSR_RA_ADAPTIVE, RUN},
    {"sched", K_ENUM, OFF(sched), 0, 0, sched_names, IOSR_SCHED_SIOS, RUN},
    {"page_cluster", K_U32, OFF(page_cluster), 0, 8, NULL, 3, RUN},
    {"ra_init", K_U32, OFF(ra_init), 1, 65536, NULL, 16, RUN},
    {"ra_max", K_U32, OFF(ra_max), 1, 65536, NULL, 1024, RUN},
    {"ra_probe_stride", K_U32, OFF(ra_probe_stride), 2, 65536, NULL, 16, RUN},
    {"ra_probes", K_U32, OFF(ra_probes), 1, 1024, NULL, 8, RUN},
    {"ra_probes_full", K_U32, OFF(ra_probes_full), 1, 1024, NULL, 2, RUN},
    {"ra_probe_horizon", K_U32, OFF(ra_probe_horizon), 1, 65536, NULL, 64, RUN},
    {"ra_grow_pct", K_U32, OFF(ra_grow_pct), 1, 100, NULL, 75, RUN},
    {"ra_shrink_pct", K_U32, OFF(ra_shrink_pct), 0, 100, NULL, 50, RUN},
    {"ra_zone", K_SIZE, OFF(ra_zone), 0, 1ull << 40, NULL, 0, START},
    {"max_io", K_SIZE, OFF(max_io), 4096, 16u << 20, NULL, 1 << 20, RUN},
    {"queue_depth", K_U32, OFF(queue_depth), 1, 1024, NULL, 32, RUN},
    {"write_hold_max", K_U32, OFF(write_hold_max), 0, 1u << 20, NULL, 32, RUN},
    {"write_hold_ms", K_U32, OFF(write_hold_ms), 0, 60000, NULL, 50, RUN},
    {"write_ioprio", K_ENUM, OFF(write_ioprio_idle), 0, 0, wprio_names, 0, RUN},
    {"budget", K_SIZE, OFF(budget), 0, UINT64_MAX, NULL, 0, RUN},
    {"budget_low", K_SIZE, OFF(budget_low), 0, UINT64_MAX, NULL, 0, RUN},
    {"zero_window", K_U32, OFF(zero_window), 1, 512, NULL, 16, RUN},
    {"clean_pages", K_BOOL, OFF(clean_pages), 0, 1, NULL, 0, START},
    {"moveout", K_BOOL, OFF(moveout), 0, 1, NULL, 1, START},
    {"reclaim_batch", K_U32, OFF(reclaim_batch), 1, 4096, NULL, 256, RUN},
    {"reclaim_inflight", K_U32, OFF(reclaim_inflight), 1, 256, NULL, 8, RUN},
    {"io", K_ENUM, OFF(io), 0, 0, io_names, IOSR_IO_URING, START},
    {"direct", K_BOOL, OFF(direct), 0, 1, NULL, 1, START},
    {"buffer", K_SIZE, OFF(buffer_bytes), 1u << 20, 1ull << 32, NULL, 32 << 20, START},
    {"probe_cache", K_U32, OFF(probe_cache), 0, 1u << 20, NULL, 4096, START},
    {"restart_grace_ms", K_U32, OFF(restart_grace_ms), 0, 600000, NULL, 5000, START},
    {"test_hooks", K_BOOL, OFF(test_hooks), 0, 1, NULL, 0, START},
    {"hello_timeout_ms", K_U32, OFF(hello_timeout_ms), 10, 600000, NULL, 5000, RUN},
    {"conns_per_uid", K_U32, OFF(conns_per_uid), 1, 1u << 20, NULL, 4096, RUN},
    {"trim_wait_ms", K_U32, OFF(trim_wait_ms), 0, 600000, NULL, 2000, RUN},
    {"drop_stall_ms", K_U32, OFF(drop_stall_ms), 1, 600000, NULL, 2000, RUN},
    {"nice", K_I32, OFF(nice), 0, 0, NULL, -10, START}, /* -20..19, checked below */
    {"rt_prio", K_U32, OFF(rt_prio), 0, 99, NULL, 0, START},
};
#define NKEYS (sizeof keys / sizeof keys[0])

static const struct key *find(const char *name) {
  for (size_t i = 0; i < NKEYS; i++)
    if (!strcmp(keys[i].name, name)) return &keys[i];
  return NULL;
}

/* Stores v in k's field of s, as the field's type. */
static void store(iosr_settings *s, const struct key *k, int64_t v) {
  char *field = (char *)s + k->off;
  switch (k->kind) {
    case K_ENUM:
    case K_BOOL: *(int *)field = (int)v; break;
    case K_I32: *(int32_t *)field = (int32_t)v; break;
    case K_U32: *(uint32_t *)field = (uint32_t)v; break;
    case K_SIZE: *(uint64_t *)field = (uint64_t)v; break;
  }
}

const char *iosr_settings_key(size_t i) { return i < NKEYS ? keys[i].name : NULL; }

int iosr_settings_runtime(const char *key) {
  const struct key *k = find(key);
  return !k ? -1 : k->runtime == RUN;
}

const char *iosr_settings_default(size_t i, char *buf, size_t cap) {
  if (i >= NKEYS) return NULL;
  const struct key *k = &keys[i];
  if (k->kind == K_ENUM) return k->names[k->def];
  if (k->kind != K_SIZE || k->def == 0) {
    snprintf(buf, cap, "%lld", (long long)k->def);
    return buf;
  }
  /* a size in the largest unit that divides it, as the README writes it */
  static const char units[] = "GMK";
  uint64_t v = (uint64_t)k->def;
  for (int u = 0; units[u]; u++) {
    uint64_t mul = 1ull << (10 * (3 - u));
    if (v % mul == 0) {
      snprintf(buf, cap, "%llu%c", (unsigned long long)(v / mul), units[u]);
      return buf;
    }
  }
  snprintf(buf, cap, "%llu", (unsigned long long)v);
  return buf;
}

static void set_err(char *err, size_t cap, const char *fmt, const char *a, const char *b) {
  if (err && cap) snprintf(err, cap, fmt, a, b);
  errno = EINVAL;
}

int iosr_settings_set(iosr_settings *s, const char *key, const char *value, char *err, size_t cap) {
  const struct key *k = find(key);
  if (!k) {
    set_err(err, cap, "unknown option '%s'%s", key, "");
    return -1;
  }
  if (k->kind == K_ENUM) {
    for (int j = 0; k->names[j]; j++)
      if (strcasecmp(k->names[j], value) == 0) {
        store(s, k, j);
        return 0;
      }
    set_err(err, cap, "bad value '%s' for %s", value, key);
    return -1;
  }
  uint64_t v;
  if (k->kind == K_I32) {
    char *end;
    long n = strtol(value, &end, 10);
    if (!*value || *end || n < -20 || n > 19) {
      set_err(err, cap, "bad value '%s' for %s (want -20..19)", value, key);
      return -1;
    }
    store(s, k, n);
    return 0;
  }
  if (k->kind == K_BOOL) {
    if (!strcmp(value, "1") || !strcasecmp(value, "yes") || !strcasecmp(value, "on")) v = 1;
    else if (!strcmp(value, "0") || !strcasecmp(value, "no") || !strcasecmp(value, "off")) v = 0;
    else {
      set_err(err, cap, "bad value '%s' for %s (want 0 or 1)", value, key);
      return -1;
    }
    store(s, k, (int64_t)v);
    return 0;
  }
  if (iosr_parse_size(value, &v)) {
    set_err(err, cap, "bad value '%s' for %s (not a number)", value, key);
    return -1;
  }
  if (v < k->min || v > k->max) {
    set_err(err, cap, "bad value '%s' for %s (out of range)", value, key);
    return -1;
  }
  store(s, k, (int64_t)v);
  return 0;
}

int iosr_settings_parse(iosr_settings *s, const char *list, char *err, size_t cap) {
  if (!list) return 0;
  char buf[1024];
  if (strlen(list) >= sizeof buf) {
    set_err(err, cap, "option list too long%s%s", "", "");
    return -1;
  }
  strcpy(buf, list);
  char *save = NULL;
  for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    char *eq = strchr(tok, '=');
    if (!eq) {
      set_err(err, cap, "option '%s' lacks '=value'%s", tok, "");
      return -1;
    }
    *eq = 0;
    if (iosr_settings_set(s, tok, eq + 1, err, cap)) return -1;
  }
  return 0;
}

const char *iosr_env(const char *name) {
  char var[64];
  snprintf(var, sizeof var, "IOSR_%s", name);
  const char *v = getenv(var);
  return v && *v ? v : NULL;
}

int iosr_settings_init(iosr_settings *s, char *err, size_t cap) {
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < NKEYS; i++) store(s, &keys[i], keys[i].def);
  for (size_t i = 0; i < NKEYS; i++) {
    char up[64];
    size_t j = 0;
    for (; keys[i].name[j] && j < sizeof up - 1; j++) up[j] = (char)toupper((unsigned char)keys[i].name[j]);
    up[j] = 0;
    const char *v = iosr_env(up);
    if (v && iosr_settings_set(s, keys[i].name, v, err, cap)) {
      char tmp[256];
      snprintf(tmp, sizeof tmp, "IOSR_%s: %s", up, err ? err : "");
      if (err && cap) snprintf(err, cap, "%s", tmp);
      errno = EINVAL;
      return -1;
    }
  }
  return 0;
}
