/* Placement on demand, the trough detector (docs/design/reclamation.md 6a,
 * JWMALLOC_PLACEMENT=auto, set by the test), through the library: one thread
 * keeps a steady population of small and midend blocks (16 MiB), churning,
 * for many reclaim cycles: placement must stay off (a steady load never
 * meets the trough condition, whatever its fragmentation). Then it grows to
 * 5x, churns, falls back to the steady count (the trough): the detector
 * must switch placement on, and with it on the survivors move to the low
 * roots, so that after the trough's churn the slabs in use (the backend's
 * live bytes) are back within 1.15x the steady level and mapped memory below
 * the peak's. Growing to the peak again switches it off. A second trough
 * switches it on again, and when no survivor moves any more (the program
 * only churns short-lived blocks) the stall bound switches it off after 16
 * full cycles.
 *
 * The test runs the reclaim cycles itself, one per fixed amount of churn
 * (the reclaim thread off and the interval long, set by CTest), so that what
 * the detector sees does not depend on how busy the machine is; every wait
 * for a switch is bounded by a count of cycles. Usage: test_placement_auto
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "pages/page_source.h"
#include "jwmalloc.h"
#include "reclaim/reclaim.h"

#include "check.h"

#define STEADY ((size_t)16 << 20)
#include "churn_population.h"

static void stats(jw_reclaim_stats *r, jw_pages_stats *p) {
  jw_reclaim_get_stats(r);
  jw_pages_get_stats(p);
}

int main(void) {
  long mode = -1;
  CHECK(jw_option_get("PLACEMENT", &mode) == 0 && mode == 2, "PLACEMENT %ld, want 2 (auto: JWMALLOC_PLACEMENT=auto)", mode);
  jw_reclaim_stats r;
  jw_pages_stats p;
  while (bytes < STEADY) put(n++);
  size_t steady_n = n;
  /* Steady: many reclaim cycles of churn, placement stays off. */
  stats(&r, &p);
  uint64_t c0 = r.cycles;
  for (int i = 0; i < 400 && r.cycles < c0 + 20; i++) {
    churn_cycles(20000, 20000);
    stats(&r, &p);
  }
  CHECK(r.cycles >= c0 + 20, "only %llu reclaim cycles in the steady phase", (unsigned long long)(r.cycles - c0));
  CHECK(r.placement_on == 0 && !r.placement_active, "placement switched on in a steady load (%llu switches)",
        (unsigned long long)r.placement_on);
  uint64_t steady_live = p.live_bytes, steady_mapped = p.mapped_bytes;
  /* Peak, then the trough. */
  while (bytes < 5 * STEADY && n < POP_CAP) put(n++);
  churn_cycles(200000, 40000);
  stats(&r, &p);
  uint64_t peak_mapped = p.mapped_bytes;
  while (n > steady_n) drop(--n);
  for (int i = 0; i < 500 && !r.placement_active; i++) {
    churn_cycles(2000, 2000);
    stats(&r, &p);
  }
  CHECK(r.placement_active && r.placement_on == 1, "placement not switched on after the peak (on %llu, active %d)",
        (unsigned long long)r.placement_on, r.placement_active);
  churn_cycles(2000000, 40000);
  stats(&r, &p);
  printf("placement auto: steady live %.1f MiB mapped %.1f; peak mapped %.1f; after the trough live %.1f MiB (%.2fx) "
         "mapped %.1f (%.2fx); switches on %llu off %llu (stalled %llu, contended %llu)\n",
         steady_live / 1048576.0, steady_mapped / 1048576.0, peak_mapped / 1048576.0, p.live_bytes / 1048576.0,
         (double)p.live_bytes / (double)steady_live, p.mapped_bytes / 1048576.0,
         (double)p.mapped_bytes / (double)steady_mapped, (unsigned long long)r.placement_on,
         (unsigned long long)r.placement_off, (unsigned long long)r.placement_stalled,
         (unsigned long long)r.placement_contended);
  CHECK(p.live_bytes * 100 <= steady_live * 115, "slabs in use after the trough %.2fx the steady level",
        (double)p.live_bytes / (double)steady_live);
  CHECK(p.mapped_bytes < peak_mapped, "mapped after the trough %llu not below the peak's %llu",
        (unsigned long long)p.mapped_bytes, (unsigned long long)peak_mapped);
  /* Back to the peak: mapped is in use again, placement goes off. */
  while (bytes < 5 * STEADY && n < POP_CAP) put(n++);
  for (int i = 0; i < 500 && r.placement_active; i++) {
    churn_cycles(2000, 2000);
    stats(&r, &p);
  }
  CHECK(!r.placement_active && r.placement_off >= 1, "placement still on at the second peak (off %llu)",
        (unsigned long long)r.placement_off);
  /* The stall bound: a second trough switches placement on again; then the
   * program only allocates and frees short-lived blocks (no survivor moves),
   * no root comes back, and placement goes off after 16 full cycles instead
   * of staying on for as long as the program runs. */
  churn_cycles(200000, 40000);
  while (n > steady_n) drop(--n);
  uint64_t on0 = r.placement_on;
  for (int i = 0; i < 500 && r.placement_on == on0; i++) {
    churn_cycles(2000, 2000);
    stats(&r, &p);
  }
  CHECK(r.placement_on == on0 + 1, "placement not switched on after the second trough (on %llu)",
        (unsigned long long)r.placement_on);
  uint64_t c1 = r.cycles;
  for (int i = 0; i < 2000 && r.placement_active; i++) {
    void *tmp[64];
    for (int k = 0; k < 64; k++) CHECK((tmp[k] = jw_malloc(4000)) != NULL, "jw_malloc");
    for (int k = 0; k < 64; k++) jw_free(tmp[k]);
    jw_reclaim_cycle();
    stats(&r, &p);
  }
  CHECK(!r.placement_active && r.placement_stalled >= 1,
        "placement still on %llu reclaim cycles into a trough that stopped draining (stalled %llu)", (unsigned long long)(r.cycles - c1),
        (unsigned long long)r.placement_stalled);
  CHECK(r.cycles - c1 >= 16, "placement went off after %llu cycles, before the stall bound's 16",
        (unsigned long long)(r.cycles - c1));
  while (n) drop(--n);
  return test_failures() ? 1 : 0;
}
