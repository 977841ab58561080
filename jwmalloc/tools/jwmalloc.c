/* jwmalloc: runs a program on jwmalloc and shows what the allocator did,
 * and lists the allocator's options.
 *
 *   jwmalloc run [--stats] [--lib PATH] [--swap NAME] -- PROG [ARGS...]
 *   jwmalloc options
 *
 * PROG runs with LD_PRELOAD of libjwmalloc.so (found next to this tool: the
 * build tree's ../lib or the install's library directory; --lib or
 * JWMALLOC_LIB override; a file that is not an ELF shared object of this
 * machine is refused before PROG runs, as ld.so would only warn and run PROG
 * on glibc's malloc). With --stats, PROG and every process it starts
 * append their statistics to a temporary file at exit (JWMALLOC_STATS_FILE);
 * the tool prints one row per process and the totals on stderr. The exit
 * status is PROG's (128 + signal when it was killed); the tool's own errors
 * (bad usage, unknown command, library) are one line on stderr and status 2.
 *
 * With --swap NAME, PROG's heap roots live in IOSR regions of the running
 * iosrd, app NAME (docs/design/stack.md): the tool checks the daemon first
 * through libiosr.so (dlopen; next to libjwmalloc.so, or JWMALLOC_SWAP_LIB)
 * and sets JWMALLOC_SWAP and JWMALLOC_SWAP_LIB for PROG, and PYTHONMALLOC=malloc
 * unless it is set.
 *
 * `jwmalloc options` prints the table of every JWMALLOC_* option
 * (common/option_table.h, the library's own), one tab-separated line each:
 * name, type, default, what it accepts, when it takes effect, the tiers that
 * read it (docs/design/architecture.md, "Options").
 *
 * Brief: "Tiers" (the main job of issue 2: real programs on jwmalloc).
 * This is an ordinary program: it uses stdio and the system's malloc.
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/stats_fields.h"
#include "common/option_table.h"
#include "jwmalloc.h"

#ifndef JW_REL_LIBDIR
#define JW_REL_LIBDIR "../lib"
#endif

static void usage(FILE *f) {
  fprintf(f,
          "usage: jwmalloc run [--stats] [--lib PATH] [--swap NAME] -- PROG [ARGS...]\n"
          "       jwmalloc options\n"
          "  run: runs PROG with libjwmalloc.so preloaded; --stats prints jwmalloc's statistics\n"
          "  for PROG and every process it starts; --swap NAME puts PROG's heap in IOSR\n"
          "  regions of the running iosrd, registered as app NAME.\n"
          "  options: prints every JWMALLOC_* option: name, type, default, accepted values,\n"
          "  when it takes effect, the tiers that read it (tab-separated).\n");
}

/* `jwmalloc options`: the table, one line per row. */
static int cmd_options(int argc) {
  static const char *const types[] = {"boolean", "number", "size", "word", "page size", "string"};
  static const char *const whens[] = {"run-time", "start-up, read back", "start-up", "jwmalloc run"};
  if (argc != 0) {
    fprintf(stderr, "jwmalloc options: takes no arguments\n");
    return 2;
  }
  printf("# name\ttype\tdefault\taccepts\twhen\tread by\n");
  for (int i = 0; i < JW_OPT_COUNT; i++) {
    const jw_option_def *d = &jw_option_defs[i];
    char def[128], accepts[256];
    jw_option_default_text((jw_option_id)i, def, sizeof def);
    jw_option_accepts_text((jw_option_id)i, accepts, sizeof accepts);
    printf("JWMALLOC_%s\t%s\t%s\t%s\t%s\t%s\n", d->name, types[d->type], def, accepts, whens[d->when], d->read_by);
  }
  return fflush(stdout) == 0 ? 0 : 2;
}

static int readable(const char *p) { return access(p, R_OK) == 0; }

/* The ELF identification and type of the file at path; 0, or -1 with errno
 * (ENOEXEC: shorter than an ELF header or without its magic). */
static int elf_header(const char *path, unsigned char ident[EI_NIDENT], uint16_t *type, uint16_t *machine) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  Elf64_Ehdr h; /* e_type and e_machine lie at the same offsets in Elf32_Ehdr */
  ssize_t n = read(fd, &h, sizeof h);
  int err = errno;
  close(fd);
  if (n < 0) {
    errno = err;
    return -1;
  }
  if ((size_t)n < sizeof(Elf32_Ehdr) || memcmp(h.e_ident, ELFMAG, SELFMAG) != 0) {
    errno = ENOEXEC;
    return -1;
  }
  memcpy(ident, h.e_ident, EI_NIDENT);
  *type = h.e_type;
  *machine = h.e_machine;
  return 0;
}

#if UINTPTR_MAX > 0xffffffffu
typedef Elf64_Ehdr ehdr_t;
typedef Elf64_Phdr phdr_t;
typedef Elf64_Dyn dyn_t;
#else
typedef Elf32_Ehdr ehdr_t;
typedef Elf32_Phdr phdr_t;
typedef Elf32_Dyn dyn_t;
#endif

/* Is the ET_DYN file at path (of this machine's ELF class) a
 * position-independent executable (DT_FLAGS_1 has DF_1_PIE)? ld.so refuses
 * to preload one, as it refuses a non-ELF file. 0 when unreadable. */
static int is_pie(const char *path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC), pie = 0;
  if (fd < 0) return 0;
  ehdr_t h;
  if (pread(fd, &h, sizeof h, 0) == (ssize_t)sizeof h && h.e_phentsize == sizeof(phdr_t)) {
    for (unsigned i = 0; i < h.e_phnum && !pie; i++) {
      phdr_t ph;
      if (pread(fd, &ph, sizeof ph, (off_t)(h.e_phoff + (uint64_t)i * sizeof ph)) != (ssize_t)sizeof ph) break;
      if (ph.p_type != PT_DYNAMIC) continue;
      for (uint64_t off = 0; off + sizeof(dyn_t) <= ph.p_filesz; off += sizeof(dyn_t)) {
        dyn_t d;
        if (pread(fd, &d, sizeof d, (off_t)(ph.p_offset + off)) != (ssize_t)sizeof d || d.d_tag == DT_NULL) break;
        if (d.d_tag == DT_FLAGS_1 && (d.d_un.d_val & DF_1_PIE)) pie = 1;
      }
    }
  }
  close(fd);
  return pie;
}

/* Is lib a shared object ld.so can preload into programs of this machine?
 * ld.so would print its own error, ignore the library and run the program on
 * glibc's malloc, exit status 0: checked before running instead. Compared
 * with this tool's own executable for class, byte order and machine (the
 * tool and the library are built together). 0, or -1 after a one-line
 * message. */
static int check_library(const char *lib) {
  unsigned char id[EI_NIDENT], self_id[EI_NIDENT];
  uint16_t type, machine, self_type, self_machine;
  if (elf_header(lib, id, &type, &machine) != 0) {
    if (errno == ENOEXEC) fprintf(stderr, "jwmalloc: not an ELF shared object (no ELF header): %s\n", lib);
    else fprintf(stderr, "jwmalloc: cannot read the library %s: %s\n", lib, strerror(errno));
    return -1;
  }
  if (type != ET_DYN) {
    fprintf(stderr, "jwmalloc: not an ELF shared object (ELF type %u, not ET_DYN): %s\n", (unsigned)type, lib);
    return -1;
  }
  if (elf_header("/proc/self/exe", self_id, &self_type, &self_machine) == 0 &&
      (id[EI_CLASS] != self_id[EI_CLASS] || id[EI_DATA] != self_id[EI_DATA] || machine != self_machine)) {
    fprintf(stderr, "jwmalloc: a shared object for another machine (ELF class %u, machine %u; want %u, %u): %s\n",
            (unsigned)id[EI_CLASS], (unsigned)machine, (unsigned)self_id[EI_CLASS], (unsigned)self_machine, lib);
    return -1;
  }
  if (is_pie(lib)) {
    fprintf(stderr, "jwmalloc: not a shared library but a position-independent executable: %s\n", lib);
    return -1;
  }
  return 0;
}

/* The library: --lib, $JWMALLOC_LIB (the options table's LIB row: the
 * tool's, which the library only knows by name), then relative to this
 * executable. */
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

/* ---- --swap: the daemon is checked before PROG runs ---- */

/* Has this process CAP_SYS_PTRACE (bit 19 of CapEff)? A fork child keeps
 * its parent's regions only with it (docs/design/stack.md). */
static int has_ptrace_cap(void) {
  FILE *f = fopen("/proc/self/status", "r");
  if (f == NULL) return 0;
  char line[256];
  unsigned long long caps = 0;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "CapEff:", 7) == 0) caps = strtoull(line + 7, NULL, 16);
  fclose(f);
  return (caps >> 19) & 1;
}

/* The value of the first `"key":N` after `after` in json; -1 if absent. */
static long long json_num(const char *json, const char *after, const char *key) {
  const char *s = strstr(json, after);
  if (s == NULL) return -1;
  s = strstr(s, key);
  return s ? strtoll(s + strlen(key), NULL, 10) : -1;
}

/* 0 when iosrd answers and its area has a free slot, else -1 after one
 * line. swaplib: libiosr.so's path (filled in). */
static int check_swap(const char *name, const char *lib, char *swaplib) {
  const char *env = getenv("JWMALLOC_SWAP_LIB"); /* the table's SWAP_LIB, which the tool sets for PROG */
  if (env && *env) snprintf(swaplib, PATH_MAX, "%s", env);
  else {
    snprintf(swaplib, PATH_MAX, "%s", lib);
    char *slash = strrchr(swaplib, '/');
    snprintf(slash ? slash + 1 : swaplib, PATH_MAX - (size_t)(slash ? slash + 1 - swaplib : 0), "libiosr.so");
  }
  if (strlen(name) == 0 || strlen(name) >= 48) {
    fprintf(stderr, "jwmalloc run: --swap NAME: the name must have 1 to 47 characters\n");
    return -1;
  }
  if (!has_ptrace_cap()) {
    fprintf(stderr, "jwmalloc run: --swap needs CAP_SYS_PTRACE (userfaultfd fork events keep a fork child's heap)\n");
    return -1;
  }
  void *h = dlopen(swaplib, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    fprintf(stderr, "jwmalloc run: --swap: cannot open %s: %s\n", swaplib, dlerror());
    return -1;
  }
  void *(*ctl_open)(const char *) = (void *(*)(const char *))dlsym(h, "iosr_ctl_open");
  char *(*stat_json)(void *) = (char *(*)(void *))dlsym(h, "iosr_ctl_stat_json");
  void (*ctl_close)(void *) = (void (*)(void *))dlsym(h, "iosr_ctl_close");
  if (!ctl_open || !stat_json || !ctl_close) {
    fprintf(stderr, "jwmalloc run: --swap: %s lacks the control calls\n", swaplib);
    return -1;
  }
  void *ctl = ctl_open(NULL);
  if (ctl == NULL) {
    fprintf(stderr, "jwmalloc run: --swap: no iosrd answering (%s); start it with iosrd --swap AREA\n",
            strerror(errno));
    return -1;
  }
  char *json = stat_json(ctl);
  ctl_close(ctl);
  long long slots = json ? json_num(json, "\"swap\":{", "\"slots\":") : -1;
  long long used = json ? json_num(json, "\"swap\":{", "\"used\":") : -1;
  free(json);
  if (slots >= 0 && used >= 0 && used >= slots) {
    fprintf(stderr, "jwmalloc run: --swap: the swap area is full (%lld of %lld slots used)\n", used, slots);
    return -1;
  }
  return 0;
}

/* ---- run ---- */

static int cmd_run(int argc, char **argv) {
  int stats = 0;
  const char *libopt = NULL, *swap = NULL;
  int i = 0;
  for (; i < argc; i++) {
    if (strcmp(argv[i], "--stats") == 0) stats = 1;
    else if (strcmp(argv[i], "--lib") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "jwmalloc run: --lib needs a PATH\n");
        return 2;
      }
      libopt = argv[++i];
    } else if (strcmp(argv[i], "--swap") == 0) {
      if (i + 1 >= argc) {
        fprintf(stderr, "jwmalloc run: --swap needs a NAME\n");
        return 2;
      }
      swap = argv[++i];
    }
    else if (strcmp(argv[i], "--") == 0) {
      i++;
      break;
    } else if (argv[i][0] == '-') {
      fprintf(stderr, "jwmalloc run: unknown option %s (jwmalloc --help shows the usage)\n", argv[i]);
      return 2;
    } else break;
  }
  if (i >= argc) {
    fprintf(stderr, "jwmalloc run: no program given (jwmalloc --help shows the usage)\n");
    return 2;
  }
  char lib[PATH_MAX];
  if (find_library(libopt, lib) != 0 || check_library(lib) != 0) return 2;
  /* ld.so splits LD_PRELOAD at spaces and colons, with no escape: such a
   * path would be ignored (the program would run on glibc's malloc). */
  if (strpbrk(lib, " :\t\n") != NULL) {
    fprintf(stderr, "jwmalloc run: the library path has a space or colon, which LD_PRELOAD cannot carry: %s\n", lib);
    return 2;
  }

  if (swap) {
    char swaplib[PATH_MAX];
    if (check_swap(swap, lib, swaplib) != 0) return 2;
    setenv("JWMALLOC_SWAP", swap, 1);
    setenv("JWMALLOC_SWAP_LIB", swaplib, 1);
    /* CPython's small objects go to malloc, not to arenas it maps itself,
     * which IOSR does not serve (docs/design/stack.md, "Programs' own
     * anonymous mappings"); a value the user set is kept. */
    setenv("PYTHONMALLOC", "malloc", 0);
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
  if (argc >= 2 && strcmp(argv[1], "options") == 0) return cmd_options(argc - 2);
  if (argc >= 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
    usage(stdout);
    return 0;
  }
  /* Bad usage: one line naming the problem, exit status 2. */
  if (argc >= 2) fprintf(stderr, "jwmalloc: unknown command '%s' (jwmalloc --help shows the usage)\n", argv[1]);
  else fprintf(stderr, "jwmalloc: no command given (jwmalloc --help shows the usage)\n");
  return 2;
}
