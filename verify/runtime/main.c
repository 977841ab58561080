/* vrf: the checker's command line. Each client program links this runtime;
 * `vrf_<client> --help` lists the options. */
#include <dlfcn.h>
#include <sys/personality.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "explore.h"
#include "rt.h"

extern const vrf_client vrf_client_def;

int main(int argc, char **argv);

static void usage(const char *argv0) {
  printf("usage: %s [options]\n"
         "Explores every execution of the client '%s' within its bounds (docs/design/verification.md).\n"
         "  --level test|full     shortened bound (make test) or full bound (make verify; default)\n"
         "  --expect-declared     pass when the client's declared planted bug is found\n"
         "  --replay CHOICES      run only the execution with these choices (printed on failure), traced\n"
         "  --max-executions N    stop after N executions (result marked partial)\n"
         "  --stutter N           identical spin-loop iterations allowed before a thread must wait\n"
         "  --spurious N          weak-CAS spurious failures per thread (default: the client's, else 0)\n"
         "  --jobs N              executions run in parallel (default: the number of CPUs)\n"
         "  --dpor                source-DPOR with sleep sets instead of canonical schedules (sequential)\n"
         "  --no-dpor             explore every interleaving (slow; cross-checks the reduction)\n"
         "  --graphs              count distinct execution graphs (reads-from and mo)\n"
         "  --param N             client-defined configuration number (default 0)\n"
         "  --weaken FUNC:ORDER   mutation: FUNC's atomics with ORDER (acquire, release, acq_rel, seq_cst, all)\n"
         "                        run relaxed; use with --expect to show the checker finds the planted bug\n"
         "  --expect KIND         pass only if a failure of KIND is found (data race, assertion, ...)\n"
         "  --quiet               no progress lines\n",
         argv0, vrf_client_def.name);
}

static const char *outcome_allowed(const char *o) {
  for (const char *const *a = rt.client->outcomes; *a; a++)
    if (strcmp(*a, o) == 0) return *a;
  return NULL;
}

/* What the command line asks for beyond what it sets in rt and xs. */
typedef struct cli {
  const char *replay, *expect_kind;
  bool expect, dpor;
  int stutter, spurious, jobs;
} cli;

/* --weaken FUNC[:ORDER] into rt; 0, or 2 on a bad ORDER (reported). */
static int parse_weaken(const char *arg) {
  static char fn[256];
  const char *c = strrchr(arg, ':');
  snprintf(fn, sizeof fn, "%.*s", c ? (int)(c - arg) : (int)strlen(arg), arg);
  rt.weaken_func = fn;
  rt.weaken_mo = -1;
  if (c) {
    static const char *names[] = {"relaxed", "consume", "acquire", "release", "acq_rel", "seq_cst"};
    int m = -2;
    for (int i = 0; i < 6; i++)
      if (strcmp(c + 1, names[i]) == 0) m = i;
    if (strcmp(c + 1, "all") == 0) m = -1;
    if (m == -2 || m == 0) {
      fprintf(stderr, "vrf: --weaken FUNC:ORDER, ORDER one of acquire release acq_rel seq_cst all\n");
      return 2;
    }
    rt.weaken_mo = m;
  }
  return 0;
}

/* Parses the options into o, rt and xs. Returns -1 to go on, else the exit
 * status (0 after --help, 2 on a usage error). */
static int parse_options(int argc, char **argv, cli *o) {
  static const struct option opts[] = {{"level", required_argument, 0, 'l'},
                                       {"expect-declared", no_argument, 0, 'e'},
                                       {"replay", required_argument, 0, 'r'},
                                       {"max-executions", required_argument, 0, 'm'},
                                       {"stutter", required_argument, 0, 's'},
                                       {"quiet", no_argument, 0, 'q'},
                                       {"spurious", required_argument, 0, 'p'},
                                       {"no-dpor", no_argument, 0, 'n'},
                                       {"dpor", no_argument, 0, 'd'},
                                       {"graphs", no_argument, 0, 'g'},
                                       {"list-graphs", no_argument, 0, 'L'},
                                       {"param", required_argument, 0, 'P'},
                                       {"weaken", required_argument, 0, 'w'},
                                       {"expect", required_argument, 0, 'E'},
                                       {"jobs", required_argument, 0, 'j'},
                                       {"help", no_argument, 0, 'h'},
                                       {0, 0, 0, 0}};
  *o = (cli){.stutter = -1, .spurious = -2, .jobs = (int)sysconf(_SC_NPROCESSORS_ONLN)};
  rt.level = 1;
  rt.verbose_fd = -1;
  for (int c; (c = getopt_long(argc, argv, "", opts, NULL)) != -1;) {
    switch (c) {
      case 'l':
        if (strcmp(optarg, "test") == 0) rt.level = 0;
        else if (strcmp(optarg, "full") == 0) rt.level = 1;
        else {
          fprintf(stderr, "vrf: --level must be test or full\n");
          return 2;
        }
        break;
      case 'e': o->expect = true; break;
      case 'r': o->replay = optarg; break;
      case 'm': xs.limit = strtoull(optarg, NULL, 10); break;
      case 's': o->stutter = atoi(optarg); break;
      case 'q': xs.quiet = true; break;
      case 'p': o->spurious = atoi(optarg); break;
      case 'n': xs.no_dpor = true; break;
      case 'd': o->dpor = true; break;
      case 'g': xs.count_graphs = true; break;
      case 'L': xs.count_graphs = xs.list_graphs = true; break;
      case 'P': rt.param = atoi(optarg); break;
      case 'w':
        if (parse_weaken(optarg)) return 2;
        break;
      case 'E': /* "data_race" is accepted for "data race" (no quoting in scripts) */
        for (char *c = optarg; *c; c++)
          if (*c == '_') *c = ' ';
        o->expect_kind = optarg;
        o->expect = true;
        break;
      case 'j': o->jobs = atoi(optarg); break;
      case 'h': usage(argv[0]); return 0;
      default: usage(argv[0]); return 2;
    }
  }
  return -1;
}

/* The runtime set up for the client and its setup run: the state every
 * execution starts from. Returns 0, or 2 (reported). */
static int runtime_start(const cli *o) {
  const vrf_client *cl = &vrf_client_def;
  rt.client = cl;
  rt.max_events = cl->max_events ? cl->max_events : 1000;
  rt.spurious = o->spurious >= 0 ? o->spurious : cl->spurious < 0 ? 0 : cl->spurious;
  rt.stutter = o->stutter >= 0 ? o->stutter : 0;
  rt.canonical = !o->dpor && !xs.no_dpor;
  rt.shm = mmap(NULL, sizeof(shm_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (rt.shm == MAP_FAILED) {
    perror("vrf: shared memory");
    return 2;
  }
  Dl_info di;
  if (dladdr((void *)main, &di)) rt.exe_base = (uintptr_t)di.dli_fbase;
  arena_init();
  regions_init();
  stacks_init();
  signals_install();
  signals_init_thread(&rt.th[0]);
  sched_init_thread0();
  rt.started = true;
  if (cl->setup) cl->setup();
  model_flush_plain(&rt.th[0]);
  rt.th[0].nevents = 0;
  return 0;
}

/* After a failure: the report, the failing execution and how to replay it.
 * Returns whether it is the failure expected. result: the summary's words. */
static bool report_failure(const cli *o, const char *argv0, char *result, size_t cap) {
  const vrf_client *cl = rt.client;
  char head[2300];
  int hl = snprintf(head, sizeof head, "\n== %s: %s ==\n%s\n", cl->name, xs.fail_kind, xs.fail_msg);
  symbolize_and_print(head, (size_t)hl < sizeof head ? (size_t)hl : sizeof head - 1);
  printf("\nThe failing execution (events in order; [k/n] = choice k of n):\n");
  replay_print(rt.shm);
  printf("Replay it alone: %s --replay ", argv0);
  print_choices(stdout, rt.shm);
  printf("\n");
  const char *want = o->expect_kind ? o->expect_kind : cl->expect;
  if (o->expect && want && strcmp(want, xs.fail_kind) == 0) {
    snprintf(result, cap, "planted bug found as expected (%s)", xs.fail_kind);
    return true;
  }
  snprintf(result, cap, "FAILED: %s", xs.fail_kind);
  return false;
}

/* The outcomes observed against the client's allowed set. Returns whether
 * they are exactly the allowed ones; result: the summary's words. */
static bool check_outcomes(char *result, size_t cap) {
  const vrf_client *cl = rt.client;
  bool exact = true;
  printf("  outcomes observed:\n");
  for (int i = 0; i < xs.noutcomes; i++) {
    bool ok = outcome_allowed(xs.outcomes[i]) != NULL;
    exact &= ok;
    printf("    %-40s %8lu executions%s\n", xs.outcomes[i], (unsigned long)xs.outcome_count[i],
           ok ? "" : "   <- NOT ALLOWED by the model");
  }
  for (const char *const *a = cl->outcomes; *a; a++) {
    bool seen = false;
    for (int i = 0; i < xs.noutcomes; i++) seen |= strcmp(xs.outcomes[i], *a) == 0;
    if (!seen) printf("    %-40s   missing: allowed but never produced\n", *a);
    exact &= seen;
  }
  if (exact) snprintf(result, cap, "outcomes exactly as allowed (%d)", xs.noutcomes);
  else snprintf(result, cap, "FAILED: outcome set differs from the allowed set");
  return exact;
}

int main(int argc, char **argv) {
  /* Same addresses in every run (printouts, replay strings, graph signatures
   * compare across runs): re-execute once without address randomization. */
  int pers = personality(0xffffffff);
  if (pers != -1 && !(pers & ADDR_NO_RANDOMIZE) && !getenv("VRF_NO_REEXEC")) {
    setenv("VRF_NO_REEXEC", "1", 1);
    if (personality((unsigned long)pers | ADDR_NO_RANDOMIZE) != -1) execv("/proc/self/exe", argv);
  }
  cli o;
  int r = parse_options(argc, argv, &o);
  if (r >= 0) return r;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (runtime_start(&o)) return 2;
  const vrf_client *cl = rt.client;
  char bound[512];
  snprintf(bound, sizeof bound, "%s; <=%u atomic ops/thread, %d spurious weak-CAS failure%s/thread, spin stutter %d",
           cl->bound ? cl->bound : "client-defined", rt.max_events, rt.spurious, rt.spurious == 1 ? "" : "s",
           rt.stutter);

  if (o.replay) {
    if (parse_choices(rt.shm, o.replay) != 0) {
      fprintf(stderr, "vrf: bad --replay string\n");
      return 2;
    }
    printf("Execution %s of client %s:\n", o.replay, cl->name);
    replay_print(rt.shm);
    if (rt.shm->status == ST_FAIL) printf("FAILED (%s): %s\n", rt.shm->fail_kind, rt.shm->fail_msg);
    return rt.shm->status == ST_FAIL ? 1 : 0;
  }

  if (!xs.quiet) printf("vrf %s: %s\n  bound: %s\n", cl->name, cl->about ? cl->about : "", bound);
  if (rt.weaken_func)
    printf("  mutation: every %s atomic in %s() runs relaxed\n", rt.weaken_mo < 0 ? "non-relaxed" : mo_name(rt.weaken_mo),
           rt.weaken_func);
  if (explore(o.jobs) == 2) return 2;

  bool pass;
  char result[2300];
  if (xs.failed) {
    pass = report_failure(&o, argv[0], result, sizeof result);
  } else if (o.expect && (o.expect_kind || cl->expect)) {
    pass = false;
    snprintf(result, sizeof result, "FAILED: the planted bug (%s) was not found",
             o.expect_kind ? o.expect_kind : cl->expect);
  } else {
    pass = true;
    snprintf(result, sizeof result, "no failure%s", xs.partial ? " (partial: execution limit reached)" : "");
  }
  if (!xs.failed && cl->outcomes && !check_outcomes(result, sizeof result)) pass = false;
  double rate = xs.seconds > 0 ? xs.executions / xs.seconds : 0;
  printf("vrf %s: %s | %lu executions (%lu complete, %lu dropped as redundant), longest %u events | %.2f s, %.0f "
         "executions/s\n",
         cl->name, result, (unsigned long)xs.executions, (unsigned long)xs.complete,
         (unsigned long)(xs.stutter + xs.sleep_blocked), xs.max_events, xs.seconds, rate);
  if (xs.count_graphs) printf("  distinct execution graphs: %lu\n", (unsigned long)xs.distinct);
  printf("VRF-SUMMARY\t%s\t%s\t%lu\t%s\t%.2f\t%.0f\n", cl->name, result, (unsigned long)xs.executions, bound,
         xs.seconds, rate);
  return pass ? 0 : 1;
}
