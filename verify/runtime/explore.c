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
  uint8_t tid, en, sleep, bt, done, created, imm, ready;
  uint16_t choice, nchoices;
  int32_t rf;
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

/* Event i (earlier) and j (later) must stay in this order: j writes what i
 * read, or j read what i wrote. A load that read an older message than an
 * earlier store would have read the same before it: no order between them. */
static bool ordered(int i, int j) {
  const footprint_t *a = &nd[i].fp, *b = &nd[j].fp;
  if (!fp_dependent(a, b)) return false;
  if (fp_reversible(a, b)) return true;
  if (b->any || b->n != 1 || nd[j].rf == RF_UNKNOWN) return true;
  return nd[j].rf == i;
}

static void analyze(int n) {
  int32_t ck[MAXT][MAXT];
  for (int t = 0; t < MAXT; t++)
    for (int u = 0; u < MAXT; u++) ck[t][u] = -1;
  static int dep[MAXEV];
  for (int j = 0; j < n; j++) {
    int p = nd[j].tid, nd_ = 0;
    for (int i = 0; i < j; i++)
      if (nd[i].tid != p && ordered(i, j)) dep[nd_++] = i;
    for (int x = 0; x < nd_; x++) {
      int i = dep[x], ti = nd[i].tid;
      if (i <= ck[p][ti]) continue; /* ordered through p's own past */
      bool indirect = false;
      for (int y = x + 1; y < nd_ && !indirect; y++)
        if (evck[dep[y]][ti] >= i) indirect = true;
      if (indirect) continue;
      if (!fp_reversible(&nd[i].fp, &nd[j].fp)) continue;
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
    if (rt.canonical) { /* a thread may run only if no lower one is ready with an operation that reads nothing */
      uint8_t ok = 0;
      for (int p = 0; p < MAXT; p++)
        if (!(x->en & x->imm & ((1u << p) - 1))) ok |= (uint8_t)(1u << p);
      cand = x->en & x->ready & ok & (uint8_t)~x->done;
    }
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

/* Data symbols of the program (nm -n), to name addresses in the image. */
typedef struct dsym {
  unsigned long off;
  char *name;
} dsym_t;
static dsym_t *dsyms;
static size_t ndsyms;

static void load_data_symbols(const char *exe) {
  if (dsyms) return;
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "nm -n '%s' 2>/dev/null", exe);
  FILE *f = popen(cmd, "r");
  char line[1024];
  size_t cap = 0;
  while (f && fgets(line, sizeof line, f)) {
    unsigned long off;
    char type, name[900];
    if (sscanf(line, "%lx %c %899s", &off, &type, name) != 3) continue;
    if (!strchr("bBdDrRgGsS", type)) continue;
    if (ndsyms == cap) dsyms = realloc(dsyms, (cap = cap ? cap * 2 : 1024) * sizeof *dsyms);
    dsyms[ndsyms].off = off;
    dsyms[ndsyms].name = strdup(name);
    ndsyms++;
  }
  if (f) pclose(f);
}

static void print_data(unsigned long off) {
  size_t lo = 0, hi = ndsyms;
  while (lo < hi) { /* last symbol at or below off */
    size_t mid = (lo + hi) / 2;
    if (dsyms[mid].off <= off) lo = mid + 1;
    else hi = mid;
  }
  if (lo == 0) {
    printf("%#lx", off);
    return;
  }
  const dsym_t *d = &dsyms[lo - 1];
  if (off == d->off) printf("%s", d->name);
  else printf("%s+%lu", d->name, off - d->off);
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
          char *disc = strstr(at + 4, " (discriminator");
          if (disc) *disc = 0;
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
  if (strstr(text, "{data:")) {
    char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (el > 0) {
      exe[el] = 0;
      load_data_symbols(exe);
    }
  }
  for (char *p = text; p < text + len;) {
    char *q = strstr(p, "{pc:"), *qd = strstr(p, "{data:");
    if (qd && (!q || qd < q)) {
      fwrite(p, 1, (size_t)(qd - p), stdout);
      print_data(strtoul(qd + 6, NULL, 16));
      char *e = strchr(qd, '}');
      p = e ? e + 1 : qd + 6;
      continue;
    }
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

static bool add_graph(uint64_t sig) {
  static uint64_t *set;
  static size_t cap, n;
  if (n * 2 >= cap) { /* open addressing, rebuilt when half full */
    size_t nc = cap ? cap * 2 : 4096;
    uint64_t *ns = calloc(nc, sizeof *ns);
    for (size_t i = 0; i < cap; i++)
      if (set[i])
        for (size_t h = set[i] & (nc - 1);; h = (h + 1) & (nc - 1))
          if (!ns[h]) {
            ns[h] = set[i];
            break;
          }
    free(set);
    set = ns;
    cap = nc;
  }
  if (!sig) sig = 1;
  for (size_t h = sig & (cap - 1);; h = (h + 1) & (cap - 1)) {
    if (set[h] == sig) return false;
    if (!set[h]) {
      set[h] = sig;
      n++;
      xs.distinct++;
      return true;
    }
  }
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

/* Statistics of one finished execution. */
static void account(const shm_t *s) {
  xs.executions++;
  if (s->nev > xs.max_events) xs.max_events = s->nev;
  switch (s->status) {
    case ST_OK:
      xs.complete++;
      if (xs.count_graphs && add_graph(s->sig) && xs.list_graphs) {
        printf("graph %016lx: ", (unsigned long)s->sig);
        for (uint32_t k = 0; k < s->nev; k++) printf("%s%u.%u", k ? "," : "", s->ev[k].tid, s->ev[k].choice);
        printf("\n");
      }
      if (s->outcome_len) add_outcome(s->outcome);
      break;
    case ST_PRUNED_STUTTER: xs.stutter++; break;
    case ST_FAIL: break;
    default: xs.sleep_blocked++; break;
  }
}

/* Keeps the failure and sets s up to replay exactly its decided steps (the
 * failing event's choice included), watching the culprit address. */
static void prepare_replay(shm_t *s) {
  xs.failed = true;
  snprintf(xs.fail_kind, sizeof xs.fail_kind, "%s", s->fail_kind);
  snprintf(xs.fail_msg, sizeof xs.fail_msg, "%s", s->fail_msg);
  uint32_t len = s->ndecided;
  for (uint32_t k = 0; k < len; k++) {
    s->prefix[k].tid = s->ev[k].tid;
    s->prefix[k].choice = s->ev[k].choice;
  }
  s->prefix_len = len;
  s->div_sleep = 0;
  s->watch_addr = s->fail_addr;
  s->watch_len = s->fail_len;
}

/* Resets the shared state of one execution whose prefix is set and forks the
 * child that runs it; -1 (reported) when fork fails. The parent's buffered
 * output is flushed first so that the child does not print it again. */
static pid_t fork_execution(shm_t *s) {
  s->verbose = 0;
  s->watch_len = 0;
  s->status = ST_RUNNING;
  s->ndecided = 0;
  fflush(stdout);
  fflush(stderr);
  pid_t pid = fork();
  if (pid < 0) perror("vrf: fork");
  if (pid == 0) run_execution();
  return pid;
}

static int explore_dpor(void) {
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
    pid_t pid = fork_execution(s);
    if (pid < 0) return 2;
    int st = wait_child(pid);
    child_died(s, st);
    uint32_t n = s->nev;
    /* nodes from the divergence point on are new; an execution dropped inside
     * an event still has that node, whose other alternatives remain */
    uint32_t nn = n;
    if (s->status != ST_OK && s->status != ST_FAIL && s->ndecided == n + 1) {
      nn = n + 1;
      s->ev[n].fp = (footprint_t){0};
    }
    for (uint32_t k = L ? L - 1 : 0; k < nn; k++) {
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
      x->imm = e->imm;
      x->ready = e->ready;
      x->rf = e->rf;
      x->fp = e->fp;
    }
    account(s);
    if (s->status == ST_FAIL) {
      prepare_replay(s);
      xs.seconds = now() - t0;
      return 1;
    }
    if (xs.no_dpor || rt.canonical)
      for (uint32_t k = 0; k < n; k++) nd[k].bt = nd[k].en, nd[k].sleep = 0;
    else
      analyze((int)n);
    L = backtrack((int)nn, &div_sleep);
    if (xs.no_dpor || rt.canonical) div_sleep = 0;
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

/* ---- canonical (and exhaustive) exploration: a tree expanded from traces ----
 * Which branches exist below a node does not depend on other branches, so
 * several executions run at once in separate children. Each work item is a
 * prefix of (thread, choice); a returned trace adds its unexplored siblings. */

typedef struct item {
  uint32_t len;
  bool newthread; /* the last entry starts a thread's first data choice */
  struct {
    uint8_t tid;
    uint16_t choice;
  } p[];
} item_t;

static item_t **stack;
static size_t nstack, capstack;

static void push_item(const shm_t *s, uint32_t k, uint8_t tid, uint16_t choice, bool newthread) {
  item_t *it = malloc(sizeof *it + (k + 1) * sizeof it->p[0]);
  if (!it) {
    perror("vrf");
    exit(2);
  }
  for (uint32_t i = 0; i < k; i++) {
    it->p[i].tid = s->ev[i].tid;
    it->p[i].choice = s->ev[i].choice;
  }
  it->p[k].tid = tid;
  it->p[k].choice = choice;
  it->len = k + 1;
  it->newthread = newthread;
  if (nstack == capstack) {
    capstack = capstack ? capstack * 2 : 1024;
    stack = realloc(stack, capstack * sizeof *stack);
  }
  stack[nstack++] = it;
}

/* Threads that may run at node k besides the one that did (see decide()). */
static uint8_t alternatives(const ev_rec_t *e) {
  if (xs.no_dpor) return e->en;
  uint8_t ok = 0;
  for (int p = 0; p < MAXT; p++)
    if (!(e->en & e->imm & ((1u << p) - 1))) ok |= (uint8_t)(1u << p);
  return e->en & e->ready & ok;
}

static void expand(const shm_t *s, const item_t *it) {
  uint32_t n = s->nev, nn = n;
  if (s->status != ST_OK && s->status != ST_FAIL && s->ndecided == n + 1) nn = n + 1;
  uint32_t L = it ? it->len : 0;
  if (L > 0 && it->newthread && L - 1 < nn) {
    const ev_rec_t *e = &s->ev[L - 1];
    for (unsigned c = 1; c < e->nchoices; c++) push_item(s, L - 1, e->tid, (uint16_t)c, false);
  }
  for (uint32_t k = L; k < nn; k++) {
    const ev_rec_t *e = &s->ev[k];
    for (unsigned c = 1; c < e->nchoices; c++) push_item(s, k, e->tid, (uint16_t)c, false);
    uint8_t alt = alternatives(e) & (uint8_t)~(1u << e->tid);
    for (int q = 0; q < MAXT; q++)
      if (alt >> q & 1) push_item(s, k, (uint8_t)q, 0, true);
  }
}

static int explore_tree(int workers) {
  shm_t *shms[16];
  pid_t pids[16];
  item_t *items[16];
  for (int w = 0; w < workers; w++) {
    shms[w] = w == 0 ? rt.shm : mmap(NULL, sizeof(shm_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (shms[w] == MAP_FAILED) {
      perror("vrf: shared memory");
      return 2;
    }
    pids[w] = 0;
    items[w] = NULL;
  }
  double t0 = now(), last = t0;
  bool started = false, stop = false;
  int running = 0, failed_w = -1;
  for (;;) {
    /* launch */
    for (int w = 0; w < workers && !stop; w++) {
      if (pids[w]) continue;
      item_t *it = NULL;
      if (!started) {
        started = true;
      } else if (nstack) {
        it = stack[--nstack];
      } else {
        break;
      }
      shm_t *s = shms[w];
      s->prefix_len = it ? it->len : 0;
      for (uint32_t k = 0; it && k < it->len; k++) {
        s->prefix[k].tid = it->p[k].tid;
        s->prefix[k].choice = it->p[k].choice;
      }
      s->div_sleep = 0;
      s->nev = 0;
      rt.shm = s;
      pid_t pid = fork_execution(s);
      if (pid < 0) return 2;
      pids[w] = pid;
      items[w] = it;
      running++;
    }
    if (running == 0) break;
    int st;
    pid_t pid = waitpid(-1, &st, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      perror("vrf: waitpid");
      return 2;
    }
    int w = 0;
    while (w < workers && pids[w] != pid) w++;
    if (w == workers) continue;
    pids[w] = 0;
    running--;
    shm_t *s = shms[w];
    child_died(s, st);
    account(s);
    if (s->status == ST_FAIL) {
      if (failed_w < 0) {
        failed_w = w;
        stop = true;
      }
    } else if (!stop) {
      expand(s, items[w]);
    }
    free(items[w]);
    items[w] = NULL;
    double t = now();
    if (!xs.quiet && t - last >= 10) {
      fprintf(stderr, "vrf %s: %lu executions, %zu branches pending, %.0f s, %.0f/s\n", rt.client->name,
              (unsigned long)xs.executions, nstack, t - t0, xs.executions / (t - t0));
      last = t;
    }
    if (xs.limit && xs.executions >= xs.limit && !stop) {
      xs.partial = nstack > 0;
      stop = true;
    }
  }
  xs.seconds = now() - t0;
  for (size_t i = 0; i < nstack; i++) free(stack[i]);
  nstack = 0;
  if (failed_w >= 0) {
    prepare_replay(shms[failed_w]);
    rt.shm = shms[failed_w];
    return 1;
  }
  return 0;
}

int explore(int workers) {
  if (rt.canonical || xs.no_dpor) return explore_tree(workers < 1 ? 1 : workers > 16 ? 16 : workers);
  return explore_dpor();
}
