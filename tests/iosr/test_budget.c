/* Reclaim by itself (design note section 9, "Memory budget").
 *
 *   test_budget lru|room
 *
 * lru: when the resident pages of all regions pass the budget, background
 * apps are reclaimed first, least recently used pages first, down to the low
 * watermark; the foreground app is left alone while background pages remain.
 * room: an app that comes back to the foreground is expected to need again
 * the pages it held when it last left it, so the budget reclaims that much
 * from the background apps at the switch, before its faults ask for room;
 * never from the foreground app itself. Every page comes back as written. */
#include "util.h"

#define MB (1u << 20)

static iosr_engine *eng;
static iosr_ctl *ctl;
static iosr_ctx *ctx[3];
static uint8_t *base[3];

/* An engine with budget 12 MiB (3072 pages), low watermark 8 MiB (2048;
 * reclaim starts at 2560), and three apps with one region each. */
static void start(const char *const names[3], const uint64_t mib[3]) {
  static char swap[256];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  eng = iosr_engine_start(swap, "budget=12M,budget_low=8M");
  CHECK(eng);
  for (int i = 0; i < 3; i++) {
    iosr_connect_opts o = {.app_name = names[i], .engine = eng};
    CHECK((ctx[i] = iosr_connect(&o)) != NULL);
    iosr_region *r = iosr_region_create(ctx[i], mib[i] * MB);
    CHECK(r);
    base[i] = iosr_region_base(r);
  }
  CHECK((ctl = iosr_ctl_open_engine(eng)) != NULL);
}

static void stop(void) {
  for (int i = 0; i < 3; i++) CHECK(iosr_disconnect(ctx[i]) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
}

static iosr_app_stats st(const char *app) {
  iosr_app_stats s;
  CHECK(iosr_ctl_app_stats(ctl, app, &s) == 0);
  return s;
}

static void fill(int i, uint64_t pages, uint64_t seed) {
  for (uint64_t k = 0; k < pages; k++) iosr_fill(base[i] + k * 4096, seed, k, 0);
}

static void check(int i, uint64_t pages, uint64_t seed) {
  for (uint64_t k = 0; k < pages; k++) CHECKF(iosr_check(base[i] + k * 4096, seed, k, 0), "app %d: page %llu", i, (unsigned long long)k);
}

static void lru(void) {
  start((const char *const[]){"old", "recent", "front"}, (const uint64_t[]){4, 4, 6});
  /* "old" runs first, then "recent", each in the foreground in turn */
  CHECK(iosr_ctl_foreground(ctl, "old") == 0);
  fill(0, 1024, 31);
  CHECK(iosr_ctl_foreground(ctl, "recent") == 0);
  fill(1, 1024, 32);
  /* then "front": 4 + 4 + 6 = 14 MiB > 12 MiB */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  fill(2, 1536, 33);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats so = st("old"), sr = st("recent"), sf = st("front");
  uint64_t resident = so.resident_pages + sr.resident_pages + sf.resident_pages;
  printf("budget lru: resident %llu pages (old %llu, recent %llu, front %llu); swapped old %llu recent %llu front %llu\n",
         (unsigned long long)resident, (unsigned long long)so.resident_pages, (unsigned long long)sr.resident_pages,
         (unsigned long long)sf.resident_pages, (unsigned long long)so.swapped_pages,
         (unsigned long long)sr.swapped_pages, (unsigned long long)sf.swapped_pages);
  CHECKF(resident <= 3 * 1024, "resident %llu pages above the 12 MiB budget", (unsigned long long)resident);
  CHECKF(sf.swapped_pages == 0, "the foreground app was reclaimed while background pages remained");
  /* least recently used first: "old" goes before "recent" */
  CHECKF(so.swapped_pages >= sr.swapped_pages && so.swapped_pages > 0, "old %llu recent %llu",
         (unsigned long long)so.swapped_pages, (unsigned long long)sr.swapped_pages);
  check(0, 1024, 31);
  check(1, 1024, 32);
  check(2, 1536, 33);
  stop();
}

static void room(void) {
  start((const char *const[]){"front", "a", "b"}, (const uint64_t[]){6, 4, 4});
  /* "front" holds 1536 pages when it leaves the foreground, then is
   * reclaimed whole (as a phone reclaims a background app) */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  fill(0, 1536, 41);
  CHECK(iosr_ctl_foreground(ctl, "a") == 0);
  CHECK(iosr_ctl_reclaim(ctl, "front", 0, NULL) == 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  CHECKF(st("front").resident_pages == 0, "front still resident after its reclaim");
  fill(1, 1024, 42);
  CHECK(iosr_ctl_foreground(ctl, "b") == 0);
  fill(2, 1024, 43);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  /* 2048 pages charged: below the point where the budget reclaims */
  uint64_t bg0 = st("a").resident_pages + st("b").resident_pages;
  CHECKF(bg0 == 2048, "a and b hold %llu pages before the switch, not 2048", (unsigned long long)bg0);

  /* the switch: 2048 + 1536 expected pass the 2560 where reclaim starts,
   * so 1536 pages of a and b go now, before front touches anything */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats sf = st("front"), sa = st("a"), sb = st("b");
  uint64_t bg1 = sa.resident_pages + sb.resident_pages;
  printf("budget room: at the switch to front (1536 pages when it left the foreground) a and b went from %llu to %llu "
         "resident pages (a %llu, b %llu swapped); front %llu resident\n",
         (unsigned long long)bg0, (unsigned long long)bg1, (unsigned long long)sa.swapped_pages,
         (unsigned long long)sb.swapped_pages, (unsigned long long)sf.resident_pages);
  CHECKF(sf.resident_pages == 0, "front resident %llu pages before touching any", (unsigned long long)sf.resident_pages);
  CHECKF(bg1 + 1536 <= 2048, "only %llu of the 1536 pages front will need were made room for (a and b hold %llu)",
         (unsigned long long)(bg0 - bg1), (unsigned long long)bg1);
  CHECKF(sa.swapped_pages >= sb.swapped_pages, "b (background since later) lost more than a: %llu > %llu",
         (unsigned long long)sb.swapped_pages, (unsigned long long)sa.swapped_pages);
  check(0, 1536, 41);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t total = st("front").resident_pages + st("a").resident_pages + st("b").resident_pages;
  CHECKF(total <= 3072, "resident %llu pages above the 12 MiB budget", (unsigned long long)total);
  check(1, 1024, 42);
  check(2, 1024, 43);
  stop();
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "lru") && strcmp(argv[1], "room"))) {
    fprintf(stderr, "usage: test_budget lru|room\n");
    return 2;
  }
  iosr_test_require();
  if (!strcmp(argv[1], "lru")) lru();
  else room();
  return 0;
}
