/* The explorer (parent process): depth-first search over executions with
 * source-DPOR and sleep sets (Abdulla, Aronis, Jonsson, Sagonas, POPL 2014),
 * each execution in a forked child (docs/design/verification.md). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "explore.h"
#include "rt.h"

typedef struct node {
  uint8_t tid, en, sleep, bt, done, created;
  uint16_t choice, nchoices;
  footprint_t fp;
} node_t;

static node_t nd[MAXEV];
static int32_t evck[MAXEV][MAXT];

explore_stats_t xs;

static double now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- races and backtrack points ---- */

/* Threads whose first event in v = notdep(i).j has no predecessor in v. */
static uint8_t initials(int i, int j) {
  int ti = nd[i].tid;
  uint8_t seen = 0, init = 0;
  int first[MAXT];
  int nv = 0;
  static int v[MAXEV];
  for (int k = i + 1; k < j; k++)
    if (evck[k][ti] < i) v[nv++] = k;
  v[nv++] = j;
  for (int x = 0; x < nv; x++) {
    int k = v[x], tk = nd[k].tid;
    if (seen >> tk & 1) continue;
    seen |= (uint8_t)(1u << tk);
    first[tk] = k;
    bool has_pred = false;
    for (int y = 0; y < x && !has_pred; y++) {
      int kk = v[y];
      if (evck[k][nd[kk].tid] >= kk) has_pred = true;
    }
    if (k == j) { /* j's clock includes i itself; only events of v count */
      has_pred = false;
      for (int y = 0; y < x; y++) {
        int kk = v[y];
        if (nd[kk].tid != nd[j].tid && evck[j][nd[kk].tid] >= kk) has_pred = true;
      }
      for (int y = 0; y < x; y++)
        if (nd[v[y]].tid == nd[j].tid) has_pred = true;
    }
    if (!has_pred) init |= (uint8_t)(1u << tk);
  }
  (void)first;
  return init;
}

static void analyze(int n) {
  int32_t ck[MAXT][MAXT];
  for (int t = 0; t < MAXT; t++)
    for (int u = 0; u < MAXT; u++) ck[t][u] = -1;
  static int dep[MAXEV];
  for (int j = 0; j < n; j++) {
    int p = nd[j].tid, nd_ = 0;
    for (int i = 0; i < j; i++)
      if (nd[i].tid != p && fp_dependent(&nd[i].fp, &nd[j].fp)) dep[nd_++] = i;
    for (int x = 0; x < nd_; x++) {
      int i = dep[x], ti = nd[i].tid;
      if (i <= ck[p][ti]) continue; /* ordered through p's own past */
      bool indirect = false;
      for (int y = x + 1; y < nd_ && !indirect; y++)
        if (evck[dep[y]][ti] >= i) indirect = true;
      if (indirect) continue;
      /* a race: try to reverse it at node i */
      uint8_t in = initials(i, j) & nd[i].en;
      if (!in) {
        nd[i].bt |= nd[i].en;
      } else if (!(nd[i].bt & in)) {
        nd[i].bt |= (in >> p & 1) ? (uint8_t)(1u << p) : (uint8_t)(in & -in);
      }
    }
    for (int x = 0; x < nd_; x++)
      for (int u = 0; u < MAXT; u++)
        if (evck[dep[x]][u] > ck[p][u]) ck[p][u] = evck[dep[x]][u];
    ck[p][p] = j;
    for (int u = 0; u < MAXT; u++) evck[j][u] = ck[p][u];
    for (int c = 0; c < MAXT; c++)
      if (nd[j].created >> c & 1)
        for (int u = 0; u < MAXT; u++) ck[c][u] = ck[p][u];
  }
}

/* The next branch: the deepest node with an unexplored data choice or thread.
 * Returns the new prefix length, 0 when the search is complete. */
static uint32_t backtrack(int n, uint8_t *div_sleep) {
  for (int k = n - 1; k >= 0; k--) {
    node_t *x = &nd[k];
    if (x->choice + 1 < x->nchoices) {
      x->choice++;
      *div_sleep = x->sleep | x->done;
      return (uint32_t)k + 1;
    }
    x->done |= (uint8_t)(1u << x->tid);
    uint8_t cand = x->bt & x->en & (uint8_t)~x->done & (uint8_t)~x->sleep;
    if (cand) {
      x->tid = (uint8_t)__builtin_ctz(cand);
      x->choice = 0;
      x->nchoices = 0;
      *div_sleep = x->sleep | x->done;
      return (uint32_t)k + 1;
    }
  }
  return 0;
}

/* ---- children ---- */

static int wait_child(pid_t pid) {
  int st;
  while (waitpid(pid, &st, 0) < 0)
    if (errno != EINTR) return -1;
  return st;
}

static void child_died(shm_t *s, int st) {
  if (s->status == ST_RUNNING) {
    s->status = ST_FAIL;
    snprintf(s->fail_kind, sizeof s->fail_kind, "crash");
    if (WIFSIGNALED(st))
      snprintf(s->fail_msg, sizeof s->fail_msg, "the execution died of signal %d", WTERMSIG(st));
    else
      snprintf(s->fail_msg, sizeof s->fail_msg, "the execution exited with status %d outside the checker",
               WEXITSTATUS(st));
  }
}

void symbolize_and_print(char *text, size_t len) {
  /* collect {pc:HEX} tokens */
  enum { MAXPC = 512 };
  static unsigned long pcs[MAXPC];
  static char *names[MAXPC];
  int npc = 0;
  for (char *p = text; (p = strstr(p, "{pc:")) != NULL; p += 4) {
    unsigned long v = strtoul(p + 4, NULL, 16);
    bool dup = false;
    for (int i = 0; i < npc; i++) dup |= pcs[i] == v;
    if (!dup && npc < MAXPC) pcs[npc++] = v;
  }
  if (npc) {
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
      exe[el] = 0;
      size_t cl = 64 + (size_t)el + (size_t)npc * 20;
      char *cmd = malloc(cl);
      size_t k = (size_t)snprintf(cmd, cl, "addr2line -f -C -p -e '%s'", exe);
      for (int i = 0; i < npc; i++) k += (size_t)snprintf(cmd + k, cl - k, " %#lx", pcs[i]);
      FILE *f = popen(cmd, "r");
      char line[1024];
      for (int i = 0; f && i < npc && fgets(line, sizeof line, f); i++) {
        line[strcspn(line, "\n")] = 0;
        /* "func at /path/file.c:12" -> "file.c:12 (func)" */
        char *at = strstr(line, " at ");
        char buf[1200];
        if (at) {
          *at = 0;
          snprintf(buf, sizeof buf, "%s (%s)", short_file(at + 4), line);
        } else {
          snprintf(buf, sizeof buf, "%s", line);
        }
        names[i] = strdup(buf);
      }
      if (f) pclose(f);
      free(cmd);
    }
  }
  for (char *p = text; p < text + len;) {
    char *q = strstr(p, "{pc:");
    if (!q) {
      fwrite(p, 1, (size_t)(text + len - p), stdout);
      break;
    }
    fwrite(p, 1, (size_t)(q - p), stdout);
    unsigned long v = strtoul(q + 4, NULL, 16);
    const char *name = NULL;
    for (int i = 0; i < npc; i++)
      if (pcs[i] == v) name = names[i];
    if (name) fputs(name, stdout);
    else printf("pc %#lx", v);
    char *e = strchr(q, '}');
    p = e ? e + 1 : q + 4;
  }
  for (int i = 0; i < npc; i++) free(names[i]);
}

/* Replays the execution in s->prefix with the trace on and prints it. */
void replay_print(shm_t *s) {
  int fds[2];
  if (pipe(fds) != 0) {
    perror("vrf: pipe");
    return;
  }
  s->verbose = 1;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    rt.verbose_fd = fds[1];
    run_execution();
  }
  close(fds[1]);
  size_t cap = 1 << 16, len = 0;
  char *text = malloc(cap);
  for (;;) {
    if (len + 4096 > cap) text = realloc(text, cap *= 2);
    ssize_t r = read(fds[0], text + len, cap - len - 1);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    len += (size_t)r;
  }
  close(fds[0]);
  text[len] = 0;
  int st = wait_child(pid);
  child_died(s, st);
  symbolize_and_print(text, len);
  free(text);
  s->verbose = 0;
}

void print_choices(FILE *f, shm_t *s) {
  for (uint32_t k = 0; k < s->prefix_len; k++)
    fprintf(f, "%s%u.%u", k ? "," : "", s->prefix[k].tid, s->prefix[k].choice);
}

int parse_choices(shm_t *s, const char *str) {
  uint32_t k = 0;
  while (*str && k < MAXEV) {
    unsigned t, c;
    int used;
    if (sscanf(str, "%u.%u%n", &t, &c, &used) != 2 || t >= MAXT) return -1;
    s->prefix[k].tid = (uint8_t)t;
    s->prefix[k].choice = (uint16_t)c;
    k++;
    str += used;
    if (*str == ',') str++;
  }
  s->prefix_len = k;
  return 0;
}

static void add_outcome(const char *o) {
  for (int i = 0; i < xs.noutcomes; i++)
    if (strcmp(xs.outcomes[i], o) == 0) {
      xs.outcome_count[i]++;
      return;
    }
  if (xs.noutcomes < MAX_OUTCOMES) {
    xs.outcomes[xs.noutcomes] = strdup(o);
    xs.outcome_count[xs.noutcomes++] = 1;
  }
}

int explore(void) {
  shm_t *s = rt.shm;
  uint32_t L = 0;
  uint8_t div_sleep = 0;
  double t0 = now(), last = t0;
  for (;;) {
    for (uint32_t k = 0; k < L; k++) {
      s->prefix[k].tid = nd[k].tid;
      s->prefix[k].choice = nd[k].choice;
    }
    s->prefix_len = L;
    s->div_sleep = div_sleep;
    s->verbose = 0;
    s->watch_len = 0;
    s->status = ST_RUNNING;
    s->ndecided = 0;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
      perror("vrf: fork");
      return 2;
    }
    if (pid == 0) run_execution();
    int st = wait_child(pid);
    child_died(s, st);
    xs.executions++;
    uint32_t n = s->nev;
    if (n > xs.max_events) xs.max_events = n;
    /* nodes from the divergence point on are new */
    for (uint32_t k = L ? L - 1 : 0; k < n; k++) {
      node_t *x = &nd[k];
      ev_rec_t *e = &s->ev[k];
      if (k + 1 > L) {
        x->tid = e->tid;
        x->en = e->en;
        x->sleep = e->sleep;
        x->bt = (uint8_t)(1u << e->tid);
        x->done = 0;
        x->choice = e->choice;
      }
      x->nchoices = e->nchoices;
      x->created = e->created;
      x->fp = e->fp;
    }
    switch (s->status) {
      case ST_OK:
        xs.complete++;
        if (s->outcome_len) add_outcome(s->outcome);
        break;
      case ST_PRUNED_STUTTER: xs.stutter++; break;
      case ST_SLEEP_BLOCKED: xs.sleep_blocked++; break;
      default: break;
    }
    if (s->status == ST_FAIL) {
      xs.failed = true;
      snprintf(xs.fail_kind, sizeof xs.fail_kind, "%s", s->fail_kind);
      snprintf(xs.fail_msg, sizeof xs.fail_msg, "%s", s->fail_msg);
      /* replay exactly the decided nodes (the failing event's choice included) */
      uint32_t len = s->ndecided;
      for (uint32_t k = 0; k < len; k++) {
        s->prefix[k].tid = s->ev[k].tid;
        s->prefix[k].choice = s->ev[k].choice;
      }
      s->div_sleep = 0;
      s->prefix_len = len;
      s->watch_addr = s->fail_addr;
      s->watch_len = s->fail_len;
      xs.seconds = now() - t0;
      return 1;
    }
    analyze((int)n);
    L = backtrack((int)n, &div_sleep);
    double t = now();
    if (!xs.quiet && t - last >= 10) {
      fprintf(stderr, "vrf %s: %lu executions, %.0f s, %.0f/s\n", rt.client->name, (unsigned long)xs.executions,
              t - t0, xs.executions / (t - t0));
      last = t;
    }
    if (L == 0) break;
    if (xs.limit && xs.executions >= xs.limit) {
      xs.partial = true;
      break;
    }
  }
  xs.seconds = now() - t0;
  return 0;
}
