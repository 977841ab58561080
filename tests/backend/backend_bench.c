/* Backend driver and microbenchmark (not a test): the two mobile patterns of
 * issue 3 run straight against the page source, single-threaded.
 *
 *   reformatting  live bytes constant; the dominant range class changes every
 *                 phase (a few ms); reports splits and merges per operation,
 *                 time per operation, mapped/live.
 *   peak-trough   a steady live set, a burst to 5x, back to the steady level;
 *                 reports mapped, metadata and resident bytes at steady, peak,
 *                 after the trough, and after two reclamation steps.
 *
 * Usage: backend_bench [reformatting|peak-trough|all] [--quick] [--ops N] [--seed S]
 * Instructions per operation: `make bench-backend` runs the reformatting
 * pattern under callgrind collecting only inside jw_pages_alloc/jw_pages_free.
 * Exit status 1 if the backend's whole-state check fails after a pattern. */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "backend/backend.h"
#include "backend/size_class.h"
#include "os/os_mem.h"
#include "tb.h"

typedef struct live_set {
  void **p;
  uint32_t *n;
  uint32_t count, cap;
  uint64_t granules;
} live_set;

static uint64_t calls; /* jw_pages_alloc + jw_pages_free calls, for callgrind */

static int touch; /* write every granule of a new range (resident memory) */

static void ls_alloc(live_set *s, uint32_t n) {
  if (s->count == s->cap) return;
  char *p = jw_pages_alloc(n, n == 1 ? JW_KIND_SMALL_SLAB : JW_KIND_LARGE, &n, NULL);
  calls++;
  if (!p) {
    fprintf(stderr, "backend_bench: allocation of %u granules failed\n", n);
    exit(1);
  }
  if (touch)
    for (uint32_t i = 0; i < n; i++) p[(size_t)i * JW_GRANULE] = 1;
  s->p[s->count] = p;
  s->n[s->count++] = n;
  s->granules += n;
}

static void ls_free(live_set *s, uint32_t i) {
  if (!s->count) return;
  i %= s->count;
  jw_pages_free(s->p[i]);
  calls++;
  s->granules -= s->n[i];
  s->p[i] = s->p[--s->count];
  s->n[i] = s->n[s->count];
}

static void ls_init(live_set *s, uint32_t cap) {
  s->p = calloc(cap, sizeof *s->p);
  s->n = calloc(cap, sizeof *s->n);
  s->cap = cap;
  s->count = 0;
  s->granules = 0;
}

static void ls_drain(live_set *s) {
  while (s->count) ls_free(s, s->count - 1);
  free(s->p);
  free(s->n);
}

static int check(const char *pattern) {
  char err[300];
  if (jw_backend_check_all(err, sizeof err) != 0) {
    fprintf(stderr, "backend_bench: %s: backend check failed: %s\n", pattern, err);
    return 1;
  }
  return 0;
}

static jw_backend_stats stats(void) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  return s;
}

/* ---- reformatting -------------------------------------------------------- */

static int reformatting(uint64_t ops, uint32_t live_target, uint32_t phase_ops, uint64_t seed) {
  tb_rng r = {seed};
  live_set s;
  ls_init(&s, 1 << 20);
  /* Dominant classes: 16 KiB .. 1 MiB ranges (class indices 3..27). */
  unsigned dom = 3 + tb_below(&r, 25);
  while (s.granules < live_target) ls_alloc(&s, jw_class_granules[dom]);
  jw_backend_stats a = stats();
  uint64_t c0 = calls;
  double t0 = test_now_s();
  for (uint64_t i = 0; i < ops; i++) {
    if (i % phase_ops == 0) dom = 3 + tb_below(&r, 25);
    if (s.granules >= live_target) {
      ls_free(&s, (uint32_t)tb_next(&r));
    } else {
      uint32_t n = tb_below(&r, 5) ? jw_class_granules[dom] : 1 + tb_below(&r, 64);
      ls_alloc(&s, n);
    }
  }
  double t1 = test_now_s();
  jw_backend_stats b = stats();
  double n = (double)(calls - c0);
  double ns = (t1 - t0) * 1e9 / n;
  printf("reformatting: %" PRIu64 " operations, live %.1f MiB constant, dominant class changes every %u ops "
         "(%.2f ms)\n",
         (uint64_t)n, (double)live_target * JW_GRANULE / 1048576.0, phase_ops, ns * phase_ops / 1e6);
  printf("  splits/op %.3f   merges/op %.3f   %.0f ns/op   mapped/live %.2f   roots peak %" PRIu64 "\n",
         (double)(b.pages.splits - a.pages.splits) / n, (double)(b.pages.merges - a.pages.merges) / n, ns,
         (double)b.pages.mapped_bytes / (double)(s.granules * JW_GRANULE), b.peak_roots);
  printf("RESULT reformatting ops=%" PRIu64 " splits_per_op=%.4f merges_per_op=%.4f ns_per_op=%.1f "
         "mapped_over_live=%.3f calls_total=%" PRIu64 "\n",
         (uint64_t)n, (double)(b.pages.splits - a.pages.splits) / n, (double)(b.pages.merges - a.pages.merges) / n,
         ns, (double)b.pages.mapped_bytes / (double)(s.granules * JW_GRANULE), calls);
  ls_drain(&s);
  return check("reformatting");
}

/* ---- peak-trough --------------------------------------------------------- */

static uint32_t mixed_size(tb_rng *r) {
  uint32_t x = tb_below(r, 10);
  unsigned c = x < 5 ? tb_below(r, 8) : x < 8 ? 8 + tb_below(r, 12) : 20 + tb_below(r, 8);
  return jw_class_granules[c]; /* 4 KiB .. 1 MiB, mostly small */
}

/* Keeps the live set near `target` for `ops` operations of churn. */
static void churn(live_set *s, tb_rng *r, uint64_t target, uint64_t ops) {
  for (uint64_t i = 0; i < ops; i++) {
    if (s->granules < target)
      ls_alloc(s, mixed_size(r));
    else
      ls_free(s, (uint32_t)tb_next(r));
  }
}

static void report_row(const char *when, jw_backend_stats st, const jw_backend_stats *base) {
  double mib = 1048576.0;
  printf("  %-26s live %7.1f  mapped %7.1f  metadata %6.3f  cached %6.1f  released %6.1f  RSS %7.1f MiB",
         when, st.pages.live_bytes / mib, st.pages.mapped_bytes / mib, st.pages.metadata_bytes / mib,
         st.pages.cached_bytes / mib, st.released_bytes / mib, jw_os_resident_bytes() / mib);
  if (base)
    printf("   x%.2f mapped, x%.2f metadata vs steady", (double)st.pages.mapped_bytes / base->pages.mapped_bytes,
           (double)st.pages.metadata_bytes / base->pages.metadata_bytes);
  printf("\n");
  printf("RESULT peak-trough when=%s live=%" PRIu64 " mapped=%" PRIu64 " metadata=%" PRIu64 " records=%" PRIu64
         " cached=%" PRIu64 " released=%" PRIu64 " rss=%" PRIu64 "\n",
         when, st.pages.live_bytes, st.pages.mapped_bytes, st.pages.metadata_bytes, st.record_bytes,
         st.pages.cached_bytes, st.released_bytes, jw_os_resident_bytes());
}

static int peak_trough(uint32_t steady, uint64_t churn_ops, uint64_t seed) {
  tb_rng r = {seed};
  live_set s;
  ls_init(&s, 1 << 20);
  touch = 1;
  printf("peak-trough: steady %.1f MiB live, burst to 5x, back; %" PRIu64 " churn ops per stage\n",
         (double)steady * JW_GRANULE / 1048576.0, churn_ops);
  churn(&s, &r, steady, churn_ops);
  jw_backend_stats st = stats();
  report_row("steady", st, NULL);
  churn(&s, &r, 5ull * steady, churn_ops + 5ull * steady);
  report_row("peak", stats(), &st);
  /* The trough: the live set falls back, with churn all the way. */
  for (uint64_t target = 5ull * steady; target > steady; target -= steady / 8) churn(&s, &r, target, churn_ops / 8);
  churn(&s, &r, steady, churn_ops);
  report_row("after trough", stats(), &st);
  jw_backend_reclaim_step();
  jw_backend_reclaim_step();
  report_row("after trough + 2 reclaims", stats(), &st);
  ls_drain(&s);
  return check("peak-trough");
}

int main(int argc, char **argv) {
  const char *which = "all";
  int quick = 0;
  uint64_t ops = 0, seed = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--quick"))
      quick = 1;
    else if (!strcmp(argv[i], "--ops") && i + 1 < argc)
      ops = strtoull(argv[++i], NULL, 10);
    else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
      seed = strtoull(argv[++i], NULL, 10);
    else if (argv[i][0] != '-')
      which = argv[i];
    else {
      fprintf(stderr, "usage: backend_bench [reformatting|peak-trough|all] [--quick] [--ops N] [--seed S]\n");
      return 2;
    }
  }
  int rc = 0;
  if (!strcmp(which, "all") || !strcmp(which, "reformatting"))
    rc |= reformatting(ops ? ops : quick ? 20000 : 2000000, quick ? 2048 : 16384, 30000, seed);
  if (!strcmp(which, "all") || !strcmp(which, "peak-trough"))
    rc |= peak_trough(quick ? 1024 : 8192, ops ? ops : quick ? 5000 : 400000, seed);
  return rc;
}
