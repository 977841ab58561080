/* Layout (issue 5, "Must be shown"): two apps whose pages were touched
 * alternately (as two apps running at the same time, so their pages
 * interleave in LRU order) are reclaimed together. `process` leaves each app's
 * slots in contiguous runs in address order (>= 95% of its pages); `global`
 * interleaves them. Reads the slot map. */
#include "util.h"

#define NPAGES 2048u

static int cmp_addr(const void *x, const void *y) {
  const iosr_slot_entry *a = x, *b = y;
  return a->addr < b->addr ? -1 : a->addr > b->addr;
}

typedef struct own {
  uint64_t slot;
  int app;
} own;
static int cmp_slot(const void *x, const void *y) {
  const own *a = x, *b = y;
  return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* fraction (per mille) of an app's pages whose slot follows the slot of the
 * page before it in address order */
static unsigned contiguous_permille(iosr_slot_entry *v, size_t n) {
  qsort(v, n, sizeof *v, cmp_addr);
  size_t c = 0;
  for (size_t i = 1; i < n; i++) c += v[i].addr == v[i - 1].addr + 4096 && v[i].slot == v[i - 1].slot + 1;
  return n > 1 ? (unsigned)(c * 1000 / (n - 1)) : 1000;
}

static void run(const char *policy, unsigned *contig_a, unsigned *contig_b, size_t *switches) {
  char swap[256], settings[128];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  snprintf(settings, sizeof settings, "slot=%s,zero_window=1", policy);
  iosr_engine *eng = iosr_engine_start(swap, settings);
  CHECK(eng);
  iosr_connect_opts oa = {.app_name = "A", .engine = eng}, ob = {.app_name = "B", .engine = eng};
  iosr_ctx *a = iosr_connect(&oa), *b = iosr_connect(&ob);
  CHECK(a && b);
  iosr_ctl *ctl = iosr_ctl_open_engine(eng);
  CHECK(ctl);
  iosr_region *ra = iosr_region_create(a, NPAGES * 4096), *rb = iosr_region_create(b, NPAGES * 4096);
  CHECK(ra && rb);
  uint8_t *pa = iosr_region_base(ra), *pb = iosr_region_base(rb);
  for (uint64_t i = 0; i < NPAGES; i++) {
    iosr_fill(pa + i * 4096, 1, i, 0);
    iosr_fill(pb + i * 4096, 2, i, 0);
  }
  CHECK(iosr_ctl_foreground(ctl, "") == 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(ctl, "--background", 0, &got) == 0);
  CHECK(got == 2ull * NPAGES * 4096, "reclaimed %llu", (unsigned long long)got);
  iosr_slot_entry *va, *vb;
  size_t na, nbb;
  CHECK(iosr_ctl_slot_map(ctl, "A", &va, &na) == 0 && na == NPAGES);
  CHECK(iosr_ctl_slot_map(ctl, "B", &vb, &nbb) == 0 && nbb == NPAGES);
  *contig_a = contiguous_permille(va, na);
  *contig_b = contiguous_permille(vb, nbb);
  own *all = malloc(sizeof *all * (na + nbb));
  for (size_t i = 0; i < na; i++) all[i] = (own){va[i].slot, 0};
  for (size_t i = 0; i < nbb; i++) all[na + i] = (own){vb[i].slot, 1};
  qsort(all, na + nbb, sizeof *all, cmp_slot);
  *switches = 0;
  for (size_t i = 1; i < na + nbb; i++) *switches += all[i].app != all[i - 1].app;
  for (uint64_t i = 0; i < NPAGES; i++) {
    CHECK(iosr_check(pa + i * 4096, 1, i, 0));
    CHECK(iosr_check(pb + i * 4096, 2, i, 0));
  }
  free(all);
  free(va);
  free(vb);
  iosr_ctl_close(ctl);
  CHECK(iosr_disconnect(a) == 0 && iosr_disconnect(b) == 0);
  CHECK(iosr_engine_stop(eng) == 0);
  printf("%-8s contiguous runs in address order: A %u.%u%%, B %u.%u%%; owner changes along the swap area: %zu\n",
         policy, *contig_a / 10, *contig_a % 10, *contig_b / 10, *contig_b % 10, *switches);
}

int main(void) {
  iosr_test_require();
  unsigned pa, pb, ga, gb;
  size_t psw, gsw;
  run("process", &pa, &pb, &psw);
  run("global", &ga, &gb, &gsw);
  CHECK(pa >= 950 && pb >= 950, "process: %u/%u per mille contiguous", pa, pb);
  /* interleaved: almost every neighbour in the area belongs to the other app */
  CHECK(gsw >= NPAGES && ga < 500 && gb < 500, "global: %zu owner changes, %u/%u per mille contiguous", gsw, ga, gb);
  CHECK(psw <= 2 * NPAGES / 512 + 2, "process: %zu owner changes for 2 x %u pages", psw, NPAGES);
  iosr_test_cleanup();
  return 0;
}
