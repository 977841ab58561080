/* `iosr mkswap` and the swap area header (issue 5, "Swap area"): format,
 * header fields, refusal of a path that holds data without --force, refusal of
 * an area a running engine uses, bad input with a one-line message.
 * Also what every IOSR tool does with --help, bad usage, a bad IOSR_LOG and
 * unknown IOSR_* names (none of it needs a running daemon). */
#include "util.h"

#include "common/opts.h"
#include "swaparea/format.h"

static const char *bin(const char *var, const char *def) {
  const char *b = getenv(var);
  return b && *b ? b : def;
}

static int lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

static int count(const char *s, const char *what) {
  int n = 0;
  for (; (s = strstr(s, what)); s++) n++;
  return n;
}

/* --help: the usage on stdout and exit 0; bad usage: one line on stderr, exit 2. */
static void check_usage(void) {
  const char *tools[] = {bin("IOSR_TOOL", "iosr"), bin("IOSRD", "iosrd"), bin("IOSR_APP_BIN", "iosr-app"),
                         bin("IOSR_BENCH_APP_BIN", "iosr-bench-app")};
  char out[4096], cmd[1024];
  for (size_t i = 0; i < sizeof tools / sizeof tools[0]; i++) {
    snprintf(cmd, sizeof cmd, "%s --help 2>/dev/null", tools[i]);
    int st = iosr_sh(cmd, out, sizeof out);
    CHECK(st == 0 && !strncmp(out, "usage: ", 7), "%s: status %d, stdout: %s", cmd, st, out);
    snprintf(cmd, sizeof cmd, "%s --frobnicate 2>&1 >/dev/null", tools[i]);
    st = iosr_sh(cmd, out, sizeof out);
    CHECK(st == 2 && lines(out) == 1 && strstr(out, "--frobnicate") && strstr(out, "--help"), "%s: status %d, stderr: %s",
          cmd, st, out);
  }
  /* iosr: --help after a command too; a command's bad usage is one line */
  snprintf(cmd, sizeof cmd, "%s stat --help 2>/dev/null", tools[0]);
  CHECK(iosr_sh(cmd, out, sizeof out) == 0 && strstr(out, "iosr stat"));
  snprintf(cmd, sizeof cmd, "%s fg 2>&1 >/dev/null", tools[0]);
  CHECK(iosr_sh(cmd, out, sizeof out) == 2 && lines(out) == 1, "%s", out);
  snprintf(cmd, sizeof cmd, "%s --log 9 --swap /nonexistent/swap 2>&1", tools[1]);
  CHECK(iosr_sh(cmd, out, sizeof out) == 2 && strstr(out, "--log"), "%s", out);
}

/* IOSR_LOG out of range or malformed is refused as a bad engine option is
 * (IOSR_READAHEAD=bogus): one line naming it, exit 1; iosr_connect: EINVAL. */
static void check_bad_log(const char *dir) {
  char out[4096], cmd[1024];
  snprintf(cmd, sizeof cmd, "IOSR_READAHEAD=bogus %s --swap /nonexistent/swap --socket %s/s 2>&1", bin("IOSRD", "iosrd"),
           dir);
  CHECK(iosr_sh(cmd, out, sizeof out) == 1 && strstr(out, "IOSR_READAHEAD: bad value 'bogus'"), "%s", out);
  const char *bad[] = {"9", "-1", "x", "1x", "4"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    snprintf(cmd, sizeof cmd, "IOSR_LOG=%s %s --swap /nonexistent/swap --socket %s/s 2>&1", bad[i],
             bin("IOSRD", "iosrd"), dir);
    CHECK(iosr_sh(cmd, out, sizeof out) == 1 && lines(out) == 1 && strstr(out, "IOSR_LOG: bad value"), "%s: %s", cmd,
          out);
    snprintf(cmd, sizeof cmd, "IOSR_LOG=%s %s info /nonexistent/swap 2>&1", bad[i], bin("IOSR_TOOL", "iosr"));
    CHECK(iosr_sh(cmd, out, sizeof out) == 1 && strstr(out, "IOSR_LOG: bad value"), "%s: %s", cmd, out);
  }
  snprintf(cmd, sizeof cmd, "IOSR_LOG=3 %s info /nonexistent/swap 2>&1", bin("IOSR_TOOL", "iosr"));
  CHECK(iosr_sh(cmd, out, sizeof out) == 1 && !strstr(out, "IOSR_LOG"), "%s", out); /* 0..3 accepted */
  iosr_connect_opts o = {.app_name = "badlog", .socket_path = "/nonexistent/sock"};
  CHECK(setenv("IOSR_LOG", "9", 1) == 0);
  errno = 0;
  CHECK(!iosr_connect(&o));
  CHECK(errno == EINVAL, "iosr_connect with IOSR_LOG=9: errno %d", errno);
  CHECK(unsetenv("IOSR_LOG") == 0);
  errno = 0;
  CHECK(!iosr_connect(&o) && errno != EINVAL); /* no daemon there, but the environment is fine */
}

/* Unknown IOSR_* names: one line each on stderr, and the program goes on. */
static void check_unknown_names(const char *swap) {
  char out[4096], cmd[1024];
  snprintf(cmd, sizeof cmd, "IOSR_READAHAED=vma IOSR_BOGUS=1 %s info %s 2>&1", bin("IOSR_TOOL", "iosr"), swap);
  CHECK(iosr_sh(cmd, out, sizeof out) == 0 && strstr(out, "clean 1"), "%s", out);
  CHECK(count(out, "unknown variable") == 2 && strstr(out, "IOSR_READAHAED: unknown variable") &&
            strstr(out, "did you mean IOSR_READAHEAD?") && strstr(out, "IOSR_BOGUS: unknown variable"),
        "%s", out);
  /* known names (this test's own IOSR_TOOL among them) are not reported */
  snprintf(cmd, sizeof cmd, "IOSR_LOG=1 IOSR_READAHEAD=vma %s info %s 2>&1", bin("IOSR_TOOL", "iosr"), swap);
  CHECK(iosr_sh(cmd, out, sizeof out) == 0 && !strstr(out, "unknown"), "%s", out);
  /* the client library: the first iosr_connect reports them */
  char log[300];
  snprintf(log, sizeof log, "%s/connect.err", iosr_test_dir);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || dup2(fd, 2) < 0 || setenv("IOSR_BOGUS", "1", 1)) _exit(1);
    iosr_connect_opts o = {.app_name = "unknown-names", .socket_path = "/nonexistent/sock"};
    _exit(iosr_connect(&o) == NULL && errno != EINVAL ? 0 : 1);
  }
  int st;
  CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  FILE *f = fopen(log, "r");
  CHECK(f);
  size_t n = fread(out, 1, sizeof out - 1, f);
  out[n] = 0;
  fclose(f);
  CHECK(count(out, "IOSR_BOGUS: unknown variable") == 1, "%s", out);
}

/* Sizes (iosr_parse_size, and the options that take one): a digit first,
 * or refused; strtoull alone would take a blank and a sign (" -1" as
 * 2^64-1). The suffixes the README lists: K/M/G/T, either case, optional B. */
static void check_sizes(void) {
  const char *bad[] = {" -1", "+7", "-1", " 7", "\t7", "", "K", "7Q", "7KX", "7 K", "18446744073709551616",
                       "16777216T"};
  uint64_t v;
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    v = 12345;
    errno = 0;
    CHECK(iosr_parse_size(bad[i], &v) == -1 && errno == EINVAL && v == 12345, "'%s' taken as %llu", bad[i],
          (unsigned long long)v);
  }
  static const struct {
    const char *s;
    uint64_t v;
  } good[] = {{"0", 0}, {"7", 7}, {"64K", 64u << 10}, {"64k", 64u << 10}, {"16M", 16u << 20},
              {"2G", 2ull << 30}, {"1T", 1ull << 40}, {"1GB", 1ull << 30}, {"4kb", 4u << 10}};
  for (size_t i = 0; i < sizeof good / sizeof good[0]; i++)
    CHECK(iosr_parse_size(good[i].s, &v) == 0 && v == good[i].v, "'%s'", good[i].s);
  /* the option table's sizes go through it too: `iosr set budget " -1"` */
  iosr_settings st;
  char err[160];
  CHECK(iosr_settings_init(&st, err, sizeof err) == 0, "%s", err);
  const char *budget_bad[] = {" -1", "+7", "-1"};
  for (size_t i = 0; i < sizeof budget_bad / sizeof budget_bad[0]; i++) {
    CHECK(iosr_settings_set(&st, "budget", budget_bad[i], err, sizeof err) == -1 && st.budget == 0 &&
              strstr(err, "bad value"),
          "budget '%s': %llu", budget_bad[i], (unsigned long long)st.budget);
  }
  CHECK(iosr_settings_set(&st, "budget", "1G", err, sizeof err) == 0 && st.budget == 1ull << 30, "%s", err);
}

int main(void) {
  char out[4096], path[300], cmd[700];
  iosr_test_swap(path, sizeof path, 8u << 20); /* creates the test directory */
  snprintf(path, sizeof path, "%s/area", iosr_test_dir);
  snprintf(cmd, sizeof cmd, "mkswap %s --size 4M --label demo", path);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 0);
  CHECK(strstr(out, "1023 slots"), "%s", out);
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
  CHECK(strstr(out, "holds data") && strstr(out, "--force"), "%s", out);
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
  snprintf(cmd, sizeof cmd, "mkswap %s --size ' -1'", path); /* a blank and a sign: refused, not 2^64-1 */
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 2 && strstr(out, "bad size"), "%s", out);
  check_sizes();
  snprintf(cmd, sizeof cmd, "mkswap %s/tiny --size 64K", iosr_test_dir);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1 && strstr(out, "too small"));
  snprintf(cmd, sizeof cmd, "info %s", data);
  CHECK(iosr_tool("/nonexistent", cmd, out, sizeof out) == 1 && strstr(out, "not an IOSR swap area"));
  CHECK(iosr_tool("/nonexistent", "frobnicate", out, sizeof out) == 2);
  CHECK(iosr_tool("/nonexistent", "stat", out, sizeof out) == 1 && strstr(out, "cannot reach iosrd"));
  check_usage();
  check_unknown_names(path); /* first: its child's iosr_connect must be the process's first */
  check_bad_log(iosr_test_dir);
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
