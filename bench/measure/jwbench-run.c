/* jwbench-run: runs one program under one allocator and measures it from the
 * outside (docs/design/bench.md, "Footprint" and "System calls").
 *
 *   jwbench-run [--preload LIB] [--env K=V]... [--rss-hz N] [--samples FILE]
 *               [--timeout S] -- PROG ARGS...
 *
 * - RSS: /proc/PID/statm sampled on an absolute clock at --rss-hz (default 50,
 *   at least 20); samples and the program's phase marks (lines "<ns> <name>"
 *   written to the pipe whose fd is in JWBENCH_MARK_FD) go to --samples.
 * - System calls: one kernel counter per memory system call (tracepoints
 *   syscalls:sys_enter_*), opened on the child before it execs and inherited by
 *   its threads: exact counts without tracing. Unavailable counters are said so.
 * - rusage of the child (high-water RSS, CPU times, faults, context switches).
 *
 * The program's stdout and stderr pass through; after it exits one line
 * "jwbench-run key=value ..." is printed on stdout. Exit status: the program's
 * (128+signal if killed, 124 on timeout), 2 on bad usage; --help prints the
 * options on stdout and exits 0.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static const char *const syscalls[] = {"mmap", "munmap", "madvise", "mremap", "brk", "mprotect"};
#define NSYS (sizeof syscalls / sizeof syscalls[0])

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The options that take a value; --help prints one line for each, and a bad
 * command line's message repeats their synopsis. */
enum { OPT_PRELOAD, OPT_ENV, OPT_RSS_HZ, OPT_SAMPLES, OPT_TIMEOUT, NOPTS };
static const struct {
  const char *name, *arg, *help;
} opts[NOPTS] = {
    [OPT_PRELOAD] = {"--preload", "LIB", "load LIB into the program with LD_PRELOAD (the allocator)"},
    [OPT_ENV] = {"--env", "K=V", "add K=V to the program's environment (repeatable)"},
    [OPT_RSS_HZ] = {"--rss-hz", "N", "RSS samples per second, 20..1000 (default 50)"},
    [OPT_SAMPLES] = {"--samples", "FILE", "write the RSS samples and the phase marks to FILE"},
    [OPT_TIMEOUT] = {"--timeout", "S", "kill the program after S seconds and exit 124 (default 0: never)"},
};

static void synopsis(FILE *f) {
  fprintf(f, "jwbench-run");
  for (int k = 0; k < NOPTS; k++) fprintf(f, " [%s %s]", opts[k].name, opts[k].arg);
  fprintf(f, " -- PROG ARGS...");
}

static void usage(void) {
  printf("usage: ");
  synopsis(stdout);
  printf("\nRuns PROG under one allocator and measures it from the outside; after it exits, prints one line\n"
         "\"jwbench-run key=value ...\". Exit status: PROG's (128+signal if killed, 124 on timeout),\n"
         "2 on bad usage.\n");
  for (int k = 0; k < NOPTS; k++) printf("  %-10s %-5s %s\n", opts[k].name, opts[k].arg, opts[k].help);
  printf("  %-16s %s\n", "--help", "print this and exit");
  exit(0);
}

static void die_usage(const char *msg, const char *arg) {
  fprintf(stderr, "jwbench-run: %s%s%s (usage: ", msg, arg ? " " : "", arg ? arg : "");
  synopsis(stderr);
  fprintf(stderr, ")\n");
  exit(2);
}

static int opt_index(const char *a) {
  for (int k = 0; k < NOPTS; k++)
    if (strcmp(a, opts[k].name) == 0) return k;
  return -1;
}

static long tracepoint_id(const char *name, char *why, size_t why_len) {
  const char *roots[] = {"/sys/kernel/tracing", "/sys/kernel/debug/tracing"};
  for (size_t i = 0; i < 2; i++) {
    char path[256];
    snprintf(path, sizeof path, "%s/events/syscalls/sys_enter_%s/id", roots[i], name);
    FILE *f = fopen(path, "r");
    if (!f) continue;
    long id = -1;
    if (fscanf(f, "%ld", &id) != 1) id = -1;
    fclose(f);
    if (id >= 0) return id;
  }
  snprintf(why, why_len, "no-tracefs-syscall-events");
  return -1;
}

/* Opens the counters on `pid` (stopped before exec); fds[i] = -1 on failure. */
static int open_counters(pid_t pid, int fds[NSYS], char *why, size_t why_len) {
  int ok = 1;
  for (size_t i = 0; i < NSYS; i++) {
    fds[i] = -1;
    long id = tracepoint_id(syscalls[i], why, why_len);
    if (id < 0) {
      ok = 0;
      continue;
    }
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.type = PERF_TYPE_TRACEPOINT;
    attr.size = sizeof attr;
    attr.config = (uint64_t)id;
    attr.disabled = 1;
    attr.enable_on_exec = 1;
    attr.inherit = 1;
    fds[i] = (int)syscall(SYS_perf_event_open, &attr, pid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    if (fds[i] < 0) {
      snprintf(why, why_len, "perf_event_open-%s", errno == EACCES || errno == EPERM ? "not-permitted" : strerror(errno));
      for (char *c = why; *c; c++)
        if (*c == ' ') *c = '-';
      ok = 0;
    }
  }
  return ok;
}

/* Appends what the program has written to the (non-blocking) mark pipe. */
static void read_marks(int fd, char **marks, size_t *len, size_t *cap) {
  for (;;) {
    if (*cap - *len < 1024) {
      char *g = realloc(*marks, *cap * 2);
      if (!g) return;
      *marks = g;
      *cap *= 2;
    }
    ssize_t r = read(fd, *marks + *len, *cap - *len - 1);
    if (r <= 0) return;
    *len += (size_t)r;
  }
}

typedef struct sample {
  uint64_t t_ns;
  uint64_t rss_kb, anon_kb;
} sample;

/* What the command line asks for. */
typedef struct run_opts {
  const char *preload, *samples_path;
  double hz, timeout_s;
  char **envs;
  int nenv;
  char **prog;
} run_opts;

/* Parses the command line (exits with status 2 on bad usage). */
static void parse_args(int argc, char **argv, run_opts *o) {
  *o = (run_opts){.hz = 50, .envs = calloc((size_t)argc, sizeof(char *))};
  int i = 1;
  for (; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--") == 0) {
      i++;
      break;
    }
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) usage();
    /* Known before its value is looked for: a trailing unknown option is
     * called unknown, not short of a value. */
    int k = opt_index(a);
    if (k < 0) die_usage(a[0] == '-' ? "unknown option" : "the program must follow --, got", a);
    if (i + 1 >= argc) die_usage("missing value for", a);
    const char *v = argv[++i];
    char *end;
    switch (k) {
      case OPT_PRELOAD: o->preload = v; break;
      case OPT_ENV:
        if (!strchr(v, '=')) die_usage("--env needs K=V, got", v);
        o->envs[o->nenv++] = argv[i];
        break;
      case OPT_RSS_HZ:
        o->hz = strtod(v, &end);
        if (*end || o->hz < 20 || o->hz > 1000) die_usage("--rss-hz must be 20..1000, got", v);
        break;
      case OPT_SAMPLES: o->samples_path = v; break;
      case OPT_TIMEOUT:
        o->timeout_s = strtod(v, &end);
        if (*end || o->timeout_s < 0) die_usage("--timeout must be seconds >= 0, got", v);
        break;
    }
  }
  if (i >= argc) die_usage("no program given", NULL);
  o->prog = &argv[i];
}

/* Forks the child: it waits for a byte on go_pipe, then execs the program with
 * its environment (JWBENCH_MARK_FD, LD_PRELOAD, --env). Returns its pid, or
 * -1 (reported). */
static pid_t spawn_child(const run_opts *o, int mark_pipe[2], int go_pipe[2]) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) {
    perror("jwbench-run: fork");
    return -1;
  }
  if (pid == 0) {
    close(mark_pipe[0]);
    close(go_pipe[1]);
    char fd[16];
    snprintf(fd, sizeof fd, "%d", mark_pipe[1]);
    setenv("JWBENCH_MARK_FD", fd, 1);
    if (o->preload && *o->preload) setenv("LD_PRELOAD", o->preload, 1);
    else unsetenv("LD_PRELOAD");
    for (int e = 0; e < o->nenv; e++) putenv(o->envs[e]);
    char c;
    if (read(go_pipe[0], &c, 1) != 1) _exit(127);    /* the parent died or failed */
    execvp(o->prog[0], o->prog);
    fprintf(stderr, "jwbench-run: cannot run %s: %s\n", o->prog[0], strerror(errno));
    _exit(127);
  }
  close(mark_pipe[1]);
  close(go_pipe[0]);
  fcntl(mark_pipe[0], F_SETFL, O_NONBLOCK);
  return pid;
}

/* The sampler must keep its rate while the program oversubscribes the CPUs
 * (10 threads per core): a real-time priority for this mostly sleeping
 * process (the child, forked before, keeps the normal one), else a better
 * nice value, else as is. Returns which one applied. */
static const char *raise_priority(void) {
  struct sched_param sp = {.sched_priority = 1};
  if (sched_setscheduler(0, SCHED_FIFO, &sp) == 0) return "fifo";
  if (setpriority(PRIO_PROCESS, 0, -10) == 0) return "nice-10";
  return "normal";
}

/* What the sampling loop gathers. */
typedef struct run_record {
  sample *s;
  size_t n, cap;
  char *marks;
  size_t mark_len, mark_cap;
  uint64_t t0, t1;
  int timed_out;
} run_record;

/* One RSS sample of the child, from its statm (fd). Returns -1 when there
 * is no memory for it (sampling stops), else 0. */
static int take_sample(int statm, long page_kb, run_record *r) {
  char buf[256];
  ssize_t len = statm >= 0 ? pread(statm, buf, sizeof buf - 1, 0) : -1;
  if (len <= 0) return 0;
  buf[len] = 0;
  unsigned long size, resident, shared;
  /* an exiting process reads as 0 resident pages: not a sample */
  if (sscanf(buf, "%lu %lu %lu", &size, &resident, &shared) != 3 || resident == 0) return 0;
  if (r->n == r->cap) {
    sample *g = realloc(r->s, r->cap * 2 * sizeof *r->s);
    if (!g) return -1;
    r->s = g;
    r->cap *= 2;
  }
  r->s[r->n++] = (sample){now_ns(), resident * (uint64_t)page_kb, (resident - shared) * (uint64_t)page_kb};
  return 0;
}

/* Samples the child's RSS (statm: its /proc/PID/statm) at o->hz on an
 * absolute clock from r->t0, and reads its marks, until it exits (killed at
 * the timeout). */
static void sample_until_exit(const run_opts *o, pid_t pid, int statm, int mark_fd, run_record *r) {
  long page_kb = sysconf(_SC_PAGESIZE) / 1024;
  uint64_t period = (uint64_t)(1e9 / o->hz), next = r->t0;
  for (;;) {
    siginfo_t si;
    memset(&si, 0, sizeof si);
    if (waitid(P_PID, (id_t)pid, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == pid) break;
    if (take_sample(statm, page_kb, r)) break;
    read_marks(mark_fd, &r->marks, &r->mark_len, &r->mark_cap);
    if (o->timeout_s > 0 && !r->timed_out && now_ns() - r->t0 > (uint64_t)(o->timeout_s * 1e9)) {
      kill(pid, SIGKILL);
      r->timed_out = 1;
    }
    next += period;
    uint64_t now = now_ns();
    if (next < now) next = now;  /* fell behind (a loaded machine): do not burst */
    struct timespec ts = {(time_t)(next / 1000000000ull), (long)(next % 1000000000ull)};
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR) {
    }
  }
}

/* Writes the samples and the marks to path. */
static void write_samples(const char *path, run_record *r) {
  FILE *f = fopen(path, "w");
  if (!f) {
    fprintf(stderr, "jwbench-run: cannot write %s: %s\n", path, strerror(errno));
    return;
  }
  fprintf(f, "# jwbench-run samples: t_ms rss_kb anon_kb; marks: # mark t_ms name\n");
  for (size_t k = 0; k < r->n; k++)
    fprintf(f, "%.3f %" PRIu64 " %" PRIu64 "\n", (double)(r->s[k].t_ns - r->t0) / 1e6, r->s[k].rss_kb,
            r->s[k].anon_kb);
  for (char *line = r->marks, *nl; line && *line; line = nl ? nl + 1 : NULL) {
    nl = strchr(line, '\n');
    if (nl) *nl = 0;
    unsigned long long ns;
    char name[64];
    if (sscanf(line, "%llu %63s", &ns, name) == 2)
      fprintf(f, "# mark %.3f %s\n", ns >= r->t0 ? (double)(ns - r->t0) / 1e6 : 0.0, name);
  }
  fclose(f);
}

/* The line "jwbench-run key=value ..." on stdout. counts: NULL when the
 * system calls were not counted (why says why). */
static void print_report(const run_record *r, int status, const struct rusage *ru, const char *prio,
                         const uint64_t *counts, const char *why) {
  uint64_t peak = 0, anon_peak = 0;
  for (size_t k = 0; k < r->n; k++) {
    if (r->s[k].rss_kb > peak) peak = r->s[k].rss_kb;
    if (r->s[k].anon_kb > anon_peak) anon_peak = r->s[k].anon_kb;
  }
  double wall = (double)(r->t1 - r->t0) / 1e9;
  int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  int sig = WIFSIGNALED(status) ? WTERMSIG(status) : 0;
  printf("jwbench-run exit_code=%d signal=%d timed_out=%d wall_s=%.6f user_s=%.6f sys_s=%.6f maxrss_kb=%ld "
         "rss_samples=%zu rss_hz=%.1f sampler=%s rss_peak_kb=%" PRIu64 " anon_peak_kb=%" PRIu64
         " minflt=%ld majflt=%ld nvcsw=%ld nivcsw=%ld",
         code, sig, r->timed_out, wall, (double)ru->ru_utime.tv_sec + (double)ru->ru_utime.tv_usec / 1e6,
         (double)ru->ru_stime.tv_sec + (double)ru->ru_stime.tv_usec / 1e6, ru->ru_maxrss, r->n,
         wall > 0 ? (double)r->n / wall : 0.0, prio, peak, anon_peak, ru->ru_minflt, ru->ru_majflt, ru->ru_nvcsw,
         ru->ru_nivcsw);
  if (counts) {
    printf(" sys_count=perf");
    for (size_t k = 0; k < NSYS; k++) printf(" sys_%s=%" PRIu64, syscalls[k], counts[k]);
  } else {
    printf(" sys_count=unavailable:%s", why[0] ? why : "unknown");
  }
  printf("\n");
  fflush(stdout);
}

int main(int argc, char **argv) {
  run_opts o;
  parse_args(argc, argv, &o);
  if (o.preload && *o.preload && access(o.preload, R_OK) != 0) {
    fprintf(stderr, "jwbench-run: cannot read the allocator library %s: %s\n", o.preload, strerror(errno));
    return 2;
  }
  int mark_pipe[2], go_pipe[2];
  if (pipe(mark_pipe) || pipe2(go_pipe, O_CLOEXEC)) {
    perror("jwbench-run: pipe");
    return 2;
  }
  pid_t pid = spawn_child(&o, mark_pipe, go_pipe);
  if (pid < 0) return 2;
  const char *prio = raise_priority();
  int fds[NSYS];
  char why[96] = "";
  int counting = open_counters(pid, fds, why, sizeof why);
  char statm_path[64];
  snprintf(statm_path, sizeof statm_path, "/proc/%d/statm", (int)pid);
  int statm = open(statm_path, O_RDONLY | O_CLOEXEC); /* before the exec: the child cannot be gone */
  run_record r = {.cap = 4096, .mark_cap = 4096};
  r.s = malloc(r.cap * sizeof *r.s);
  r.marks = malloc(r.mark_cap);
  if (!r.s || !r.marks) {
    fprintf(stderr, "jwbench-run: out of memory\n");
    kill(pid, SIGKILL);
    return 2;
  }
  r.t0 = now_ns();
  if (write(go_pipe[1], "g", 1) != 1) {
    perror("jwbench-run: cannot start the child");
    kill(pid, SIGKILL);
  }
  close(go_pipe[1]);
  sample_until_exit(&o, pid, statm, mark_pipe[0], &r);
  int status = 0;
  struct rusage ru;
  memset(&ru, 0, sizeof ru);
  wait4(pid, &status, 0, &ru);
  r.t1 = now_ns();
  read_marks(mark_pipe[0], &r.marks, &r.mark_len, &r.mark_cap);
  r.marks[r.mark_len] = 0;
  uint64_t counts[NSYS] = {0};
  for (size_t k = 0; k < NSYS; k++) {
    if (fds[k] < 0) continue;
    if (read(fds[k], &counts[k], sizeof counts[k]) != sizeof counts[k]) {
      counting = 0;
      snprintf(why, sizeof why, "counter-read-failed");
    }
    close(fds[k]);
  }
  if (o.samples_path) write_samples(o.samples_path, &r);
  print_report(&r, status, &ru, prio, counting ? counts : NULL, why);
  if (r.timed_out) return 124;
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}
