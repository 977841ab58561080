/* The app's callbacks run on a thread of libiosr's own (client/notify.c),
 * never on the agent, which delivers iosrd's answers to the dropper (design
 * note section 3, "Moved by the dropper"): while the dropper moves pages,
 * iosrd serves none of the app's faults, so a callback that touches the
 * app's regions on the agent would wait for an answer the agent itself
 * must deliver.
 *
 *   test_callbacks
 *
 * The dropper is held before its drop mark (drop gate stage 2); `iosr fg`
 * runs the app's on_foreground, which lets the dropper go on, waits until
 * it holds iosrd's answer (stage 4: iosrd reads none of the app's events
 * now), lets it move, and reads a page of the app that is swapped out. The
 * answer must reach the dropper while the callback runs, and the read must
 * return the page's bytes. Every wait is bounded (60 s: a hang). */
#include "gate.h"
#include "util.h"
#include "uffd/uffd.h"

#define NPAGES 256u

static char sock[300], swap[256];
static uint8_t *swapped_region;
static volatile int cb_state; /* 1: in the callback, 2: its read returned the bytes, 3: other bytes */

static void on_fg(iosr_ctx *c, int fg, void *arg) {
  (void)c, (void)arg;
  if (!fg || cb_state) return;
  cb_state = 1;
  gate_move(4);
  gate_wait(60); /* the dropper has iosrd's answer */
  gate_open();
  const uint8_t *q = swapped_region + 5 * 4096;
  cb_state = iosr_check(q, 91, 5, 0) ? 2 : 3;
}

static void app(const char *log, int in, int out) {
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  iosr_connect_opts o = {.app_name = "victim", .socket_path = sock, .on_foreground = on_fg};
  iosr_ctx *ctx = iosr_connect(&o);
  CHECK(ctx);
  iosr_region *a = iosr_region_create(ctx, NPAGES * 4096), *b = iosr_region_create(ctx, NPAGES * 4096);
  CHECK(a && b);
  swapped_region = iosr_region_base(a);
  uint8_t *r2 = iosr_region_base(b);
  for (uint64_t i = 0; i < NPAGES; i++) iosr_fill(swapped_region + i * 4096, 91, i, 0), iosr_fill(r2 + i * 4096, 92, i, 0);
  chan_send(out, 'r');
  CHECK(chan_recv(in) == 'a'); /* all swapped out */
  if (!(ctx->features & UFFD_FEATURE_MOVE) || !ctx->grave) {
    chan_send(out, 's');
    _exit(0);
  }
  for (uint64_t i = 0; i < NPAGES; i++) iosr_fill(r2 + i * 4096, 92, i, 1); /* b resident again: a drop to come */
  gate_close(2);
  chan_send(out, 'b');
  gate_wait(60);
  chan_send(out, 'h');
  for (int i = 0; i < 6000 && cb_state < 2; i++) usleep(10000);
  chan_send(out, cb_state == 2 ? 'o' : cb_state == 3 ? 'w' : 'x');
  CHECK(chan_recv(in) == 'q');
  for (uint64_t i = 0; i < NPAGES; i++)
    CHECK(iosr_check(swapped_region + i * 4096, 91, i, 0) && iosr_check(r2 + i * 4096, 92, i, 1), "page %llu",
          (unsigned long long)i);
  CHECK(iosr_region_destroy(a) == 0 && iosr_region_destroy(b) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  _exit(0);
}

int main(void) {
  iosr_test_require();
  char log[300], dlog[300], out[4096];
  pid_t d = iosr_test_start_daemon(swap, 32u << 20, sock, "restart_grace_ms=300,reclaim_batch=64", dlog);
  iosr_test_path(log, sizeof log, "app.log");
  int to, from;
  pid_t a = iosr_test_fork(&to, &from);
  if (a == 0) app(log, from, to);
  CHECK(chan_recv(from) == 'r');
  CHECK(iosr_tool(sock, "reclaim victim", out, sizeof out) == 0);
  CHECK(iosr_tool(sock, "idle", out, sizeof out) == 0);
  chan_send(to, 'a');
  char c = chan_recv(from);
  if (c == 's') return gate_skip_no_move(a, d);
  CHECK(c == 'b');
  pid_t t = fork();
  CHECK(t >= 0);
  if (t == 0) _exit(iosr_tool(sock, "reclaim victim", out, sizeof out));
  CHECK(chan_recv(from) == 'h'); /* a drop of b held before its mark */
  CHECK(iosr_tool(sock, "fg victim", out, sizeof out) == 0);
  char res = chan_recv(from);
  CHECK(res == 'o', "%s (see %s)",
        res == 'x'   ? "the callback did not return within 60 s"
        : res == 'w' ? "the callback read other bytes from a swapped page"
                     : "the app failed: no answer reached the dropper while the callback ran?",
        log);
  chan_send(to, 'q');
  int st = wait_child(a, 60, "the app");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the app ended with status %#x (see %s)", st, log);
  wait_child(t, 60, "the reclaim");
  iosr_test_stop_daemon(d);
  iosr_test_cleanup();
  printf("callbacks: on_foreground ran while the dropper moved a drop; the dropper got iosrd's answer meanwhile, "
         "and the callback's read of a swapped page returned its bytes\n");
  return 0;
}
