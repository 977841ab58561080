/* The allocator's own figures (harness.h, "Allocator figures";
 * docs/design/bench.md, "Allocator figures").
 *
 * The allocator under test is preloaded, so its introspection functions are
 * found with dlsym at start-up: jwmalloc's jw_stats_get, jemalloc's mallctl,
 * mimalloc's mi_process_info. glibc, tcmalloc and Scudo offer none that we
 * read: their figures are "not known", never zero. */
#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "harness.h"
#include "jwmalloc.h"

typedef int (*jw_stats_get_fn)(jw_stats *, size_t);
typedef int (*mallctl_fn)(const char *, void *, size_t *, void *, size_t);
typedef void (*mi_process_info_fn)(size_t *, size_t *, size_t *, size_t *, size_t *, size_t *, size_t *,
                                   size_t *);

static jw_stats_get_fn jw_get;
static mallctl_fn je_ctl;
static mi_process_info_fn mi_info;
static const char *source = "none";
static int probed;

static void probe(void) {
  if (probed) return;
  probed = 1;
  /* Order matters only if a process had two of them; the preloaded one is
   * the allocator, and each name belongs to one allocator. */
  if ((jw_get = (jw_stats_get_fn)dlsym(RTLD_DEFAULT, "jw_stats_get")) != NULL) {
    source = "jwmalloc";
  } else if ((je_ctl = (mallctl_fn)dlsym(RTLD_DEFAULT, "mallctl")) != NULL) {
    /* jemalloc built without --enable-stats reports zeros: treat as none. */
    _Bool on = 0;
    size_t sz = sizeof on;
    if (je_ctl("config.stats", &on, &sz, NULL, 0) == 0 && on) source = "jemalloc";
    else je_ctl = NULL;
  } else if ((mi_info = (mi_process_info_fn)dlsym(RTLD_DEFAULT, "mi_process_info")) != NULL) {
    source = "mimalloc";
  }
}

const char *jwb_astats_source(void) {
  probe();
  return source;
}

static uint64_t je_size(const char *name) {
  size_t v = 0, sz = sizeof v;
  return je_ctl(name, &v, &sz, NULL, 0) == 0 ? (uint64_t)v : JWB_UNKNOWN;
}

int jwb_astats_read(jwb_astats *a) {
  probe();
  for (size_t i = 0; i < sizeof *a / sizeof(uint64_t); i++) ((uint64_t *)a)[i] = JWB_UNKNOWN;
  if (jw_get) {
    jw_stats s;
    memset(&s, 0, sizeof s);
    if (jw_get(&s, sizeof s) != 0) return -1;
    a->mapped = s.mapped_bytes;
    a->metadata = s.backend_metadata_bytes;
    a->backed = s.mapped_bytes - s.backend_released_bytes;
    a->kept = s.backend_free_root_bytes;
    /* 12 bytes of records per granule of each kept root (backend.md, section 6). */
    a->kept_metadata = s.backend_free_root_bytes / 4096 * 12;
    a->live = s.page_source_live_bytes + s.huge_bytes;
    a->splits = s.backend_splits;
    a->merges = s.backend_merges;
    a->range_allocs = s.backend_allocs;
    a->range_frees = s.backend_frees;
    return 0;
  }
  if (je_ctl) {
    uint64_t epoch = 1;
    size_t sz = sizeof epoch;
    /* Advancing the epoch refreshes jemalloc's cached statistics. */
    if (je_ctl("epoch", &epoch, &sz, &epoch, sz) != 0) return -1;
    a->mapped = je_size("stats.mapped");
    a->metadata = je_size("stats.metadata");
    a->backed = je_size("stats.resident");
    a->retained = je_size("stats.retained");
    a->live = je_size("stats.active");
    return 0;
  }
  if (mi_info) {
    size_t elapsed, user, sys, rss, peak_rss, commit, peak_commit, faults;
    mi_info(&elapsed, &user, &sys, &rss, &peak_rss, &commit, &peak_commit, &faults);
    a->backed = commit;
    return 0;
  }
  return -1;
}

size_t jwb_astats_format(char *buf, size_t cap, const char *prefix, const jwb_astats *a) {
  static const struct {
    const char *name;
    size_t off;
  } f[] = {
      {"mapped", offsetof(jwb_astats, mapped)},   {"meta", offsetof(jwb_astats, metadata)},
      {"backed", offsetof(jwb_astats, backed)},   {"retained", offsetof(jwb_astats, retained)},
      {"kept", offsetof(jwb_astats, kept)},       {"kept_meta", offsetof(jwb_astats, kept_metadata)},
      {"live", offsetof(jwb_astats, live)},
      {"splits", offsetof(jwb_astats, splits)},   {"merges", offsetof(jwb_astats, merges)},
      {"range_allocs", offsetof(jwb_astats, range_allocs)},
      {"range_frees", offsetof(jwb_astats, range_frees)},
  };
  size_t len = 0;
  if (cap) buf[0] = 0;
  for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
    uint64_t v = *(const uint64_t *)((const char *)a + f[i].off);
    if (v == JWB_UNKNOWN) continue;
    int n = snprintf(buf + len, cap - len, "%s%s_%s=%" PRIu64, len ? " " : "", prefix, f[i].name, v);
    if (n < 0 || (size_t)n >= cap - len) break;
    len += (size_t)n;
  }
  return len;
}

void jwb_astats_delta(jwb_astats *out, const jwb_astats *end, const jwb_astats *start) {
  *out = *end;
  uint64_t *o = &out->splits;
  const uint64_t *s = &start->splits;
  /* The counters (splits .. range_frees) as differences; the levels stay. */
  for (size_t i = 0; i < 4; i++)
    if (o[i] != JWB_UNKNOWN && s[i] != JWB_UNKNOWN) o[i] -= s[i];
}
