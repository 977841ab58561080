/* `iosr mkswap` and the swap area header (issue 5, "Swap area"): format,
 * header fields, refusal of a path that holds data without --force, refusal of
 * an area a running engine uses, bad input with a one-line message. */
#include "util.h"

#include "swaparea/format.h"

int main(void) {
  char out[4096], path[300], cmd[700];
  iosr_test_swap(path, sizeof path, 8u << 20); /* creates the test directory */
  snprintf(path, sizeof path, "%s/area", iosr_test_dir);
  snprintf(cmd, sizeof cmd, "mkswap %s --size 4M --label demo", path);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 0);
  CHECKF(strstr(out, "1023 slots"), "%s", out);
  iosr_swap_header h;
  char err[256];
  CHECK(iosr_swap_read_header(path, &h, err, sizeof err) == 0);
  CHECK(h.slots == 1023 && h.page_size == 4096 && h.version == IOSR_SWAP_VERSION && h.clean == 1);
  CHECK(!strcmp(h.label, "demo"));
  int nonzero = 0;
  for (int i = 0; i < 16; i++) nonzero |= h.uuid[i];
  CHECK(nonzero);
  /* holds data now: refused without --force, and left untouched */
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1);
  CHECKF(strstr(out, "holds data") && strstr(out, "--force"), "%s", out);
  iosr_swap_header h2;
  CHECK(iosr_swap_read_header(path, &h2, err, sizeof err) == 0 && !memcmp(h.uuid, h2.uuid, 16));
  /* an ordinary file with data is refused too */
  char data[300];
  snprintf(data, sizeof data, "%s/notes.txt", iosr_test_dir);
  FILE *f = fopen(data, "w");
  fputs("precious\n", f);
  fclose(f);
  snprintf(cmd, sizeof cmd, "mkswap %s --size 4M", data);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1);
  f = fopen(data, "r");
  char line[32] = "";
  CHECK(fgets(line, sizeof line, f) && !strcmp(line, "precious\n"));
  fclose(f);
  /* --force reformats (new UUID) */
  snprintf(cmd, sizeof cmd, "mkswap %s --size 8M --force", path);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 0);
  CHECK(iosr_swap_read_header(path, &h2, err, sizeof err) == 0 && h2.slots == 2047 && memcmp(h.uuid, h2.uuid, 16));
  /* bad input */
  snprintf(cmd, sizeof cmd, "mkswap %s --size 12Q", path);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 2 && strstr(out, "bad size"));
  snprintf(cmd, sizeof cmd, "mkswap %s/tiny --size 64K", iosr_test_dir);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1 && strstr(out, "too small"));
  snprintf(cmd, sizeof cmd, "info %s", data);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1 && strstr(out, "not an IOSR swap area"));
  CHECK(iosr_tool("/nonexistent", "frobnicate", out, sizeof out) == 2);
  CHECK(iosr_tool("/nonexistent", "stat", out, sizeof out) == 1 && strstr(out, "cannot reach iosrd"));
  /* in use by an engine: refused, and marked dirty while used */
  int uffd_ok = 1;
  {
    int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    if (fd < 0) uffd_ok = 0;
    else close(fd);
  }
  if (uffd_ok) {
    iosr_engine *eng = iosr_engine_start(path, NULL);
    CHECK(eng);
    snprintf(cmd, sizeof cmd, "mkswap %s --size 8M --force", path);
    CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1 && strstr(out, "in use"));
    CHECK(iosr_swap_read_header(path, &h2, err, sizeof err) == 0 && h2.clean == 0);
    errno = 0;
    CHECK(!iosr_engine_start(path, NULL) && errno == EBUSY);
    CHECK(iosr_engine_stop(eng) == 0);
    CHECK(iosr_swap_read_header(path, &h2, err, sizeof err) == 0 && h2.clean == 1);
  }
  iosr_test_cleanup();
  printf("mkswap: ok\n");
  return 0;
}
