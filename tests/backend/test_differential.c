/* Differential test of the backend against a page-map reference model
 * (driver.h) over random allocate/free sequences covering every class, with
 * lookups, interior marks, bad frees and reclamation steps mixed in. The live
 * set swings between a low and a high water mark so roots are created,
 * emptied, returned with their metadata and created again.
 *
 * Usage: test_backend_differential [OPS [SEED]]   (default 2,000,000 ops) */
#include <inttypes.h>

#include "backend/backend.h"
#include "backend/size_class.h"
#include "driver.h"
#include "tb.h"

static bd d;

int main(int argc, char **argv) {
  uint64_t ops = argc > 1 ? strtoull(argv[1], NULL, 10) : 2000000;
  uint64_t seed = argc > 2 ? strtoull(argv[2], NULL, 10) : 42;
  tb_rng rng = {seed};
  bd_init(&d, 2048);
  jw_backend_stats s0;
  jw_backend_get_stats(&s0);
  uint32_t high = 1024;
  for (uint64_t i = 0; i < ops; i++) {
    /* Every 40,000 operations the high water mark moves: between 1 root and
     * 24 roots' worth of live granules. */
    if (i % 40000 == 0) high = 256 + tb_below(&rng, 24 * 1024);
    int grow = d.live_granules < high;
    uint32_t x = tb_below(&rng, 1000);
    if (x < 470) {
      if (!grow && x < 300) {
        bd_free(&d, (uint32_t)tb_next(&rng));
        continue;
      }
      /* Half the requests uniform over all 36 classes, half over the small
       * ones; the size asked is any value that rounds up to the class. */
      unsigned ci = tb_below(&rng, 2) ? tb_below(&rng, JW_NCLASSES) : tb_below(&rng, 18);
      uint32_t hi = jw_class_granules[ci], lo = ci ? jw_class_granules[ci - 1] + 1 : 1;
      uint32_t n = lo + tb_below(&rng, hi - lo + 1);
      jw_range_kind kind = hi == 1 ? (jw_range_kind)(1 + tb_below(&rng, 3))
                           : hi <= 16 && tb_below(&rng, 2) ? JW_KIND_MID_SLAB : JW_KIND_LARGE;
      if (bd_alloc(&d, n, kind) != 0) bd_free(&d, (uint32_t)tb_next(&rng));
    } else if (x < 900) {
      if (grow && x < 600) {
        unsigned ci = tb_below(&rng, JW_NCLASSES);
        bd_alloc(&d, jw_class_granules[ci], ci ? JW_KIND_LARGE : JW_KIND_SMALL_SLAB);
      } else {
        bd_free(&d, (uint32_t)tb_next(&rng));
      }
    } else if (x < 960) {
      bd_probe(&d, tb_next(&rng));
    } else if (x < 980) {
      bd_mark(&d, (uint32_t)tb_next(&rng), (uint32_t)tb_next(&rng));
    } else if (x < 998) {
      bd_bad_free(&d, tb_next(&rng));
    } else if (x == 998 && tb_below(&rng, 20) == 0) {
      bd_reclaim(&d);
    } else if (x == 999 && tb_below(&rng, 4) == 0) {
      /* Out-of-bounds requests: ENOMEM, nothing allocated. */
      bd_alloc(&d, tb_below(&rng, 2) ? 0 : JW_ROOT_GRANULES + 1 + tb_below(&rng, 5000), JW_KIND_LARGE);
      bd_alloc(&d, 1, (jw_range_kind)(tb_below(&rng, 2) ? 0 : 7));
    }
  }
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  for (unsigned c = 0; c < JW_NCLASSES; c++)
    CHECK(d.class_allocs[c] >= ops / 2000, "class %u (%u granules) allocated only %" PRIu64 " times", c,
          jw_class_granules[c], d.class_allocs[c]);
  uint64_t peak_records = d.peak_record_bytes, peak_roots = d.peak_roots;
  bd_free_all(&d);
  jw_backend_stats e;
  jw_backend_get_stats(&e);
  CHECK(peak_records > 0 && e.record_bytes == 0, "metadata did not fall after the peak");
  printf("differential: %" PRIu64 " ops: %" PRIu64 " allocs, %" PRIu64 " frees, %" PRIu64 " probes, %" PRIu64
         " bad frees rejected, %" PRIu64 " reclaim steps, %" PRIu64 " zeroed ranges checked\n",
         d.ops, d.allocs, d.frees, d.probes, d.bad_frees, d.reclaims, d.zeroed_allocs);
  printf("differential: splits %.3f, merges %.3f per alloc/free; roots mapped %" PRIu64 ", unmapped %" PRIu64
         ", peak %" PRIu64 "\n",
         (double)(s.pages.splits - s0.pages.splits) / (double)(d.allocs + d.frees),
         (double)(s.pages.merges - s0.pages.merges) / (double)(d.allocs + d.frees), e.roots_mapped_total,
         e.roots_unmapped_total, peak_roots);
  printf("differential: metadata %.2f bytes per granule of mapped roots; records %" PRIu64 " KiB at the peak, %" PRIu64
         " after freeing everything\n",
         peak_roots ? (double)peak_records / (double)(peak_roots * JW_ROOT_GRANULES) : 0.0, peak_records >> 10,
         e.record_bytes);
  bd_destroy(&d);
  if (test_failures()) return 1;
  puts("differential: ok");
  return 0;
}
