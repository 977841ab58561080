/* SIGKILL of iosrd during a reclaim, then a restart (issue 22): every drop
 * the dead daemon asked for is either confirmed to the new one or undone, and
 * the app's pages all come back as they were.
 *
 *   running    the daemon dies with one drop about to run and more queued in
 *              the app: the running one completes against the new daemon,
 *              the queued ones never run
 *   confirm    the daemon dies with one drop done but not yet confirmed and
 *              more queued
 *   confirm-after-resume
 *              the same, and the dropper answers the new daemon once the app
 *              has resumed: a drop that moved pages the dead daemon named
 *              (moveout=1) is settled from the kernel's pagemap
 *   moving     the daemon dies while a dropper that moves holds its answer
 *              (drop gate stage 4) and moves the named pages while no
 *              daemon runs (design note section 3, "Moved by the dropper")
 *
 * SETTINGS (k=v,...) are added to iosrd's: with moveout=0 the drops are of
 * the app's pages (the dropper's path), else of its graveyard (pages moved
 * out: a new daemon discards what the old one left there).
 *
 * The app is a child process (its dropper held by the test hook, gate.h);
 * the test kills and restarts iosrd and has the app check every page. */
#include "gate.h"
#include "util.h"
#include "uffd/uffd.h"

#include <poll.h>

#define NPAGES 2048u

static char sock[300], swap[256];

static int get_int(iosr_ctx *ctx, int *field) {
  pthread_mutex_lock(&ctx->mu);
  int v = *field;
  pthread_mutex_unlock(&ctx->mu);
  return v;
}

static int queued(iosr_ctx *ctx) {
  pthread_mutex_lock(&ctx->mu);
  int v = (int)ctx->dq_n;
  pthread_mutex_unlock(&ctx->mu);
  return v;
}

static int verify(const uint8_t *p) {
  alarm(120); /* a read that hangs is a failure */
  int bad = 0;
  for (uint64_t i = 0; i < NPAGES; i++) bad += !iosr_check(p + i * 4096, 91, i, 0);
  alarm(0);
  if (bad) fprintf(stderr, "app: %d pages hold other bytes\n", bad);
  return bad;
}

static void app(int phase, int late, const char *log, int in, int out) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region("victim", sock, NPAGES, 91, &ctx, &r);
  if (phase == 4 && !(ctx->grave && (ctx->features & UFFD_FEATURE_MOVE))) {
    chan_send(out, 's'); /* the dropper does not move here */
    _exit(0);
  }
  gate_close(phase);
  chan_send(out, 'r');
  /* held: one drop at the gate, at least two more queued behind it */
  gate_wait(120);
  int i = 0;
  for (; i < 12000 && queued(ctx) < 2; i++) usleep(10000);
  CHECK(queued(ctx) >= 2, "only %d drops queued behind the held one", queued(ctx));
  chan_send(out, 'h');
  CHECK(chan_recv(in) == 'g'); /* the daemon is dead */
  for (i = 0; i < 12000 && get_int(ctx, &ctx->connected); i++) usleep(10000);
  CHECK(!get_int(ctx, &ctx->connected), "the agent did not see the daemon die");
  if (!late) gate_open();
  for (;;) {
    char c = chan_recv(in);
    if (late) {
      for (i = 0; i < 12000 && !get_int(ctx, &ctx->connected); i++) usleep(10000);
      CHECK(get_int(ctx, &ctx->connected), "the app did not resume");
      gate_open();
      late = 0;
    }
    if (c == 'v') chan_send(out, verify(p) ? 'x' : 'o');
    else break;
  }
  CHECK(iosr_region_destroy(r) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  _exit(0);
}

static void reclaim_in_background(void) {
  pid_t t = fork();
  CHECK(t >= 0);
  if (t == 0) {
    char out[256];
    _exit(iosr_tool(sock, "reclaim victim", out, sizeof out));
  }
}

static void reclaim_all(void) {
  char out[512];
  for (int i = 0; i < 500; i++) {
    if (iosr_tool(sock, "reclaim victim", out, sizeof out) == 0) return;
    usleep(20000); /* the restart grace period */
  }
  FAIL("reclaim victim: %s", out);
}

int main(int argc, char **argv) {
  const char *k = argc >= 2 ? argv[1] : "";
  int phase = !strcmp(k, "running") ? 0 : !strcmp(k, "confirm") || !strcmp(k, "confirm-after-resume") ? 1
            : !strcmp(k, "moving")  ? 4
                                    : -1;
  if (argc < 2 || argc > 3 || phase < 0) {
    fprintf(stderr, "usage: test_restart running|confirm|confirm-after-resume|moving [SETTINGS]\n");
    return 2;
  }
  iosr_test_require();
  int late = !strcmp(k, "confirm-after-resume");
  char log[300], dlog[300];
  char set[160];
  snprintf(set, sizeof set, "restart_grace_ms=300,reclaim_batch=64%s%s", argc == 3 ? "," : "", argc == 3 ? argv[2] : "");
  pid_t d = iosr_test_start_daemon(swap, 32u << 20, sock, set, dlog);
  iosr_test_path(log, sizeof log, "app.log");
  int to, from;
  pid_t a = iosr_test_fork(&to, &from);
  if (a == 0) app(phase, late, log, from, to);
  char c0 = chan_recv(from);
  if (c0 == 's') return gate_skip_no_move(a, d);
  CHECK(c0 == 'r');
  reclaim_in_background();
  CHECK(chan_recv(from) == 'h', "the app did not get its drops held (see %s)", log);
  kill(d, SIGKILL);
  waitpid(d, NULL, 0);
  chan_send(to, 'g');
  d = iosr_test_daemon(swap, sock, set, dlog);
  chan_send(to, 'v');
  struct pollfd pf = {from, POLLIN, 0};
  CHECK(poll(&pf, 1, 180000) == 1, "the app did not answer after the restart");
  CHECK(chan_recv(from) == 'o', "pages lost across the restart (see %s)", log);
  reclaim_all();
  chan_send(to, 'v');
  CHECK(chan_recv(from) == 'o', "pages lost after the restart's reclaim (see %s)", log);
  chan_send(to, 'q');
  int st = wait_child(a, 120, "the app");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  iosr_test_stop_daemon(d);
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
  iosr_test_cleanup();
  printf("restart (%s): every page intact after iosrd died with drops running and queued\n", argv[1]);
  return 0;
}
