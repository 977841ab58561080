/* Reclaim by itself (design note section 9, "Memory budget").
 *
 *   test_budget lru|room|back|shrunk|big|gone|flip
 *
 * lru: when the resident pages of all regions pass the budget, background
 * apps are reclaimed first, least recently used pages first, down to the low
 * watermark; the foreground app is left alone while background pages remain.
 * room: an app that comes back to the foreground is expected to need again
 * the pages it held when it last left it, so once it brings back a first
 * page the budget reclaims that much from the background apps, before its
 * faults ask for room; never from the foreground app itself, and nothing
 * while it has touched nothing.
 * back: a switch to an app and straight back evicts nothing of the app that
 * is in the foreground again.
 * shrunk: an app that freed its pages in the background expects nothing.
 * big: an app that held more than the whole budget takes all the background
 * and no more.
 * gone: the foreground app disconnecting right after its switch: the
 * budget job made for it ends, the others' data is intact.
 * flip: 400 switches among three apps (and to none) while a thread of each
 * reads its pages: no hang.
 * In every mode every page comes back as written, and the budget is passed
 * only by faults served past it when no budget job can run (the no-hang
 * rule, which counts them). */
#include "util.h"

#include <pthread.h>
#include <sys/mman.h>

#define MB (1u << 20)

static iosr_engine *eng;
static iosr_ctl *ctl;
static iosr_ctx *ctx[3];
static uint8_t *base[3];
static const char *const *names;

/* An engine with budget 12 MiB (3072 pages), low watermark 8 MiB (2048;
 * reclaim starts at 2560), and three apps with one region each. */
static void start(const char *const nm[3], const uint64_t mib[3]) {
  static char swap[256];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  eng = iosr_engine_start(swap, "budget=12M,budget_low=8M");
  CHECK(eng);
  names = nm;
  for (int i = 0; i < 3; i++) {
    iosr_connect_opts o = {.app_name = nm[i], .engine = eng};
    CHECK((ctx[i] = iosr_connect(&o)) != NULL);
    iosr_region *r = iosr_region_create(ctx[i], mib[i] * MB);
    CHECK(r);
    base[i] = iosr_region_base(r);
  }
  CHECK((ctl = iosr_ctl_open_engine(eng)) != NULL);
}

static void stop(void) {
  /* passed only where the design allows it: a fault served past the budget
   * when no budget job could run (its back-off after one that freed
   * nothing; design note section 9, "No hang"), which counts it */
  uint64_t over = iosr_test_stat(ctl, "\"over_peak_pages\":"), overrun = iosr_test_stat(ctl, "\"overrun_pages\":");
  CHECK(over == 0 || overrun > 0, "the budget was passed by %llu pages, none served past it by the no-hang rule",
        (unsigned long long)over);
  if (over) printf("budget: passed by %llu pages, %llu served past it (no budget job could run)\n", (unsigned long long)over,
                   (unsigned long long)overrun);
  for (int i = 0; i < 3; i++)
    if (ctx[i]) CHECK(iosr_disconnect(ctx[i]) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
}

static iosr_app_stats st(const char *app) {
  iosr_app_stats s;
  CHECK(iosr_ctl_app_stats(ctl, app, &s) == 0);
  return s;
}

static uint64_t swapped(int i) { return st(names[i]).swapped_pages; }

static void fg(int i) { CHECK(iosr_ctl_foreground(ctl, i < 0 ? "" : names[i]) == 0); }

static void fill(int i, uint64_t pages, uint64_t seed) {
  for (uint64_t k = 0; k < pages; k++) iosr_fill(base[i] + k * 4096, seed, k, 0);
}

static void check(int i, uint64_t pages, uint64_t seed) {
  for (uint64_t k = 0; k < pages; k++) CHECK(iosr_check(base[i] + k * 4096, seed, k, 0), "app %d: page %llu", i, (unsigned long long)k);
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
  CHECK(resident <= 3 * 1024, "resident %llu pages above the 12 MiB budget", (unsigned long long)resident);
  CHECK(sf.swapped_pages == 0, "the foreground app was reclaimed while background pages remained");
  /* least recently used first: "old" goes before "recent" */
  CHECK(so.swapped_pages >= sr.swapped_pages && so.swapped_pages > 0, "old %llu recent %llu",
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
  CHECK(st("front").resident_pages == 0, "front still resident after its reclaim");
  fill(1, 1024, 42);
  CHECK(iosr_ctl_foreground(ctl, "b") == 0);
  fill(2, 1024, 43);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  /* 2048 pages charged: below the point where the budget reclaims */
  uint64_t bg0 = st("a").resident_pages + st("b").resident_pages;
  CHECK(bg0 == 2048, "a and b hold %llu pages before the switch, not 2048", (unsigned long long)bg0);

  /* the switch and nothing touched: nothing expected yet */
  CHECK(iosr_ctl_foreground(ctl, "front") == 0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  CHECK(st("a").resident_pages + st("b").resident_pages == 2048, "a and b lost pages before front touched any");
  /* its first page: 2048 + 1536 expected pass the 2560 where reclaim
   * starts, so 1536 pages of a and b go now, before front touches more */
  CHECK(iosr_check(base[0], 41, 0, 0));
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats sf = st("front"), sa = st("a"), sb = st("b");
  uint64_t bg1 = sa.resident_pages + sb.resident_pages;
  printf("budget room: at the first fault of front after its switch (1536 pages when it left the foreground) a and b "
         "went from %llu to %llu resident pages (a %llu, b %llu swapped); front %llu resident\n",
         (unsigned long long)bg0, (unsigned long long)bg1, (unsigned long long)sa.swapped_pages,
         (unsigned long long)sb.swapped_pages, (unsigned long long)sf.resident_pages);
  CHECK(sf.resident_pages < 1536, "front resident %llu pages after touching one", (unsigned long long)sf.resident_pages);
  CHECK(bg1 + 1536 <= 2048, "only %llu of the 1536 pages front will need were made room for (a and b hold %llu)",
        (unsigned long long)(bg0 - bg1), (unsigned long long)bg1);
  CHECK(sa.swapped_pages >= sb.swapped_pages, "b (background since later) lost more than a: %llu > %llu",
        (unsigned long long)sb.swapped_pages, (unsigned long long)sa.swapped_pages);
  check(0, 1536, 41);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t total = st("front").resident_pages + st("a").resident_pages + st("b").resident_pages;
  CHECK(total <= 3072, "resident %llu pages above the 12 MiB budget", (unsigned long long)total);
  check(1, 1024, 42);
  check(2, 1024, 43);
  stop();
}

static const char *const abc[3] = {"A", "B", "C"};

/* Each app in turn in the foreground writes pages[i] pages (seed seed + i),
 * the budget reclaiming the others; then the engine goes idle. */
static void turns(const uint64_t pages[3], uint64_t seed) {
  for (int i = 0; i < 3; i++) {
    fg(i);
    fill(i, pages[i], seed + (uint64_t)i);
  }
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
}

static void back(void) {
  start(abc, (const uint64_t[]){12, 12, 12});
  /* B left the foreground with 1536 pages; A's growth took most of them */
  fg(1);
  fill(1, 1536, 2);
  fg(0);
  fill(0, 1800, 1);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t a0 = swapped(0);
  fg(1);
  fg(0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  printf("budget back: A, in the foreground again at once, lost %llu pages\n", (unsigned long long)(swapped(0) - a0));
  CHECK(swapped(0) == a0, "the foreground app A lost %llu pages to B's expected demand", (unsigned long long)(swapped(0) - a0));
  check(0, 1800, 1);
  check(1, 1536, 2);
  stop();
}

static void shrunk(void) {
  start(abc, (const uint64_t[]){12, 12, 12});
  fg(0);
  fill(0, 2000, 1);
  fg(1);
  CHECK(madvise(base[0], 2000 * 4096, MADV_DONTNEED) == 0); /* A frees what it held, in the background */
  fill(1, 1000, 2);
  fg(2);
  fill(2, 1000, 3);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t s0 = swapped(1) + swapped(2);
  fg(0);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  CHECK(*(volatile uint8_t *)base[0] == 0); /* a first fault: a zero page */
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  uint64_t s1 = swapped(1) + swapped(2);
  printf("budget shrunk: A freed its 2000 pages in the background; its switch evicted %llu pages of B and C\n",
         (unsigned long long)(s1 - s0));
  CHECK(s1 == s0, "A expected pages it no longer has: %llu pages of B and C evicted", (unsigned long long)(s1 - s0));
  check(1, 1000, 2);
  check(2, 1000, 3);
  stop();
}

static void big(void) {
  start(abc, (const uint64_t[]){24, 24, 24});
  turns((const uint64_t[]){3000, 2000, 2000}, 1); /* A near the whole budget: its own oldest pages go */
  fg(0);
  check(0, 3000, 1);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  check(1, 2000, 2);
  check(2, 2000, 3);
  stop();
}

static void gone(void) {
  start(abc, (const uint64_t[]){12, 12, 12});
  turns((const uint64_t[]){2000, 1500, 1000}, 1);
  fg(0);
  CHECK(iosr_check(base[0], 1, 0, 0)); /* its first page: the expected room starts */
  CHECK(iosr_disconnect(ctx[0]) == 0);
  ctx[0] = NULL;
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  printf("budget gone: with A gone B and C hold %llu pages\n",
         (unsigned long long)(st("B").resident_pages + st("C").resident_pages));
  check(1, 1500, 2);
  check(2, 1000, 3);
  stop();
}

static volatile int flipping;

static void *reader(void *arg) {
  int i = (int)(intptr_t)arg;
  for (uint64_t k = 0; flipping; k += 7) CHECK(iosr_check(base[i] + (k % 1500) * 4096, 10 + i, k % 1500, 0), "app %d", i);
  return NULL;
}

static void flip(void) {
  start(abc, (const uint64_t[]){8, 8, 8});
  turns((const uint64_t[]){1500, 1500, 1500}, 10);
  flipping = 1;
  pthread_t t[3];
  for (int i = 0; i < 3; i++) CHECK(pthread_create(&t[i], NULL, reader, (void *)(intptr_t)i) == 0);
  unsigned seed = 7;
  for (int s = 0; s < 400; s++) fg(s % 7 == 6 ? -1 : (int)(rand_r(&seed) % 3));
  flipping = 0;
  for (int i = 0; i < 3; i++) pthread_join(t[i], NULL);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  for (int i = 0; i < 3; i++) check(i, 1500, 10 + i);
  stop();
}

int main(int argc, char **argv) {
  static const struct {
    const char *name;
    void (*run)(void);
  } modes[] = {{"lru", lru}, {"room", room}, {"back", back}, {"shrunk", shrunk}, {"big", big}, {"gone", gone}, {"flip", flip}};
  for (size_t i = 0; argc == 2 && i < sizeof modes / sizeof modes[0]; i++)
    if (!strcmp(argv[1], modes[i].name)) {
      iosr_test_require();
      modes[i].run();
      return 0;
    }
  fprintf(stderr, "usage: test_budget lru|room|back|shrunk|big|gone|flip\n");
  return 2;
}
