/* jwmalloc: runs a program on jwmalloc and shows what the allocator did.
 *
 *   jwmalloc run [--stats] [--lib PATH] -- PROG [ARGS...]
 *
 * PROG runs with LD_PRELOAD of libjwmalloc.so (found next to this tool: the
 * build tree's ../lib or the install's library directory; --lib or
 * JWMALLOC_LIB override). With --stats, PROG and every process it starts
 * append their statistics to a temporary file at exit (JWMALLOC_STATS_FILE);
 * the tool prints one row per process and the totals on stderr. The exit
 * status is PROG's (128 + signal when it was killed).
 *
 * Brief: "Tiers" (the main job of issue 2: real programs on jwmalloc).
 * This is an ordinary program: it uses stdio and the system's malloc.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/stats_fields.h"
#include "jwmalloc.h"

#ifndef JW_REL_LIBDIR
#define JW_REL_LIBDIR "../lib"
#endif

static void usage(FILE *f) {
  fprintf(f,
          "usage: jwmalloc run [--stats] [--lib PATH] -- PROG [ARGS...]\n"
          "  Runs PROG with libjwmalloc.so preloaded; --stats prints jwmalloc's statistics\n"
          "  for PROG and every process it starts.\n");
}

static int readable(const char *p) { return access(p, R_OK) == 0; }

/* The library: --lib, $JWMALLOC_LIB, then relative to this executable. */
static int find_library(const char *opt, char *out) {
  const char *env = getenv("JWMALLOC_LIB");
  const char *given = opt ? opt : (env && *env ? env : NULL);
  if (given) {
    if (realpath(given, out) && readable(out)) return 0;
    fprintf(stderr, "jwmalloc: library not found: %s\n", given);
    return -1;
  }
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) return -1;
  self[n] = 0;
  char *slash = strrchr(self, '/');
  if (slash) *slash = 0;
  const char *rel[] = {JW_REL_LIBDIR, "../lib"};
  for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
    char dir[PATH_MAX * 2], real[PATH_MAX];
    snprintf(dir, sizeof dir, "%s/%s", self, rel[i]);
    if (realpath(dir, real) == NULL) continue;
    if (strlen(real) + sizeof "/libjwmalloc.so" > PATH_MAX) continue;
    memcpy(out, real, strlen(real));
    memcpy(out + strlen(real), "/libjwmalloc.so", sizeof "/libjwmalloc.so");
    if (readable(out)) return 0;
  }
  fprintf(stderr, "jwmalloc: cannot find libjwmalloc.so near %s (use --lib PATH)\n", self);
  return -1;
}

/* ---- statistics lines ---- */

enum { SUM, MAX };
#define NAME(x, how) #x,
#define HOW(x, how) how,
static const char *field_names[] = {JW_STATS_FIELDS(NAME)};
static const int field_how[] = {JW_STATS_FIELDS(HOW)};
#define NFIELDS (sizeof field_names / sizeof field_names[0])
enum {
#define IDX(x, how) F_##x,
  JW_STATS_FIELDS(IDX)
#undef IDX
};

typedef struct proc {
  char exe[64];
  uint64_t v[NFIELDS];
} proc;

static int parse_line(char *line, proc *p) {
  if (strncmp(line, "jwmalloc-stats v1 ", 18) != 0) return -1;
  memset(p, 0, sizeof *p);
  char *exe = strstr(line, " exe=");
  if (exe) {
    *exe = 0;
    char *base = strrchr(exe + 5, '/');
    base = base ? base + 1 : exe + 5;
    char *triplet = strstr(base, "-linux-gnu-"); /* x86_64-linux-gnu-as: as */
    snprintf(p->exe, sizeof p->exe, "%s", triplet ? triplet + 11 : base);
    p->exe[strcspn(p->exe, "\n")] = 0;
  }
  for (char *tok = strtok(line + 18, " \n"); tok; tok = strtok(NULL, " \n")) {
    char *eq = strchr(tok, '=');
    if (!eq) continue;
    *eq = 0;
    for (size_t i = 0; i < NFIELDS; i++)
      if (strcmp(tok, field_names[i]) == 0) p->v[i] = strtoull(eq + 1, NULL, 10);
  }
  return 0;
}

static void combine(proc *total, const proc *p) {
  for (size_t i = 0; i < NFIELDS; i++)
    if (field_how[i] == SUM) total->v[i] += p->v[i];
    else if (p->v[i] > total->v[i]) total->v[i] = p->v[i];
}

static void row(const char *name, int runs, const proc *p) {
  const uint64_t *v = p->v;
  uint64_t pool = v[F_pool_hits] + v[F_pool_misses];
  fprintf(stderr, "  %-16.16s %5d %11llu %9llu %8llu %7llu %10llu %5llu%% %9.1f\n", name, runs,
          (unsigned long long)v[F_small_mallocs], (unsigned long long)v[F_mid_mallocs],
          (unsigned long long)v[F_large_mallocs], (unsigned long long)v[F_huge_mallocs],
          (unsigned long long)v[F_cross_thread_frees],
          (unsigned long long)(pool ? v[F_pool_hits] * 100 / pool : 0), v[F_peak_resident_bytes] / 1048576.0);
}

#define MAX_GROUPS 32

/* One row per program name (processes of the same program combined). */
static void report(const char *path, const char *lib) {
  FILE *f = fopen(path, "r");
  if (f == NULL) return;
  static proc groups[MAX_GROUPS + 1];
  static int count[MAX_GROUPS + 1];
  int ngroups = 0, n = 0;
  proc total, p;
  memset(&total, 0, sizeof total);
  char line[4096];
  while (fgets(line, sizeof line, f)) {
    if (parse_line(line, &p) != 0) continue;
    int g = 0;
    while (g < ngroups && strcmp(groups[g].exe, p.exe) != 0) g++;
    if (g == ngroups) {
      if (ngroups == MAX_GROUPS) g = MAX_GROUPS; /* "others" */
      else ngroups++;
      if (count[g] == 0) snprintf(groups[g].exe, sizeof groups[g].exe, "%s", g == MAX_GROUPS ? "(others)" : p.exe);
    }
    combine(&groups[g], &p);
    count[g]++;
    combine(&total, &p);
    n++;
  }
  fclose(f);
  fprintf(stderr, "jwmalloc run: statistics (library %s)\n", lib);
  if (n == 0) {
    fprintf(stderr, "  no process reported statistics (static binary, setuid, or _exit without exit handlers)\n");
    return;
  }
  fprintf(stderr, "  %-16s %5s %11s %9s %8s %7s %10s %6s %9s\n", "program", "runs", "frontend", "midend", "ranges",
          "direct", "cross-thr", "pool", "peak RSS");
  fprintf(stderr, "  %-16s %5s %11s %9s %8s %7s %10s %6s %9s\n", "", "", "mallocs", "mallocs", "mallocs", "mallocs",
          "frees", "hits", "MiB");
  for (int g = 0; g <= MAX_GROUPS; g++)
    if (count[g]) row(groups[g].exe[0] ? groups[g].exe : "?", count[g], &groups[g]);
  row("total", n, &total);
  uint64_t *v = total.v;
  fprintf(stderr,
          "  %d process(es); frees: frontend %llu, midend %llu, ranges %llu, direct %llu; reallocs %llu "
          "(%llu in place)\n",
          n, (unsigned long long)v[F_small_frees], (unsigned long long)v[F_mid_frees],
          (unsigned long long)v[F_large_frees], (unsigned long long)v[F_huge_frees], (unsigned long long)v[F_reallocs],
          (unsigned long long)v[F_reallocs_in_place]);
  fprintf(stderr,
          "  page pool: %llu hits, %llu misses, %llu pages given back; peak mapped %.1f MiB (largest process); "
          "%llu mmap, %llu munmap, %llu madvise\n",
          (unsigned long long)v[F_pool_hits], (unsigned long long)v[F_pool_misses],
          (unsigned long long)v[F_pool_evictions], v[F_peak_mapped_bytes] / 1048576.0,
          (unsigned long long)v[F_mmap_calls], (unsigned long long)v[F_munmap_calls],
          (unsigned long long)v[F_madvise_calls]);
  fprintf(stderr, "  threads: %llu started, %llu exited, %llu abandoned slabs; bad frees reported: %llu\n",
          (unsigned long long)v[F_threads_started], (unsigned long long)v[F_threads_exited],
          (unsigned long long)v[F_abandoned_slabs], (unsigned long long)v[F_invalid_frees]);
}

/* ---- run ---- */

static int cmd_run(int argc, char **argv) {
  int stats = 0;
  const char *libopt = NULL;
  int i = 0;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--stats") == 0) stats = 1;
    else if (strcmp(argv[i], "--lib") == 0 && i + 1 < argc) libopt = argv[++i];
    else if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "jwmalloc run: unknown option %s\n", argv[i]);
      usage(stderr);
      return 2;
    } else break;
  }
  if (i >= argc) {
    fprintf(stderr, "jwmalloc run: no program given\n");
    usage(stderr);
    return 2;
  }
  char lib[PATH_MAX];
  if (find_library(libopt, lib) != 0) return 2;
  /* ld.so splits LD_PRELOAD at spaces and colons, with no escape: such a
   * path would be ignored (the program would run on glibc's malloc). */
  if (strpbrk(lib, " :\t\n") != NULL) {
    fprintf(stderr, "jwmalloc run: the library path has a space or colon, which LD_PRELOAD cannot carry: %s\n", lib);
    return 2;
  }

  const char *old = getenv("LD_PRELOAD");
  size_t len = strlen(lib) + (old ? strlen(old) + 2 : 1);
  char *preload = malloc(len);
  if (!preload) return 2;
  snprintf(preload, len, "%s%s%s", lib, old && *old ? ":" : "", old ? old : "");
  setenv("LD_PRELOAD", preload, 1);

  char statsfile[] = "/tmp/jwmalloc-stats-XXXXXX";
  if (stats) {
    int fd = mkstemp(statsfile);
    if (fd < 0) {
      fprintf(stderr, "jwmalloc run: cannot create a statistics file: %s\n", strerror(errno));
      return 2;
    }
    close(fd);
    setenv("JWMALLOC_STATS", "1", 1);
    setenv("JWMALLOC_STATS_FILE", statsfile, 1);
  }
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) {
    fprintf(stderr, "jwmalloc run: fork: %s\n", strerror(errno));
    return 2;
  }
  if (pid == 0) {
    execvp(argv[i], argv + i);
    fprintf(stderr, "jwmalloc run: cannot run %s: %s\n", argv[i], strerror(errno));
    _exit(127);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (stats) {
    report(statsfile, lib);
    unlink(statsfile);
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc >= 2 && strcmp(argv[1], "run") == 0) return cmd_run(argc - 2, argv + 2);
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  return 2;
}
