/* iosr: make swap areas and control iosrd.
 *
 *   iosr mkswap PATH --size N [--force] [--label L]
 *   iosr info PATH
 *   iosr fg APP | --none
 *   iosr reclaim APP | --background [--bytes N]
 *   iosr stat [--json | APP]
 *   iosr set KEY VALUE
 *   iosr slots APP
 *   iosr idle
 * Control commands take --socket PATH (default: IOSR_SOCKET, README).
 * Exit status 0 on success, 1 with a one-line message otherwise, 2 on usage.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "common/env.h"
#include "common/log.h"
#include "common/opts.h"
#include "common/proto.h"
#include "iosr.h"
#include "swaparea/format.h"

static void usage(FILE *f) {
  fprintf(f,
          "usage: iosr mkswap PATH --size N [--force] [--label L]   format a swap area\n"
          "       iosr info PATH                                   show a swap area's header\n"
          "       iosr fg APP | --none                             make APP the foreground app\n"
          "       iosr reclaim APP|--background [--bytes N]        swap out an app (all by default)\n"
          "       iosr stat [--json | APP]                         statistics\n"
          "       iosr set KEY VALUE                               change an option at run time\n"
          "       iosr slots APP                                   an app's slot map (address slot)\n"
          "       iosr idle                                        wait until no swap I/O is pending\n"
          "options: --socket PATH (default $IOSR_SOCKET, /run/iosrd.sock as root, /tmp/iosrd-UID.sock)\n"
          "APP: a name, #PID, or #id:N\n");
}

/* Bad usage: one line naming the problem, exit status 2. */
static int bad_usage(const char *cmd, const char *arg) {
  if (arg) fprintf(stderr, "iosr %s: unexpected argument '%s' (iosr --help shows the usage)\n", cmd, arg);
  else fprintf(stderr, "iosr %s: missing argument (iosr --help shows the usage)\n", cmd);
  return 2;
}

static int fail(const char *what) {
  fprintf(stderr, "iosr: %s: %s\n", what, strerror(errno));
  return 1;
}

static iosr_ctl *open_ctl(const char *sock) {
  iosr_ctl *c = iosr_ctl_open(sock);
  if (!c) {
    if (errno == EACCES) fprintf(stderr, "iosr: refused by iosrd (wrong uid)\n");
    else fprintf(stderr, "iosr: cannot reach iosrd%s%s: %s\n", sock ? " at " : "", sock ? sock : "", strerror(errno));
  }
  return c;
}

static void print_stats(const iosr_app_stats *s) {
  uint64_t reqs = s->read_reqs;
  double avg = reqs ? (double)s->read_bytes / (double)reqs / 1024 : 0;
  double mbps = s->swapin_busy_ns ? (double)s->swapin_bytes / 1e6 / ((double)s->swapin_busy_ns / 1e9) : 0;
  double waste = s->ra_needed_pages ? (double)s->ra_read_pages / (double)s->ra_needed_pages : 0;
  printf("%-20s %7d %2s %10llu %10llu %9llu %8llu %6u %7.2f %8llu %8.1f %9.1f %8.3f %8.3f\n", s->name, s->pid,
         s->foreground ? "fg" : s->forked ? "fk" : "bg", (unsigned long long)s->resident_pages,
         (unsigned long long)s->swapped_pages, (unsigned long long)s->faults, (unsigned long long)s->major_faults,
         s->ra_window, waste, (unsigned long long)reqs, avg, mbps, s->lat_p50_ns / 1e6, s->lat_p99_ns / 1e6);
}

static void print_header(void) {
  printf("%-20s %7s %2s %10s %10s %9s %8s %6s %7s %8s %8s %9s %8s %8s\n", "app", "pid", "", "resident", "swapped",
         "faults", "major", "window", "rd/need", "reads", "avgKiB", "in-MB/s", "p50-ms", "p99-ms");
}

/* A number after key in the engine's JSON, 0 when absent. */
static unsigned long long json_num(const char *js, const char *key) {
  const char *p = strstr(js, key);
  return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* The budget line under the table (design note section 9, "Memory budget"):
 * resident pages now and the most ever over the budget. */
static void print_budget(const char *js) {
  unsigned long long budget = json_num(js, "\"budget_bytes\":");
  if (!budget) return;
  printf("budget %llu KiB: resident %llu KiB, charged %llu KiB, peak over the budget %llu KiB, "
         "%llu faults held, %llu KiB served past it\n",
         budget >> 10, json_num(js, "\"resident_pages\":") * 4, json_num(js, "\"charged_pages\":") * 4,
         json_num(js, "\"over_peak_pages\":") * 4, json_num(js, "\"held_faults\":"),
         json_num(js, "\"overrun_pages\":") * 4);
}

/* iosr mkswap PATH --size N [--force] [--label L]: formats a swap area. */
static int cmd_mkswap(int n, char **args, const char *sock) {
  (void)sock; /* the area itself, not through iosrd */
  const char *cmd = args[0];
  const char *path = NULL, *label = NULL;
  uint64_t size = 0;
  int force = 0, have_size = 0;
  for (int i = 1; i < n; i++) {
    if (!strcmp(args[i], "--force")) force = 1;
    else if (!strcmp(args[i], "--size") && i + 1 < n) {
      if (iosr_parse_size(args[++i], &size)) {
        fprintf(stderr, "iosr: bad size '%s' (e.g. 512M, 4G)\n", args[i]);
        return 2;
      }
      have_size = 1;
    } else if (!strcmp(args[i], "--label") && i + 1 < n) label = args[++i];
    else if (!strcmp(args[i], "--size") || !strcmp(args[i], "--label")) {
      fprintf(stderr, "iosr %s: %s needs a value\n", cmd, args[i]);
      return 2;
    }
    else if (!path && args[i][0] != '-') path = args[i];
    else return bad_usage(cmd, args[i]);
  }
  if (!path) return bad_usage(cmd, NULL);
  struct stat st;
  if (!have_size && (stat(path, &st) || !S_ISBLK(st.st_mode))) {
    fprintf(stderr, "iosr: mkswap on a file needs --size N (e.g. --size 1G)\n");
    return 2;
  }
  char err[256];
  if (iosr_mkswap(path, size, label, force, err, sizeof err)) {
    fprintf(stderr, "iosr: %s\n", err);
    return 1;
  }
  iosr_swap_header h;
  if (iosr_swap_read_header(path, &h, err, sizeof err) == 0)
    printf("%s: IOSR swap area, %llu slots (%llu MiB)\n", path, (unsigned long long)h.slots,
           (unsigned long long)(h.slots * 4096 >> 20));
  return 0;
}

/* iosr info PATH: a swap area's header. */
static int cmd_info(int n, char **args, const char *sock) {
  (void)sock;
  const char *cmd = args[0];
  if (n != 2) return bad_usage(cmd, n > 2 ? args[2] : NULL);
  iosr_swap_header h;
  char err[256];
  if (iosr_swap_read_header(args[1], &h, err, sizeof err)) {
    fprintf(stderr, "iosr: %s\n", err);
    return 1;
  }
  printf("path %s\nversion %u\npage_size %u\nslots %llu\nclean %u\nlabel %s\nuuid ", args[1], h.version,
         h.page_size, (unsigned long long)h.slots, h.clean, h.label);
  for (int i = 0; i < 16; i++) printf("%02x%s", h.uuid[i], i == 3 || i == 5 || i == 7 || i == 9 ? "-" : "");
  printf("\n");
  return 0;
}

/* iosr fg APP | --none: makes APP the foreground app. */
static int cmd_fg(int n, char **args, const char *sock) {
  const char *cmd = args[0];
  if (n != 2) return bad_usage(cmd, n > 2 ? args[2] : NULL);
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  int r = iosr_ctl_foreground(c, strcmp(args[1], "--none") ? args[1] : "");
  iosr_ctl_close(c);
  return r ? fail(args[1]) : 0;
}

/* iosr reclaim APP | --background [--bytes N]: swaps an app out. */
static int cmd_reclaim(int n, char **args, const char *sock) {
  const char *cmd = args[0];
  const char *app = NULL;
  uint64_t bytes = 0;
  for (int i = 1; i < n; i++) {
    if (!strcmp(args[i], "--bytes") && i + 1 < n) {
      if (iosr_parse_size(args[++i], &bytes)) {
        fprintf(stderr, "iosr: bad size '%s'\n", args[i]);
        return 2;
      }
    } else if (!app) app = args[i];
    else return bad_usage(cmd, args[i]);
  }
  if (!app) return bad_usage(cmd, NULL);
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  uint64_t got = 0;
  int r = iosr_ctl_reclaim(c, app, bytes, &got);
  iosr_ctl_close(c); /* keeps errno */
  if (r) {
    if (errno == ENOSPC) fprintf(stderr, "iosr: swap area full: %llu bytes swapped out, the rest stays resident\n",
                             (unsigned long long)got);
    else fail(app);
    return 1;
  }
  printf("reclaimed %llu KiB\n", (unsigned long long)(got >> 10));
  return 0;
}

/* iosr stat [--json | APP]: statistics, as a table or the engine's JSON. */
static int cmd_stat(int n, char **args, const char *sock) {
  const char *cmd = args[0];
  int json = 0;
  const char *app = NULL;
  for (int i = 1; i < n; i++) {
    if (!strcmp(args[i], "--json")) json = 1;
    else if (!app) app = args[i];
    else return bad_usage(cmd, args[i]);
  }
  if (json && app) {
    /* The JSON is the engine's whole document; one app's figures are the table's row. */
    fprintf(stderr, "iosr stat: --json prints every app; give either --json or APP\n");
    return 2;
  }
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  if (json) {
    char *s = iosr_ctl_stat_json(c);
    iosr_ctl_close(c);
    if (!s) return fail("stat");
    fputs(s, stdout);
    free(s);
    return 0;
  }
  iosr_app_stats st;
  if (app) {
    /* one app, by name, #PID or #id:N; one that does not exist fails as `fg` and `reclaim` do */
    int r = iosr_ctl_app_stats(c, app, &st);
    iosr_ctl_close(c); /* keeps errno */
    if (r) return fail(app);
    print_header();
    print_stats(&st);
    return 0;
  }
  char *s = iosr_ctl_stat_json(c);
  if (!s) {
    iosr_ctl_close(c);
    return fail("stat");
  }
  print_header();
  /* names from the JSON, figures from the per-app call */
  for (char *p = strstr(s, "\"apps\":["); p && (p = strstr(p, "{\"name\":\"")); p++) {
    p += 9;
    char name[IOSR_NAME_MAX * 2];
    size_t k = 0;
    while (*p && *p != '"' && k < sizeof name - 1) name[k++] = *p++;
    name[k] = 0;
    if (iosr_ctl_app_stats(c, name, &st) == 0) print_stats(&st);
  }
  print_budget(s);
  free(s);
  iosr_ctl_close(c);
  return 0;
}

/* iosr set KEY VALUE: changes a run-time option. KEY as the options table
 * names it (ra_max) or as the environment does (IOSR_RA_MAX, RA_MAX): the
 * README lists the variables, so both spellings reach the same option. */
static int cmd_set(int n, char **args, const char *sock) {
  const char *cmd = args[0];
  if (n != 3) return bad_usage(cmd, n > 3 ? args[3] : NULL);
  /* the request carries both in fixed fields (common/proto.h): what does not
   * fit is bad usage here, not a silent refusal by iosr_ctl_set */
  char key[sizeof((iosr_m_set *)0)->key];
  const size_t value_cap = sizeof((iosr_m_set *)0)->value;
  const char *k = strncasecmp(args[1], "IOSR_", 5) == 0 ? args[1] + 5 : args[1];
  size_t len = strlen(k);
  if (len == 0 || len >= sizeof key) {
    fprintf(stderr, "iosr set: bad option name '%s' (1 to %zu characters)\n", args[1], sizeof key - 1);
    return 2;
  }
  if (strlen(args[2]) >= value_cap) {
    fprintf(stderr, "iosr set: value of %s longer than %zu characters\n", args[1], value_cap - 1);
    return 2;
  }
  for (size_t i = 0; i <= len; i++) key[i] = (char)tolower((unsigned char)k[i]);
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  /* a failure is one line from iosr_ctl_set: iosrd's reason when it
   * refused, errno's text when no reply came (only the call knows which) */
  int r = iosr_ctl_set(c, key, args[2]);
  iosr_ctl_close(c);
  return r ? 1 : 0;
}

/* iosr slots APP: an app's slot map. */
static int cmd_slots(int n, char **args, const char *sock) {
  const char *cmd = args[0];
  if (n != 2) return bad_usage(cmd, n > 2 ? args[2] : NULL);
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  iosr_slot_entry *v;
  size_t k;
  int r = iosr_ctl_slot_map(c, args[1], &v, &k);
  iosr_ctl_close(c);
  if (r) return fail(args[1]);
  for (size_t i = 0; i < k; i++) printf("%#llx %llu\n", (unsigned long long)v[i].addr, (unsigned long long)v[i].slot);
  free(v);
  return 0;
}

/* iosr idle: waits until no swap I/O is pending. */
static int cmd_idle(int n, char **args, const char *sock) {
  (void)n; /* extra arguments are ignored */
  (void)args;
  iosr_ctl *c = open_ctl(sock);
  if (!c) return 1;
  int r = iosr_ctl_wait_idle(c);
  iosr_ctl_close(c);
  return r ? fail("idle") : 0;
}

/* The commands: each gets the arguments after --socket was taken out
 * (args[0] is the command's name) and returns the exit status. */
static const struct command {
  const char *name;
  int (*run)(int n, char **args, const char *sock);
} commands[] = {
    {"mkswap", cmd_mkswap}, {"info", cmd_info}, {"fg", cmd_fg},       {"reclaim", cmd_reclaim},
    {"stat", cmd_stat},     {"set", cmd_set},   {"slots", cmd_slots}, {"idle", cmd_idle},
};

int main(int argc, char **argv) {
  int level = iosr_log_parse(iosr_env("LOG"));
  iosr_log_init("iosr", level >= 0 ? level : IOSR_LOG_WARN);
  char env_err[256];
  if (iosr_env_check(env_err, sizeof env_err)) {
    fprintf(stderr, "iosr: %s\n", env_err);
    return 1;
  }
  const char *sock = NULL;
  /* pull out --socket anywhere */
  int n = 0;
  char *args[64];
  for (int i = 1; i < argc && n < 63; i++) {
    if (!strcmp(argv[i], "--socket") && i + 1 < argc) sock = argv[++i];
    else if (!strncmp(argv[i], "--socket=", 9)) sock = argv[i] + 9;
    else if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout); /* also after a command: `iosr stat --help` */
      return 0;
    } else args[n++] = argv[i];
  }
  if (!n) {
    fprintf(stderr, "iosr: no command given (iosr --help shows the usage)\n");
    return 2;
  }
  const char *cmd = args[0];
  if (!strcmp(cmd, "help")) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (!strcmp(cmd, commands[i].name)) return commands[i].run(n, args, sock);
  fprintf(stderr, "iosr: unknown command '%s' (iosr --help shows the usage)\n", cmd);
  return 2;
}
