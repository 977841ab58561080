/* Read-ahead window per region (issue 24; design note section 6, adaptive):
 * one app, two regions swapped out, touched interleaved, one page of each in
 * turn: region A in address order, region B at random (a quarter of its pages,
 * each once). With the argument "zones", A and B are two 16 MiB zones of one
 * region (IOSR_RA_ZONE=16M) instead. A's window must grow past its first size, B's must shrink to
 * the minimum, 1 page, so that once it has, B reads no more than it needs
 * (read pages / faulting pages in the second half of B's touches <= 1.1).
 * An app-wide window cannot do both: A's hits would widen B's reads. Counts
 * pages, never times. */
#include "util.h"
#include "readahead/window.h"

#define NA 1024u  /* region A: pages, touched in order */
#define NB 4096u  /* region B: pages, NB / 4 of them touched at random */
#define RA_INIT 16u

typedef struct rstat {
  unsigned window;
  uint64_t hits, misses, read, needed;
} rstat;

static uint64_t num_after(const char *p, const char *key, const char *end) {
  const char *q = strstr(p, key);
  CHECK(q && q < end, "%s missing in a region's statistics", key);
  return strtoull(q + strlen(key), NULL, 10);
}

/* The read-ahead state of the app's regions, in the order of their first
 * fault (A faults first), from `iosr stat --json`. Returns how many. */
static unsigned regions(iosr_ctl *ctl, rstat *out, unsigned cap) {
  char *js = iosr_ctl_stat_json(ctl);
  CHECK(js);
  const char *p = strstr(js, "\"regions\":[");
  CHECK(p, "no per-region read-ahead statistics: %.200s", js);
  unsigned n = 0;
  for (p = strchr(p, '[') + 1; *p == '{' && n < cap; n++) {
    const char *end = strchr(p, '}');
    CHECK(end);
    out[n].window = (unsigned)num_after(p, "\"window\":", end);
    out[n].hits = num_after(p, "\"hits\":", end);
    out[n].misses = num_after(p, "\"misses\":", end);
    out[n].read = num_after(p, "\"read_pages\":", end);
    out[n].needed = num_after(p, "\"needed_pages\":", end);
    p = end + 1;
    if (*p == ',') p++;
  }
  free(js);
  return n;
}

/* The window rule itself (pure): grow at >= 75% of the probes used, shrink
 * when under 50% can still be, decided as soon as the outcome is certain. */
static void check_verdicts(void) {
  CHECK(iosr_ra_rate_verdict(2, 2, 0, 75, 50) == +1);
  CHECK(iosr_ra_rate_verdict(2, 1, 0, 75, 50) == 2); /* the other probe decides */
  CHECK(iosr_ra_rate_verdict(2, 1, 1, 75, 50) == 0);
  CHECK(iosr_ra_rate_verdict(2, 0, 2, 75, 50) == -1);
  CHECK(iosr_ra_rate_verdict(8, 6, 0, 75, 50) == +1); /* 2 pending cannot undo it */
  CHECK(iosr_ra_rate_verdict(8, 1, 4, 75, 50) == 2);
  CHECK(iosr_ra_rate_verdict(8, 1, 5, 75, 50) == -1); /* at most 3 of 8 can still hit */
  CHECK(iosr_ra_rate_verdict(1, 0, 1, 75, 50) == -1);
  CHECK(iosr_ra_rate_verdict(0, 0, 0, 75, 50) == 0);
}

#define ZONE (16u << 20)

int main(int argc, char **argv) {
  check_verdicts();
  iosr_test_require();
  int zones = argc > 1 && !strcmp(argv[1], "zones");
  iosr_test_env t;
  iosr_test_inproc(&t, 64u << 20,
                   zones ? "sched=fifo,readahead=adaptive,slot=process,ra_init=16,ra_zone=16M"
                         : "sched=fifo,readahead=adaptive,slot=process,ra_init=16,ra_zone=0",
                   "rar");
  iosr_region *ra, *rb;
  uint8_t *a, *b;
  if (zones) {
    /* one region, A at the start of its first zone, B at the start of its second */
    ra = iosr_region_create_aligned(t.ctx, 2 * ZONE, ZONE);
    rb = NULL;
    CHECK(ra);
    a = iosr_region_base(ra);
    b = a + ZONE;
  } else {
    ra = iosr_region_create(t.ctx, NA * 4096);
    rb = iosr_region_create(t.ctx, NB * 4096);
    CHECK(ra && rb);
    a = iosr_region_base(ra);
    b = iosr_region_base(rb);
  }
  for (uint64_t i = 0; i < NA; i++) iosr_fill(a + i * 4096, 1, i, 0);
  for (uint64_t i = 0; i < NB; i++) iosr_fill(b + i * 4096, 2, i, 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(t.ctl, "rar", 0, &got) == 0);
  CHECK(got == (NA + NB) * 4096ull, "reclaimed %llu", (unsigned long long)got);

  /* B's pages in a fixed random order: a full-period LCG over NB, first NB/4 */
  uint32_t order[NB / 4], x = 12345;
  for (unsigned i = 0; i < NB / 4; i++) {
    x = (x * 1103515245u + 12345u) % NB; /* full period: NB a power of two, c odd, a % 4 == 1 */
    order[i] = x;
  }
  rstat half[2], end[2];
  for (unsigned i = 0; i < NB / 4; i++) {
    if (i == NB / 8) {
      CHECK(iosr_ctl_wait_idle(t.ctl) == 0);
      CHECK(regions(t.ctl, half, 2) == 2);
    }
    CHECK(iosr_check(a + (uint64_t)i * 4096, 1, i, 0), "A page %u", i);
    CHECK(iosr_check(b + (uint64_t)order[i] * 4096, 2, order[i], 0), "B page %u", order[i]);
  }
  CHECK(iosr_ctl_wait_idle(t.ctl) == 0);
  CHECK(regions(t.ctl, end, 2) == 2);
  for (int k = 0; k < 2; k++)
    printf("region %c: window %u  hits %llu misses %llu  read %llu needed %llu (%.2f read per needed)\n", "AB"[k],
           end[k].window, (unsigned long long)end[k].hits, (unsigned long long)end[k].misses,
           (unsigned long long)end[k].read, (unsigned long long)end[k].needed,
           (double)end[k].read / (double)(end[k].needed ? end[k].needed : 1));
  uint64_t rd = end[1].read - half[1].read, nd = end[1].needed - half[1].needed;
  printf("region B, second half: read %llu pages for %llu needed\n", (unsigned long long)rd, (unsigned long long)nd);

  /* A, in address order: its probes hit, its window grew */
  CHECK(end[0].window > RA_INIT, "A's window %u did not grow past %u", end[0].window, RA_INIT);
  CHECK(end[0].hits > 0 && end[0].misses * 10 <= end[0].hits, "A: hits %llu misses %llu",
        (unsigned long long)end[0].hits, (unsigned long long)end[0].misses);
  /* B, at random: its window is at the minimum, and it reads what it needs */
  CHECK(end[1].window == 1, "B's window is %u, not 1", end[1].window);
  CHECK(nd > 0 && rd * 10 <= nd * 11, "B read %llu pages for %llu needed in its second half",
        (unsigned long long)rd, (unsigned long long)nd);

  CHECK(iosr_region_destroy(ra) == 0);
  CHECK(!rb || iosr_region_destroy(rb) == 0);
  iosr_test_inproc_end(&t);
  iosr_test_cleanup();
  printf("readahead_regions%s: ok\n", zones ? " (zones)" : "");
  return 0;
}
