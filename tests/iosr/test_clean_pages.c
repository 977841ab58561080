/* Clean pages keep their slot (design note section 3, "Clean pages keep
 * their slot"): a region swapped out, read back with no write and reclaimed
 * again costs no write at all (the engine's write request and byte
 * counters); after writes to some pages, the next reclaim writes exactly
 * those pages; contents are right after every swap-in; slots in use equal
 * swapped plus clean pages at every step; a discard or munmap of clean
 * pages frees their slots and a discarded page reads zero.
 *
 * With clean_pages=1 (IOSR_CLEAN_PAGES; off by default).
 *
 * usage: test_clean_pages global|process
 */
#include "util.h"

#define N 512u

static iosr_ctl *ctl;

static void stats(iosr_app_stats *st) { CHECK(iosr_ctl_app_stats(ctl, "clean", st) == 0); }

/* slots in use == pages on the swap area only + clean resident pages */
static void accounting(const char *when) {
  iosr_app_stats st;
  stats(&st);
  uint64_t used = iosr_test_stat(ctl, "\"used\":");
  CHECK(used == st.swapped_pages + st.clean_pages, "%s: %llu slots used, %llu swapped + %llu clean", when,
        (unsigned long long)used, (unsigned long long)st.swapped_pages, (unsigned long long)st.clean_pages);
}

/* Swaps the whole app out; returns the bytes and requests written. */
static void reclaim(uint64_t *bytes, uint64_t *reqs, const char *when) {
  iosr_app_stats a, b;
  uint64_t got;
  stats(&a);
  CHECK(iosr_ctl_reclaim(ctl, "clean", 0, &got) == 0, "%s: reclaim", when);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  stats(&b);
  CHECK(b.resident_pages == 0 && b.clean_pages == 0 && b.swapped_pages == N, "%s: %llu resident, %llu swapped",
        when, (unsigned long long)b.resident_pages, (unsigned long long)b.swapped_pages);
  *bytes = b.write_bytes - a.write_bytes;
  *reqs = b.write_reqs - a.write_reqs;
  fprintf(stderr, "%s: %llu bytes written in %llu requests, %llu clean pages dropped\n", when,
          (unsigned long long)*bytes, (unsigned long long)*reqs, (unsigned long long)(b.clean_drops - a.clean_drops));
  accounting(when);
}

/* Page i holds version ver[i]. */
static void verify(const uint8_t *p, const uint8_t *ver, const char *when) {
  for (uint64_t i = 0; i < N; i++)
    CHECK(iosr_check(p + i * 4096, 31, i, ver[i]), "%s: page %llu wrong", when, (unsigned long long)i);
}

int main(int argc, char **argv) {
  const char *slot = argc > 1 ? argv[1] : "global";
  iosr_test_require();
  char set[96];
  snprintf(set, sizeof set, "test_hooks=1,clean_pages=1,slot=%s", slot);
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, set, "clean");
  ctl = env.ctl;
  iosr_region *r = iosr_region_create(env.ctx, N * 4096);
  CHECK(r);
  uint8_t *p = iosr_region_base(r);
  static uint8_t ver[N];
  for (uint64_t i = 0; i < N; i++) iosr_fill(p + i * 4096, 31, i, 0);
  uint64_t bytes, reqs;

  reclaim(&bytes, &reqs, "first reclaim");
  CHECK(bytes == (uint64_t)N * 4096, "first reclaim wrote %llu bytes", (unsigned long long)bytes);

  /* read back, no write: every page is clean and keeps its slot */
  verify(p, ver, "first swap-in");
  iosr_app_stats st;
  stats(&st);
  CHECK(st.clean_pages == N, "%llu clean pages after reading all back", (unsigned long long)st.clean_pages);
  accounting("read back");

  reclaim(&bytes, &reqs, "second reclaim (all clean)");
  CHECK(bytes == 0 && reqs == 0, "a reclaim of clean pages wrote %llu bytes", (unsigned long long)bytes);
  verify(p, ver, "second swap-in");

  /* writes to every seventh page: those, and only those, are written next */
  uint64_t written = 0;
  for (uint64_t i = 0; i < N; i += 7) {
    ver[i] = 1;
    iosr_fill(p + i * 4096, 31, i, 1);
    written++;
  }
  stats(&st);
  CHECK(st.clean_pages == N - written, "%llu clean pages after %llu written", (unsigned long long)st.clean_pages,
        (unsigned long long)written);
  accounting("after writes");
  reclaim(&bytes, &reqs, "third reclaim (some written)");
  CHECK(bytes == written * 4096, "third reclaim wrote %llu bytes for %llu pages written", (unsigned long long)bytes,
        (unsigned long long)written);
  verify(p, ver, "third swap-in");

  /* a discard and a munmap of clean pages free their slots */
  CHECK(madvise(p, 64 * 4096, MADV_DONTNEED) == 0);
  accounting("after MADV_DONTNEED of clean pages");
  for (uint64_t i = 0; i < 64; i++) CHECK(iosr_is_zero(p + i * 4096), "discarded page %llu not zero", (unsigned long long)i);
  uint64_t before = iosr_test_stat(ctl, "\"used\":");
  CHECK(munmap(p + (N - 64) * 4096, 64 * 4096) == 0);
  uint64_t after = iosr_test_stat(ctl, "\"used\":");
  CHECK(before - after == 64, "munmap of 64 clean pages freed %llu slots", (unsigned long long)(before - after));
  for (uint64_t i = 64; i < N - 64; i++)
    CHECK(iosr_check(p + i * 4096, 31, i, ver[i]), "page %llu after discard and munmap", (unsigned long long)i);
  accounting("after munmap");

  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  fprintf(stderr, "clean pages: kept their slots, dropped with no write, freed on write, discard and munmap\n");
  return 0;
}
