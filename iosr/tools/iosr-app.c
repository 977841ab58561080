/* iosr-app: an app process for the demo and the evaluation (brief: the
 * app-switching workload). It connects to iosrd as APP, fills a region of
 * --size bytes with page contents derived from (name, page), and each time
 * iosrd makes it the foreground app it touches its hot set (--hot percent of
 * its pages, in --pattern order; the time until the last is touched is the
 * switch time), then checks every touched page and prints one line:
 *   switch app=NAME n=K ms=T pages=P mb=M verified=ok|BAD
 * It exits on SIGTERM/SIGINT, and with --stdin also when its standard input
 * reaches end of file (a parent that holds the pipe's write end ends the app
 * by closing it, or by dying).
 *
 *   iosr-app --name NAME --size BYTES [--hot PCT] [--pattern seq|random]
 *            [--socket PATH] [--stdin]
 *   iosr-app --help
 */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/mix.h"
#include "common/opts.h"
#include "iosr.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int fg_pending;
static volatile sig_atomic_t stop;
static uint64_t fg_t0;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}


static void fill_page(uint64_t *p, uint64_t seed, uint64_t page) {
  uint64_t x = iosr_mix(seed ^ (page * 0x9e3779b97f4a7c15ull));
  for (int i = 0; i < 512; i++) {
    x += 0x9e3779b97f4a7c15ull;
    p[i] = iosr_mix(x);
  }
}

static int check_page(const uint64_t *p, uint64_t seed, uint64_t page) {
  uint64_t x = iosr_mix(seed ^ (page * 0x9e3779b97f4a7c15ull));
  for (int i = 0; i < 512; i++) {
    x += 0x9e3779b97f4a7c15ull;
    if (p[i] != iosr_mix(x)) return 0;
  }
  return 1;
}

static void on_fg(iosr_ctx *ctx, int fg, void *arg) {
  (void)ctx;
  (void)arg;
  if (!fg) return;
  pthread_mutex_lock(&mu);
  fg_pending = 1;
  fg_t0 = now_ns();
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
}

static void on_sig(int s) {
  (void)s;
  stop = 1;
  pthread_cond_signal(&cv);
}

static void *stdin_watch(void *arg) {
  (void)arg;
  char b[64];
  while (read(0, b, sizeof b) > 0) {
  }
  stop = 1;
  pthread_mutex_lock(&mu);
  pthread_cond_signal(&cv);
  pthread_mutex_unlock(&mu);
  return NULL;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: iosr-app --name NAME --size BYTES [--hot PCT] [--pattern seq|random] [--socket PATH] [--stdin]\n"
          "A demo app on iosrd: fills a region of BYTES, and at each switch to the foreground touches its hot set\n"
          "(PCT%% of its pages, default 100, in seq or random order) and checks it, printing one `switch` line.\n"
          "--socket: iosrd's socket (default $IOSR_SOCKET); --stdin: also exit when standard input reaches EOF.\n");
}

int main(int argc, char **argv) {
  const char *name = NULL, *sock = NULL, *pattern = "seq";
  uint64_t size = 64u << 20;
  unsigned hot = 100;
  int use_stdin = 0;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--name") && v) name = v, i++;
    else if (!strcmp(argv[i], "--size") && v) {
      if (iosr_parse_size(v, &size) || size < 4096) {
        fprintf(stderr, "iosr-app: bad size '%s'\n", v);
        return 2;
      }
      i++;
    } else if (!strcmp(argv[i], "--hot") && v) hot = (unsigned)atoi(v), i++;
    else if (!strcmp(argv[i], "--pattern") && v) pattern = v, i++;
    else if (!strcmp(argv[i], "--socket") && v) sock = v, i++;
    else if (!strcmp(argv[i], "--stdin")) use_stdin = 1;
    else {
      fprintf(stderr, "iosr-app: unknown or incomplete argument '%s' (iosr-app --help shows the usage)\n", argv[i]);
      return 2;
    }
  }
  if (hot < 1 || hot > 100 || (strcmp(pattern, "seq") && strcmp(pattern, "random"))) {
    fprintf(stderr, "iosr-app: --hot is 1..100, --pattern seq or random\n");
    return 2;
  }
  signal(SIGTERM, on_sig);
  signal(SIGINT, on_sig);
  iosr_connect_opts o = {.app_name = name, .socket_path = sock, .on_foreground = on_fg};
  iosr_ctx *ctx = iosr_connect(&o);
  if (!ctx) {
    fprintf(stderr, "iosr-app: cannot connect to iosrd: %s\n", strerror(errno));
    return 1;
  }
  iosr_region *r = iosr_region_create(ctx, size);
  if (!r) {
    fprintf(stderr, "iosr-app: cannot create a %llu-byte region: %s\n", (unsigned long long)size, strerror(errno));
    return 1;
  }
  uint8_t *base = iosr_region_base(r);
  uint64_t npages = size / 4096, seed = iosr_mix((uint64_t)(uintptr_t)(name ? name[0] : 0) * 131 + npages);
  if (name)
    for (const char *c = name; *c; c++) seed = iosr_mix(seed ^ (uint64_t)(unsigned char)*c);
  for (uint64_t p = 0; p < npages; p++) fill_page((uint64_t *)(base + p * 4096), seed, p);
  uint64_t nhot = npages * hot / 100;
  uint64_t *order = malloc(sizeof *order * (nhot ? nhot : 1));
  for (uint64_t i = 0; i < nhot; i++) order[i] = i;
  if (!strcmp(pattern, "random"))
    for (uint64_t i = nhot; i > 1; i--) {
      uint64_t j = iosr_mix(seed + i) % i, t = order[i - 1];
      order[i - 1] = order[j];
      order[j] = t;
    }
  printf("ready app=%s pages=%llu\n", name ? name : "?", (unsigned long long)npages);
  fflush(stdout);
  if (use_stdin) {
    pthread_t t;
    pthread_create(&t, NULL, stdin_watch, NULL);
  }
  int n = 0;
  for (;;) {
    pthread_mutex_lock(&mu);
    while (!fg_pending && !stop) {
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      ts.tv_sec += 1;
      pthread_cond_timedwait(&cv, &mu, &ts);
    }
    int go = fg_pending;
    uint64_t t0 = fg_t0;
    fg_pending = 0;
    pthread_mutex_unlock(&mu);
    if (stop) break;
    if (!go) continue;
    iosr_app_stats s0, s1;
    iosr_stats(ctx, &s0);
    /* the switch: the hot set touched in pattern order (timed); then every
     * touched page checked (not timed: it is the demo's check, not app work) */
    volatile uint64_t sink = 0;
    for (uint64_t i = 0; i < nhot; i++) sink += *(volatile const uint64_t *)(base + order[i] * 4096);
    uint64_t t1 = now_ns();
    (void)sink;
    iosr_stats(ctx, &s1);
    int ok = 1;
    for (uint64_t i = 0; i < nhot; i++) ok &= check_page((const uint64_t *)(base + order[i] * 4096), seed, order[i]);
    printf("switch app=%s n=%d ms=%.2f pages=%llu mb=%.1f reads=%llu verified=%s\n", name ? name : "?", ++n,
           (double)(t1 - t0) / 1e6, (unsigned long long)nhot,
           (double)(s1.swapin_bytes - s0.swapin_bytes) / 1e6, (unsigned long long)(s1.read_reqs - s0.read_reqs),
           ok ? "ok" : "BAD");
    fflush(stdout);
  }
  iosr_region_destroy(r);
  iosr_disconnect(ctx);
  free(order);
  return 0;
}
