/* Reclaim by itself (issue 5, "Reclaim"): when the resident pages of all
 * regions pass the budget, background apps are reclaimed first, least
 * recently used pages first, down to the low watermark; the foreground app is
 * left alone while background pages remain. */
#include "util.h"

#define MB (1u << 20)

int main(void) {
  iosr_test_require();
  char swap[256];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  /* budget 12 MiB, low watermark 8 MiB */
  iosr_engine *eng = iosr_engine_start(swap, "budget=12M,budget_low=8M");
  CHECK(eng);
  iosr_connect_opts oa = {.app_name = "old", .engine = eng}, ob = {.app_name = "recent", .engine = eng},
                    of = {.app_name = "front", .engine = eng};
  iosr_ctx *a = iosr_connect(&oa), *b = iosr_connect(&ob), *f = iosr_connect(&of);
  iosr_ctl *ctl = iosr_ctl_open_engine(eng);
  CHECK(a && b && f && ctl);
  iosr_region *ra = iosr_region_create(a, 4 * MB), *rb = iosr_region_create(b, 4 * MB), *rf = iosr_region_create(f, 6 * MB);
  CHECK(ra && rb && rf);
  uint8_t *pa = iosr_region_base(ra), *pb = iosr_region_base(rb), *pf = iosr_region_base(rf);
  /* "old" runs first, then "recent", each in the foreground in turn */
  CHECK(iosr_ctl_foreground(ctl, "old") == 0);
  for (uint64_t i = 0; i < 1024; i++) iosr_fill(pa + i * 4096, 31, i, 0);
  CHECK(iosr_ctl_foreground(ctl, "recent") == 0);
  for (uint64_t i = 0; i < 1024; i++) iosr_fill(pb + i * 4096, 32, i, 0);
  /* then "front": 4 + 4 + 6 = 14 MiB > 12 MiB */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  for (uint64_t i = 0; i < 1536; i++) iosr_fill(pf + i * 4096, 33, i, 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats so, sr, sf;
  CHECK(iosr_ctl_app_stats(ctl, "old", &so) == 0 && iosr_ctl_app_stats(ctl, "recent", &sr) == 0 &&
        iosr_ctl_app_stats(ctl, "front", &sf) == 0);
  uint64_t resident = so.resident_pages + sr.resident_pages + sf.resident_pages;
  printf("budget: resident %llu pages (old %llu, recent %llu, front %llu); swapped old %llu recent %llu front %llu\n",
         (unsigned long long)resident, (unsigned long long)so.resident_pages, (unsigned long long)sr.resident_pages,
         (unsigned long long)sf.resident_pages, (unsigned long long)so.swapped_pages,
         (unsigned long long)sr.swapped_pages, (unsigned long long)sf.swapped_pages);
  CHECKF(resident <= 3 * 1024, "resident %llu pages above the 12 MiB budget", (unsigned long long)resident);
  CHECKF(sf.swapped_pages == 0, "the foreground app was reclaimed while background pages remained");
  /* least recently used first: "old" goes before "recent" */
  CHECKF(so.swapped_pages >= sr.swapped_pages && so.swapped_pages > 0, "old %llu recent %llu",
         (unsigned long long)so.swapped_pages, (unsigned long long)sr.swapped_pages);
  for (uint64_t i = 0; i < 1024; i++) CHECK(iosr_check(pa + i * 4096, 31, i, 0));
  for (uint64_t i = 0; i < 1024; i++) CHECK(iosr_check(pb + i * 4096, 32, i, 0));
  for (uint64_t i = 0; i < 1536; i++) CHECK(iosr_check(pf + i * 4096, 33, i, 0));
  CHECK(iosr_disconnect(a) == 0 && iosr_disconnect(b) == 0 && iosr_disconnect(f) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  return 0;
}
