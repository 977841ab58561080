/* Daemon death (issue 5, "Must be shown"): iosrd is killed (SIGKILL) while an
 * app has pages swapped out. The app never reads a swapped page as zero: the
 * touching thread blocks, the library says so loudly on stderr, and a
 * restarted iosrd on the same swap area resumes serving it from its slots (all
 * pages checked). If no daemon comes back within IOSR_RECONNECT_MS, the app
 * aborts rather than read zero. */
#include "util.h"
#include <poll.h>


#define NPAGES 512u

static char sock[300], swap[256];

static pid_t app(const char *name, const char *log, const char *reconnect_ms, int *to, int *from) {
  int in, out;
  pid_t pid = iosr_test_fork(to, from);
  if (pid) return pid;
  in = *from;
  out = *to;
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  if (reconnect_ms) setenv("IOSR_RECONNECT_MS", reconnect_ms, 1);
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region(name, sock, NPAGES, 9, &ctx, &r);
  chan_send(out, 'r');
  for (;;) {
    char c = chan_recv(in);
    if (c == 't') { /* touch one swapped page */
      chan_send(out, iosr_check(p + 100 * 4096, 9, 100, 0) ? 'o' : 'x');
    } else if (c == 'v') {
      int ok = 1;
      for (uint64_t i = 0; i < NPAGES; i++) ok &= iosr_check(p + i * 4096, 9, i, 0);
      chan_send(out, ok ? 'o' : 'x');
    } else {
      break;
    }
  }
  CHECK(iosr_region_destroy(r) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  _exit(0);
}

static int readable_within(int fd, int ms) {
  struct pollfd pf = {fd, POLLIN, 0};
  return poll(&pf, 1, ms) > 0;
}

static int file_has(const char *path, const char *needle) {
  char buf[8192] = "";
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  size_t n = fread(buf, 1, sizeof buf - 1, f);
  buf[n] = 0;
  fclose(f);
  return strstr(buf, needle) != NULL;
}

static void reclaim_all(const char *name) {
  char out[512], args[128];
  snprintf(args, sizeof args, "reclaim %s", name);
  /* right after a dirty restart, new slots wait for the grace period */
  for (int i = 0; i < 200; i++) {
    if (iosr_tool(sock, args, out, sizeof out) == 0) return;
    usleep(20000);
  }
  FAIL("reclaim %s: %s", name, out);
}

int main(void) {
  iosr_test_require();
  char log1[300], log2[300], dlog[300];
  pid_t d = iosr_test_start_daemon(swap, 16u << 20, sock, NULL, dlog);
  iosr_test_path(log1, sizeof log1, "victim.log");
  iosr_test_path(log2, sizeof log2, "orphan.log");
  int to, from;
  pid_t v = app("victim", log1, NULL, &to, &from);
  CHECK(chan_recv(from) == 'r');
  reclaim_all("victim");
  /* the daemon dies with 512 pages swapped out */
  kill(d, SIGKILL);
  waitpid(d, NULL, 0);
  chan_send(to, 't');
  /* the touching thread must block: it cannot be answered without a daemon */
  CHECK(!readable_within(from, 400), "a swapped page was read without a daemon");
  CHECK(file_has(log1, "died with 512 pages of app victim swapped out"), "no loud message in the app's stderr");
  /* restart: the app resumes from the intact swap area */
  d = iosr_test_daemon(swap, sock, NULL, dlog);
  CHECK(readable_within(from, 20000), "the app did not resume");
  CHECK(chan_recv(from) == 'o');
  chan_send(to, 'v');
  CHECK(chan_recv(from) == 'o');
  CHECK(file_has(log1, "resumed"));
  /* and it keeps working: swapped out again and back */
  reclaim_all("victim");
  chan_send(to, 'v');
  CHECK(chan_recv(from) == 'o');
  chan_send(to, 'q');
  int st;
  waitpid(v, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);

  /* no daemon comes back: the app aborts instead of reading zero */
  v = app("orphan", log2, "300", &to, &from);
  CHECK(chan_recv(from) == 'r');
  reclaim_all("orphan");
  kill(d, SIGKILL);
  waitpid(d, NULL, 0);
  chan_send(to, 't');
  waitpid(v, &st, 0);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT, "orphan ended with status %d", st);
  CHECK(!readable_within(from, 0) || chan_recv(from) != 'x');
  CHECK(file_has(log2, "aborting"));
  iosr_test_cleanup();
  printf("death: blocked without a daemon, resumed after a restart, aborted when none came back\n");
  return 0;
}
