/* An app that does not answer its drops (here stopped with SIGSTOP, as a
 * cgroup freezer or a debugger stops it) holds up no other app's reclaim
 * and not `iosr idle` (design note section 9, "An app that does not answer
 * its drops"), and loses nothing once it runs again.
 *
 *   test_drop_stall fits|graveyard-full
 *
 * fits: two apps of 512 pages each; `frozen` is stopped, then reclaimed:
 * iosrd writes its pages and asks its dropper for them, which cannot answer.
 * With reclaim_inflight=2 and batches of 64 pages, that reclaim's batches
 * would fill every place in flight: the reclaim of `other` and `iosr idle`
 * must still end, and `other`'s pages be swapped out. Then `frozen` runs
 * again: a reclaim of it swaps out all its pages, and both apps read every
 * page back.
 * graveyard-full: the same with `frozen` 4,096 pages larger than its
 * graveyard (IOSR_GRAVE_PAGES) and more batches in flight (256 pages, 128
 * of them) than the graveyard holds: the batches after the graveyard is
 * full wait for room only the app's answers make, and keep their pages
 * resident once its first batch is set aside. Every wait is bounded (60 s:
 * a hang). */
#include "common/beacon.h"
#include "gate.h"
#include "util.h"

#define NPAGES 512u

static uint64_t frozen_pages = NPAGES; /* graveyard-full: IOSR_GRAVE_PAGES + 4,096 */

static char sock[300], swap[256];
static pid_t apps[2];

/* A failed check must not leave an app stopped (it holds CTest's output). */
static void kill_apps(void) {
  for (int i = 0; i < 2; i++)
    if (apps[i] > 0) kill(apps[i], SIGKILL);
}

static void app(const char *name, uint64_t seed, uint64_t npages, int in, int out) {
  iosr_ctx *ctx;
  iosr_region *r;
  uint8_t *p = iosr_test_filled_region(name, sock, npages, seed, &ctx, &r);
  chan_send(out, 'r');
  CHECK(chan_recv(in) == 'c');
  for (uint64_t i = 0; i < npages; i++) CHECK(iosr_check(p + i * 4096, seed, i, 0), "%s: page %llu", name, (unsigned long long)i);
  CHECK(iosr_region_destroy(r) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  _exit(0);
}

/* `iosr ARGS`, its output in file `out`, in a child waited for at most 60 s. */
static int tool_bounded(const char *args, const char *what, char *out, size_t cap) {
  char file[300], cmd[600];
  snprintf(file, sizeof file, "%s/tool.out", iosr_test_dir);
  snprintf(cmd, sizeof cmd, "%s > %s", args, file);
  pid_t t = fork();
  CHECK(t >= 0);
  if (t == 0) _exit(iosr_tool(sock, cmd, NULL, 0));
  int st = wait_child(t, 60, what);
  FILE *f = fopen(file, "r");
  size_t n = f ? fread(out, 1, cap - 1, f) : 0;
  out[n] = 0;
  if (f) fclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

int main(int argc, char **argv) {
  int full = argc == 2 && !strcmp(argv[1], "graveyard-full");
  if (argc != 2 || (!full && strcmp(argv[1], "fits"))) {
    fprintf(stderr, "usage: test_drop_stall fits|graveyard-full\n");
    return 2;
  }
  if (full) frozen_pages = IOSR_GRAVE_PAGES + 4096;
  iosr_test_require();
  char dlog[300], out[4096];
  pid_t d = iosr_test_start_daemon(swap, (32u << 20) + (size_t)frozen_pages * 4096 * 5 / 4, sock,
                                   full ? "restart_grace_ms=300,drop_stall_ms=500,reclaim_inflight=128"
                                        : "restart_grace_ms=300,reclaim_batch=64,reclaim_inflight=2,drop_stall_ms=500",
                                   dlog);
  int to_f, from_f, to_o, from_o;
  pid_t f = iosr_test_fork(&to_f, &from_f);
  if (f == 0) app("frozen", 31, frozen_pages, from_f, to_f);
  pid_t o = iosr_test_fork(&to_o, &from_o);
  if (o == 0) app("other", 32, NPAGES, from_o, to_o);
  apps[0] = f, apps[1] = o;
  atexit(kill_apps);
  CHECK(chan_recv(from_f) == 'r' && chan_recv(from_o) == 'r');
  CHECK(kill(f, SIGSTOP) == 0);
  int st;
  CHECK(waitpid(f, &st, WUNTRACED) == f && WIFSTOPPED(st));

  int rc = tool_bounded("reclaim frozen", "the reclaim of the stopped app", out, sizeof out);
  CHECK(rc != 0 && strstr(out, "timed out"), "reclaim of the stopped app: exit %d, '%s' (see %s)", rc, out, dlog);
  rc = tool_bounded("reclaim other", "the reclaim of the other app (held up by the stopped one?)", out, sizeof out);
  CHECK(rc == 0 && strstr(out, "reclaimed 2048 KiB"), "reclaim of the other app: exit %d, '%s'", rc, out);
  rc = tool_bounded("idle", "iosr idle (held up by the stopped app?)", out, sizeof out);
  CHECK(rc == 0, "iosr idle: exit %d, '%s'", rc, out);

  CHECK(kill(f, SIGCONT) == 0);
  rc = tool_bounded("idle", "iosr idle once the app runs again", out, sizeof out);
  CHECK(rc == 0, "iosr idle: exit %d, '%s'", rc, out);
  /* what the unanswered reclaim passed by goes now: once the app has
   * answered its set-aside drops (it does so after SIGCONT, at its own pace;
   * until then a reclaim of it takes nothing and answers ETIMEDOUT) */
  for (int tries = 0;; tries++) {
    rc = tool_bounded("reclaim frozen", "the reclaim of the app once it runs again", out, sizeof out);
    if (rc == 0 || !strstr(out, "timed out") || tries == 600) break;
    usleep(100 * 1000); /* at most a minute: a hang */
  }
  CHECK(rc == 0, "reclaim of the app running again: exit %d, '%s'", rc, out);
  static char js[1 << 16];
  rc = tool_bounded("stat --json", "iosr stat", js, sizeof js);
  char *fa = strstr(js, "\"name\":\"frozen\""), *sw = fa ? strstr(fa, "\"swapped_pages\":") : NULL;
  CHECK(rc == 0 && sw && strtoull(sw + 16, NULL, 10) == frozen_pages, "the app's pages did not go out once it ran: %.300s",
        fa ? fa : js);
  char *nr = strstr(js, "\"no_room_runs\":");
  CHECK(!full || (nr && strtoull(nr + 15, NULL, 10) > 0), "graveyard-full: no batch waited for graveyard room: %.200s",
        nr ? nr : js);
  chan_send(to_f, 'c');
  chan_send(to_o, 'c');
  st = wait_child(f, 60, "the stopped app");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the stopped app ended with status %#x", st);
  st = wait_child(o, 60, "the other app");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the other app ended with status %#x", st);
  apps[0] = apps[1] = 0;
  iosr_test_stop_daemon(d);
  iosr_test_cleanup();
  printf("drop_stall %s: the reclaim of a stopped app of %llu pages ended unanswered; another app's reclaim (512 "
         "pages) and iosr idle went on; the stopped app's pages went out once it ran again, and every page read back\n",
         argv[1], (unsigned long long)frozen_pages);
  return 0;
}
