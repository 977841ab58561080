/* Swappable memory (issue: "Swappable memory"): untouched pages read as zero,
 * swapped pages come back byte-identical, discarded pages read zero and free
 * their slots, destroyed regions free theirs. In-process engine. */
#include "util.h"

int main(void) {
  iosr_test_require();
  iosr_test_env t;
  iosr_test_inproc(&t, 64u << 20, NULL, "region");
  iosr_ctx *ctx = t.ctx;
  iosr_ctl *ctl = t.ctl;
  const size_t npages = 2048;
  iosr_region *r = iosr_region_create(ctx, npages * 4096);
  CHECK(r);
  uint8_t *b = iosr_region_base(r);
  CHECK(((uintptr_t)b & ((2u << 20) - 1)) == 0);
  /* untouched pages read zero */
  for (size_t i = 0; i < npages; i += 7) CHECK(iosr_is_zero(b + i * 4096));
  for (size_t i = 0; i < npages; i++) iosr_fill(b + i * 4096, 1, i, 0);
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "region", &st) == 0);
  CHECK(st.resident_pages == npages, "resident %llu", (unsigned long long)st.resident_pages);
  uint64_t got = 0;
  CHECK(iosr_ctl_reclaim(ctl, "region", 0, &got) == 0);
  CHECK(got == npages * 4096, "reclaimed %llu", (unsigned long long)got);
  CHECK(iosr_ctl_app_stats(ctl, "region", &st) == 0);
  CHECK(st.swapped_pages == npages && st.resident_pages == 0, "swapped %llu resident %llu",
        (unsigned long long)st.swapped_pages, (unsigned long long)st.resident_pages);
  /* pages are really gone from memory */
  unsigned char vec[16];
  CHECK(mincore(b, 16 * 4096, vec) == 0);
  for (int i = 0; i < 16; i++) CHECK((vec[i] & 1) == 0);
  for (size_t i = 0; i < npages; i++) CHECK(iosr_check(b + i * 4096, 1, i, 0), "page %zu differs", i);
  CHECK(iosr_ctl_app_stats(ctl, "region", &st) == 0);
  CHECK(st.major_faults > 0 && st.resident_pages == npages && st.swapped_pages == 0);
  /* discard: reads zero afterwards, also for swapped pages */
  CHECK(iosr_ctl_reclaim(ctl, "region", 0, &got) == 0);
  CHECK(iosr_region_discard(r, 0, 512 * 4096) == 0);
  CHECK(madvise(b + 512 * 4096, 512 * 4096, MADV_DONTNEED) == 0);
  CHECK(iosr_ctl_app_stats(ctl, "region", &st) == 0);
  CHECK(st.swapped_pages == npages - 1024, "swapped %llu", (unsigned long long)st.swapped_pages);
  for (size_t i = 0; i < 1024; i++) CHECK(iosr_is_zero(b + i * 4096));
  for (size_t i = 1024; i < npages; i++) CHECK(iosr_check(b + i * 4096, 1, i, 0));
  /* zero pages are not written */
  CHECK(iosr_ctl_reclaim(ctl, "region", 0, &got) == 0);
  CHECK(iosr_ctl_app_stats(ctl, "region", &st) == 0);
  CHECK(st.zero_pages >= 1024 && st.swapped_pages == npages - 1024, "zero %llu swapped %llu",
        (unsigned long long)st.zero_pages, (unsigned long long)st.swapped_pages);
  for (size_t i = 0; i < npages; i++)
    CHECK(i < 1024 ? iosr_is_zero(b + i * 4096) : iosr_check(b + i * 4096, 1, i, 0));
  CHECK(iosr_region_destroy(r) == 0);
  char *js = iosr_ctl_stat_json(ctl);
  CHECK(js && strstr(js, "\"used\":0,"));
  free(js);
  iosr_test_inproc_end(&t);
  iosr_test_cleanup();
  printf("region: ok\n");
  return 0;
}
