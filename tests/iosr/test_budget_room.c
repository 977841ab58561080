/* Room for the foreground app (design note section 9, "Memory budget"): an
 * app that comes back to the foreground is expected to need again the pages
 * it held when it last left it, so the budget reclaims that much from the
 * background apps at the switch, before its faults ask for room; never from
 * the foreground app itself, and never below what the budget needs anyway.
 * Every page comes back as written. */
#include "util.h"

#define MB (1u << 20)

static iosr_app_stats st(iosr_ctl *ctl, const char *app) {
  iosr_app_stats s;
  CHECK(iosr_ctl_app_stats(ctl, app, &s) == 0);
  return s;
}

int main(void) {
  iosr_test_require();
  char swap[256];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  /* budget 12 MiB (3072 pages), low watermark 8 MiB (2048), reclaim from 10 MiB (2560) */
  iosr_engine *eng = iosr_engine_start(swap, "budget=12M,budget_low=8M");
  CHECK(eng);
  iosr_connect_opts of = {.app_name = "front", .engine = eng}, oa = {.app_name = "a", .engine = eng},
                    ob = {.app_name = "b", .engine = eng};
  iosr_ctx *f = iosr_connect(&of), *a = iosr_connect(&oa), *b = iosr_connect(&ob);
  iosr_ctl *ctl = iosr_ctl_open_engine(eng);
  CHECK(f && a && b && ctl);
  iosr_region *rf = iosr_region_create(f, 6 * MB), *ra = iosr_region_create(a, 4 * MB), *rb = iosr_region_create(b, 4 * MB);
  CHECK(rf && ra && rb);
  uint8_t *pf = iosr_region_base(rf), *pa = iosr_region_base(ra), *pb = iosr_region_base(rb);
  /* "front" holds 1536 pages when it leaves the foreground, then is
   * reclaimed whole (as a phone reclaims a background app) */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  for (uint64_t i = 0; i < 1536; i++) iosr_fill(pf + i * 4096, 41, i, 0);
  CHECK(iosr_ctl_foreground(ctl, "a") == 0);
  CHECK(iosr_ctl_reclaim(ctl, "front", 0, NULL) == 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  CHECKF(st(ctl, "front").resident_pages == 0, "front still resident after its reclaim");
  for (uint64_t i = 0; i < 1024; i++) iosr_fill(pa + i * 4096, 42, i, 0);
  CHECK(iosr_ctl_foreground(ctl, "b") == 0);
  for (uint64_t i = 0; i < 1024; i++) iosr_fill(pb + i * 4096, 43, i, 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  /* 2048 pages charged: below the point where the budget reclaims */
  uint64_t bg0 = st(ctl, "a").resident_pages + st(ctl, "b").resident_pages;
  CHECKF(bg0 == 2048, "a and b hold %llu pages before the switch, not 2048", (unsigned long long)bg0);

  /* the switch: 2048 + 1536 expected pass the 2560 where reclaim starts,
   * so 1536 pages of a and b go now, before front touches anything */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats sf = st(ctl, "front"), sa = st(ctl, "a"), sb = st(ctl, "b");
  uint64_t bg1 = sa.resident_pages + sb.resident_pages;
  printf("budget_room: at the switch to front (1536 pages when it left the foreground) a and b went from %llu to %llu "
         "resident pages (a %llu, b %llu swapped); front %llu resident\n",
         (unsigned long long)bg0, (unsigned long long)bg1, (unsigned long long)sa.swapped_pages,
         (unsigned long long)sb.swapped_pages, (unsigned long long)sf.resident_pages);
  CHECKF(sf.resident_pages == 0, "front resident %llu pages before touching any", (unsigned long long)sf.resident_pages);
  CHECKF(bg1 + 1536 <= 2048, "only %llu of the 1536 pages front will need were made room for (a and b hold %llu)",
         (unsigned long long)(bg0 - bg1), (unsigned long long)bg1);
  CHECKF(sa.swapped_pages >= sb.swapped_pages, "b (background since later) lost more than a: %llu > %llu",
         (unsigned long long)sb.swapped_pages, (unsigned long long)sa.swapped_pages);
  for (uint64_t i = 0; i < 1536; i++) CHECKF(iosr_check(pf + i * 4096, 41, i, 0), "front: page %llu", (unsigned long long)i);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t total = st(ctl, "front").resident_pages + st(ctl, "a").resident_pages + st(ctl, "b").resident_pages;
  CHECKF(total <= 3072, "resident %llu pages above the 12 MiB budget", (unsigned long long)total);
  for (uint64_t i = 0; i < 1024; i++) CHECKF(iosr_check(pa + i * 4096, 42, i, 0), "a: page %llu", (unsigned long long)i);
  for (uint64_t i = 0; i < 1024; i++) CHECKF(iosr_check(pb + i * 4096, 43, i, 0), "b: page %llu", (unsigned long long)i);
  CHECK(iosr_disconnect(f) == 0 && iosr_disconnect(a) == 0 && iosr_disconnect(b) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  return 0;
}
