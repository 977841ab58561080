/* Slot contents are verified (issue 22): a damaged swap area gives the app
 * SIGBUS for the damaged pages, never other bytes.
 *
 *   crc      CRC32C itself: the standard check value, the page version against
 *            the byte-wise one, the SSE4.2 version against the portable one
 *   damage   after a reclaim, the slots of pages 0-127 are overwritten with
 *            other pages' valid slots, the area is truncated at page 384's
 *            slot and extended again by one write past page 447's (so slots
 *            384-447 read zero and 448-511 lie beyond the end): every damaged
 *            page gives SIGBUS at its own address, every other page is intact
 *
 * In-process engine. */
#include "util.h"

#include <setjmp.h>
#include <signal.h>

#include "common/crc32c.h"
#include "swaparea/format.h"

static int crc_unit(void) {
  CHECK(iosr_crc32c(0, "123456789", 9) == 0xe3069283u);
  CHECK(iosr_crc32c(0, "", 0) == 0);
  static uint8_t buf[3 * 4096 + 64] __attribute__((aligned(64)));
  for (size_t i = 0; i < sizeof buf; i++) buf[i] = (uint8_t)iosr_mix(i * 7 + 1);
  const char *impl = iosr_crc32c_impl();
  for (int round = 0; round < 2; round++) {
    for (int k = 0; k < 64; k++) {
      uint8_t *pg = buf + 4096 * (k % 3);
      iosr_fill(pg, 81, (uint64_t)k, 0);
      uint32_t whole = iosr_crc32c_page(pg);
      CHECK(whole == iosr_crc32c(0, pg, 4096), "page CRC differs from the byte-wise one (%s)", iosr_crc32c_impl());
      /* continuing from a prefix, from any alignment */
      size_t cut = (size_t)(iosr_mix((uint64_t)k) % 4096);
      CHECK(iosr_crc32c(iosr_crc32c(0, pg, cut), pg + cut, 4096 - cut) == whole);
      CHECK(iosr_crc32c(0, buf + 1 + k, 777) == iosr_crc32c(iosr_crc32c(0, buf + 1 + k, 100), buf + 101 + k, 677));
      pg[k * 13 % 4096] ^= 1; /* any one-bit change shows */
      CHECK(iosr_crc32c_page(pg) != whole);
    }
    uint32_t ref = iosr_crc32c(0, buf, sizeof buf);
    iosr_crc32c_force_portable(1);
    CHECK(iosr_crc32c(0, buf, sizeof buf) == ref && iosr_crc32c_page(buf) == iosr_crc32c(0, buf, 4096),
          "portable and %s CRC32C differ", impl);
  }
  iosr_crc32c_force_portable(0);
  printf("crc32c: check value, page and byte-wise, %s and portable agree\n", impl);
  return 0;
}

static void copy_slot(int fd, uint64_t from, uint64_t to) {
  static uint8_t pg[4096];
  CHECK(pread(fd, pg, 4096, (off_t)iosr_slot_offset(from)) == 4096);
  CHECK(pwrite(fd, pg, 4096, (off_t)iosr_slot_offset(to)) == 4096);
}

int main(int argc, char **argv) {
  if (argc != 2 || (strcmp(argv[1], "crc") && strcmp(argv[1], "damage"))) {
    fprintf(stderr, "usage: test_checksum crc|damage\n");
    return 2;
  }
  if (!strcmp(argv[1], "crc")) return crc_unit();
  iosr_test_require();
  const uint64_t n = 512;
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, "slot=process", "damaged");
  iosr_engine *eng = env.eng;
  iosr_ctx *ctx = env.ctx;
  iosr_ctl *ctl = env.ctl;
  const char *swap = env.swap;
  iosr_region *r;
  uint8_t *p = iosr_test_fill_new_region(ctx, n, 82, &r);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(ctl, "damaged", 0, &got) == 0 && got == n * 4096);
  iosr_slot_entry *map;
  size_t nmap;
  CHECK(iosr_ctl_slot_map(ctl, "damaged", &map, &nmap) == 0 && nmap == n);
  uint64_t slot[512];
  for (size_t k = 0; k < nmap; k++) slot[(map[k].addr - (uintptr_t)p) / 4096] = map[k].slot;
  free(map);
  for (uint64_t i = 1; i < n; i++) CHECK(slot[i] > slot[i - 1], "slots not in address order (process policy)");
  /* the damage: other valid slots over 0-127; zeros over 384-447; nothing past 447 */
  int fd = open(swap, O_RDWR | O_CLOEXEC);
  CHECK(fd >= 0);
  for (uint64_t i = 0; i < 128; i++) copy_slot(fd, slot[256 + i], slot[i]);
  CHECK(ftruncate(fd, (off_t)iosr_slot_offset(slot[384])) == 0);
  static uint8_t z[4096];
  CHECK(pwrite(fd, z, 4096, (off_t)iosr_slot_offset(slot[447])) == 4096);
  CHECK(fsync(fd) == 0);
  close(fd);
  iosr_catch_bus(1);
  uint64_t buses = 0;
  for (uint64_t i = 0; i < n; i++) {
    int damaged = i < 128 || i >= 384;
    int bus = iosr_touch_bus(p + i * 4096);
    CHECK(bus == damaged, "page %llu: %s", (unsigned long long)i,
          bus ? "SIGBUS on an intact page" : "a damaged page was read without SIGBUS");
    if (!bus) CHECK(iosr_check(p + i * 4096, 82, i, 0), "page %llu holds other bytes", (unsigned long long)i);
    buses += bus;
  }
  /* it stays so until discarded; then the page reads zero */
  CHECK(iosr_touch_bus(p));
  CHECK(iosr_region_discard(r, 0, 4096) == 0 && iosr_is_zero(p));
  iosr_catch_bus(0);
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "damaged", &st) == 0);
  CHECK(st.checksum_errors >= 128 + 64, "checksum errors %llu", (unsigned long long)st.checksum_errors);
  printf("damage: %llu damaged pages gave SIGBUS (%llu checksum mismatches, %llu read errors), %llu intact\n",
         (unsigned long long)buses, (unsigned long long)st.checksum_errors, (unsigned long long)st.read_errors,
         (unsigned long long)(n - buses));
  CHECK(iosr_region_destroy(r) == 0 && iosr_disconnect(ctx) == 0);
  iosr_ctl_close(ctl);
  CHECK(iosr_engine_stop(eng) == 0);
  iosr_test_cleanup();
  return 0;
}
