/* iosrd with client processes (issue 5: "Daemon and clients", "Statistics",
 * "Must be shown": a client that crashes has its slots freed and the daemon
 * carries on). Two app processes; the `iosr` command reclaims them, reads
 * statistics (also as JSON) and sets the foreground; one app is killed with
 * SIGKILL while its pages are swapped out. */
#include "util.h"

#define NPAGES 1024u

static char sock[300];

static int json_u64(const char *js, const char *key, uint64_t *out) {
  const char *p = strstr(js, key);
  if (!p) return -1;
  *out = strtoull(p + strlen(key), NULL, 10);
  return 0;
}

/* An app process: fill, then obey the parent: v = verify, q = quit. */
static pid_t app(const char *name, uint64_t seed, int *to, int *from) {
  int in, out;
  pid_t pid = iosr_test_fork(to, from);
  if (pid) return pid;
  in = *from;
  out = *to;
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region(name, sock, NPAGES, seed, &ctx, &r);
  chan_send(out, 'r');
  for (;;) {
    char c = chan_recv(in);
    if (c == 'v') {
      int ok = 1;
      for (uint64_t i = 0; i < NPAGES; i++) ok &= iosr_check(p + i * 4096, seed, i, 0);
      chan_send(out, ok ? 'o' : 'x');
    } else {
      break;
    }
  }
  iosr_region_destroy(r); /* without a daemon (appC) these report ENOTCONN */
  iosr_disconnect(ctx);
  _exit(0);
}

int main(void) {
  iosr_test_require();
  char swap[256], out[65536];
  iosr_test_swap(swap, sizeof swap, 64u << 20);
  snprintf(sock, sizeof sock, "%s/sock", iosr_test_dir);
  /* an unknown IOSR_* name: one warning line, and iosrd goes on */
  char errlog[300];
  snprintf(errlog, sizeof errlog, "%s/iosrd.err", iosr_test_dir);
  CHECK(setenv("IOSR_READAHAED", "vma", 1) == 0);
  pid_t d = iosr_test_daemon(swap, sock, NULL, errlog);
  CHECK(unsetenv("IOSR_READAHAED") == 0);
  {
    FILE *f = fopen(errlog, "r");
    CHECK(f);
    size_t k = fread(out, 1, sizeof out - 1, f);
    out[k] = 0;
    fclose(f);
    CHECK(strstr(out, "iosrd: IOSR_READAHAED: unknown variable, ignored (did you mean IOSR_READAHEAD?)\n") &&
              !strstr(strstr(out, "READAHAED") + 1, "READAHAED"),
          "iosrd's stderr: %s", out);
  }
  int ta, fa, tb, fb;
  pid_t pa = app("appA", 1, &ta, &fa), pb = app("appB", 2, &tb, &fb);
  CHECK(chan_recv(fa) == 'r' && chan_recv(fb) == 'r');
  CHECK(iosr_tool(sock, "reclaim appA", out, sizeof out) == 0);
  CHECK(strstr(out, "reclaimed 4096 KiB"), "%s", out);
  CHECK(iosr_tool(sock, "reclaim appB", out, sizeof out) == 0);
  CHECK(iosr_tool(sock, "fg appA", out, sizeof out) == 0);
  CHECK(iosr_tool(sock, "stat --json", out, sizeof out) == 0);
  uint64_t used = 0;
  CHECK(json_u64(out, "\"used\":", &used) == 0 && used == 2 * NPAGES, "%s", out);
  CHECK(strstr(out, "\"name\":\"appA\"") && strstr(out, "\"name\":\"appB\"") && strstr(out, "\"foreground\":\"appA\""),
        "%s", out);
  CHECK(strstr(out, "\"read_hist\":") && strstr(out, "\"fault_latency_ns\":") && strstr(out, "\"swapped_pages\":1024"));
  /* iosrd cannot move pages out of another process: each app's dropper
   * moved them (design note section 3, "Moved by the dropper"), the kernel
   * permitting (Linux 6.8, UFFDIO_MOVE) */
  uint64_t moved = 0;
  CHECK(json_u64(out, "\"moveout\":{\"pages\":", &moved) == 0, "%s", out);
  CHECK(moved == 2 * NPAGES || !iosr_test_has_move(), "%llu of %u pages moved out by the droppers",
        (unsigned long long)moved, 2 * NPAGES);
  /* appB crashes with its pages swapped out */
  kill(pb, SIGKILL);
  int st;
  waitpid(pb, &st, 0);
  for (int i = 0; i < 2000; i++) {
    CHECK(iosr_tool(sock, "stat --json", out, sizeof out) == 0);
    if (!strstr(out, "\"name\":\"appB\"")) break;
    usleep(2000);
  }
  CHECK(!strstr(out, "\"name\":\"appB\""), "appB still listed: %s", out);
  CHECK(json_u64(out, "\"used\":", &used) == 0);
  CHECK(used == NPAGES, "%llu slots used after appB died (want appA's %u)", (unsigned long long)used, NPAGES);
  /* the daemon carries on: appA's pages come back intact */
  chan_send(ta, 'v');
  CHECK(chan_recv(fa) == 'o');
  CHECK(iosr_tool(sock, "stat appA", out, sizeof out) == 0);
  CHECK(strstr(out, "appA") && strstr(out, "fg"), "%s", out);
  CHECK(iosr_tool(sock, "reclaim nosuchapp", out, sizeof out) == 1);
  /* stat of an app that does not exist fails as fg and reclaim do; stat of all still lists */
  CHECK(iosr_tool(sock, "stat nosuchapp", out, sizeof out) == 1 && !strcmp(out, "iosr: nosuchapp: No such process\n"),
        "%s", out);
  CHECK(iosr_tool(sock, "fg nosuchapp", out, sizeof out) == 1 && !strcmp(out, "iosr: nosuchapp: No such process\n"),
        "%s", out);
  CHECK(iosr_tool(sock, "stat", out, sizeof out) == 0 && strstr(out, "appA"));
  char by_pid[64];
  snprintf(by_pid, sizeof by_pid, "stat '#%d'", (int)pa);
  CHECK(iosr_tool(sock, by_pid, out, sizeof out) == 0 && strstr(out, "appA"), "%s", out);
  CHECK(iosr_tool(sock, "set readahead sideways", out, sizeof out) == 1);
  CHECK(iosr_tool(sock, "set readahead vma", out, sizeof out) == 0);
  CHECK(iosr_tool(sock, "set buffer 64M", out, sizeof out) == 1); /* start-time option */
  chan_send(ta, 'q');
  waitpid(pa, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* an orderly stop with an app's pages swapped out: iosrd brings them back
   * first, and the app goes on with ordinary memory */
  int tc, fc;
  pid_t pc = app("appC", 3, &tc, &fc);
  CHECK(chan_recv(fc) == 'r');
  CHECK(iosr_tool(sock, "reclaim appC", out, sizeof out) == 0);
  st = iosr_test_stop_daemon(d);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "iosrd status %d", st);
  chan_send(tc, 'v');
  CHECK(chan_recv(fc) == 'o');
  chan_send(tc, 'q');
  waitpid(pc, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  char cmd[600];
  snprintf(cmd, sizeof cmd, "info %s", swap);
  CHECK(iosr_tool(sock, cmd, out, sizeof out) == 0 && strstr(out, "clean 1"));
  iosr_test_cleanup();
  printf("daemon: ok\n");
  return 0;
}
