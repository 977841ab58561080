/* A page's slot number is valid only while the page owns the slot (issue 22):
 * a page that came back in and is being written out again must not free the
 * slot it had before, which another app may own by now.
 *
 *   full-area SLOT  app A's pages, swapped in, are reclaimed into a full swap
 *                   area: they stay resident (ENOSPC) and app B's slots stay
 *                   B's (another app's swap-out cannot take them); then A
 *                   and a third app C together (the reclaim job ends inside
 *                   its swap-out step: built with AddressSanitizer too)
 *   prot-none       the same through the "page cannot be read" path: A made
 *                   its region PROT_NONE
 *
 * Both check the slot accounting (slots used == pages swapped + clean pages,
 * design note section 3) and every byte
 * of every app. In-process engine. */
#include "util.h"

static uint64_t slots_used(iosr_ctl *ctl) { return iosr_test_stat(ctl, "\"used\":"); }

typedef struct app {
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p;
  uint64_t n, seed;
  const char *name;
} app;

static void app_open(app *a, iosr_engine *eng, const char *name, uint64_t n, uint64_t seed) {
  iosr_connect_opts o = {.app_name = name, .engine = eng};
  a->ctx = iosr_connect(&o);
  CHECK(a->ctx);
  a->r = iosr_region_create(a->ctx, n * 4096);
  CHECK(a->r);
  a->p = iosr_region_base(a->r);
  a->n = n;
  a->seed = seed;
  a->name = name;
  for (uint64_t i = 0; i < n; i++) iosr_fill(a->p + i * 4096, seed, i, 0);
}

static void app_verify(const app *a, const char *when) {
  for (uint64_t i = 0; i < a->n; i++)
    CHECK(iosr_check(a->p + i * 4096, a->seed, i, 0), "%s: app %s page %llu holds other bytes", when, a->name,
          (unsigned long long)i);
}

/* Pages holding a slot: on the swap area only, or clean (read back, not
 * written since). */
static uint64_t swapped(iosr_ctl *ctl, const char *name) {
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, name, &st) == 0);
  return st.swapped_pages + st.clean_pages;
}

static void accounting(iosr_ctl *ctl, const app *apps, int n, const char *when) {
  uint64_t sw = 0;
  for (int i = 0; i < n; i++) sw += swapped(ctl, apps[i].name);
  uint64_t used = slots_used(ctl);
  CHECK(used == sw, "%s: %llu slots used for %llu swapped pages", when, (unsigned long long)used,
        (unsigned long long)sw);
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "full-area") && strcmp(argv[1], "prot-none"))) {
    fprintf(stderr, "usage: test_stale_slot full-area [global|process] | prot-none\n");
    return 2;
  }
  iosr_test_require();
  int full = !strcmp(argv[1], "full-area");
  const char *slot = argc > 2 ? argv[2] : "global";
  uint64_t nslots = full ? 512 : 1024, na = full ? 256 : 512, nb = nslots;
  char swap[256], set[128];
  iosr_test_swap(swap, sizeof swap, (nslots + 1) * 4096);
  /* a swap-out step may take 512 pages: A's and C's in one step */
  snprintf(set, sizeof set, "slot=%s,reclaim_batch=512,max_io=2M", slot);
  iosr_engine *eng = iosr_engine_start(swap, set);
  CHECK(eng);
  iosr_ctl *ctl = iosr_ctl_open_engine(eng);
  CHECK(ctl);
  app apps[3];
  uint64_t got;
  /* A's pages go out, come back and are written (the same bytes): the
   * slots they had are free again */
  app_open(&apps[0], eng, "A", na, 71);
  CHECK(iosr_ctl_reclaim(ctl, "A", 0, &got) == 0 && got == na * 4096);
  app_verify(&apps[0], "A swapped in");
  for (uint64_t i = 0; i < na; i++) iosr_fill(apps[0].p + i * 4096, apps[0].seed, i, 0);
  CHECK(slots_used(ctl) == 0);
  /* B fills the whole area, A's old slots included */
  app_open(&apps[1], eng, "B", nb, 72);
  CHECK(iosr_ctl_reclaim(ctl, "B", 0, &got) == 0 && got == nb * 4096);
  accounting(ctl, apps, 2, "B swapped out");
  if (full) {
    errno = 0;
    CHECK(iosr_ctl_reclaim(ctl, "A", 0, &got) == -1 && errno == ENOSPC, "reclaim into a full area: errno %d",
          errno);
  } else {
    CHECK(mprotect(apps[0].p, na * 4096, PROT_NONE) == 0);
    errno = 0;
    CHECK(iosr_ctl_reclaim(ctl, "A", 0, &got) == -1 && got == 0, "reclaim of PROT_NONE pages: %llu bytes",
          (unsigned long long)got);
    CHECK(mprotect(apps[0].p, na * 4096, PROT_READ | PROT_WRITE) == 0);
  }
  accounting(ctl, apps, 2, full ? "A's reclaim refused (area full)" : "A's PROT_NONE reclaim");
  /* a third app's swap-out can only find the area full: B's slots are B's */
  app_open(&apps[2], eng, "C", na, 73);
  errno = 0;
  CHECK(iosr_ctl_reclaim(ctl, "C", 0, &got) == -1 && errno == ENOSPC && got == 0, "reclaim of C: errno %d, %llu bytes",
        errno, (unsigned long long)got);
  accounting(ctl, apps, 3, "C's reclaim");
  if (full) {
    /* A and C reclaimed together: one swap-out step makes a batch of each,
     * and neither gets a slot; the job ends inside the step */
    errno = 0;
    CHECK(iosr_ctl_reclaim(ctl, "--background", 0, &got) == -1 && errno == ENOSPC && got == 0,
          "background reclaim into the full area: errno %d, %llu bytes", errno, (unsigned long long)got);
    accounting(ctl, apps, 3, "A and C reclaimed together");
  }
  for (int i = 0; i < 3; i++) app_verify(&apps[i], "end");
  accounting(ctl, apps, 3, "end");
  for (int i = 0; i < 3; i++) CHECK(iosr_disconnect(apps[i].ctx) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  printf("stale slot (%s, %s): A's pages stayed resident, B's %llu slots stayed B's, every byte intact\n", argv[1], slot,
         (unsigned long long)nb);
  return 0;
}
