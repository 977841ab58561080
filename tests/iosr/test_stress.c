/* Randomized stress of everything issue 22 names at once: APPS app processes
 * write, read, discard (MADV_DONTNEED, MADV_FREE), mremap, mprotect, mlock and
 * fork (each child checks every page it inherited, zeros in a
 * MADV_WIPEONFORK region), while the test reclaims random apps into a swap
 * area smaller than all their memory, and SIGKILLs iosrd in the middle of a
 * reclaim and restarts it. Every app checks every byte of its memory against
 * a shadow (page versions) throughout and at the end; at the end the slots in
 * use must equal the pages swapped plus the clean ones (read back, not
 * written since: they keep their slots).
 *
 *   test_stress global|process SEED [OPS [CLEAN [MOVEOUT]]]
 *
 * OPS (default 300) is the operations per app per phase; CLEAN 1 runs with
 * clean pages keeping their slots (IOSR_CLEAN_PAGES=1; default 0, as the
 * daemon's default); MOVEOUT 0 has every page dropped by the dropper's
 * madvise (IOSR_MOVEOUT=0; default 1: moved out where the kernel can, which
 * a fork's shared pages and locked ranges cannot). make test runs the defaults
 * and two seeds with MOVEOUT 0; scripts/iosr-stress.sh
 * runs many seeds, longer phases, and odd seeds with CLEAN 1.
 *
 * Deterministic per seed in what each app does; how the operations
 * interleave with reclaim varies from run to run, and any interleaving must
 * pass. */
#include "gate.h"
#include "util.h"

#include <poll.h>
#include <time.h>

#define APPS 4
#define NP 1024u   /* pages of an app's main region */
#define NW 64u     /* pages of its MADV_WIPEONFORK region */
#define NS 64u     /* pages of its scratch area (mremap target) */
#define OPS 300    /* operations per phase, unless the command line says */
#define PHASE_HANG_S 120 /* a phase that takes longer hangs */
#define HOLD 20    /* operations a protected or locked range stays so */

#define WSEED(s) ((s)->seed | 1ull << 62) /* the wiped region's contents: no app's main pages */

enum { K_DATA = 0, K_ZERO = 1, K_MAYBE = 2 }; /* MAYBE: MADV_FREE'd, reads old data or zero */

typedef struct shadow {
  uint8_t *p, *w, *scratch;
  uint32_t ver[NP], wver[NW];
  uint8_t kind[NP];
  uint64_t seed, rng;
  uint64_t prot_lo, prot_hi, prot_until; /* [lo, hi) PROT_NONE until op prot_until */
  uint64_t lock_lo, lock_hi, lock_until;
  uint64_t op;
  int id;
  struct { uint64_t op; uint32_t a, n; char what; } hist[256]; /* the last operations, for a failure report */
  uint32_t nhist;
} shadow;

static char sock[300], swap[256];
static int ops = OPS;

static uint64_t rnd(shadow *s) { return s->rng = iosr_mix(s->rng + 0x9e3779b97f4a7c15ull); }

static int page_ok(const shadow *s, uint64_t i) {
  const uint8_t *q = s->p + i * 4096;
  int data = iosr_check(q, s->seed, i, s->ver[i]);
  return s->kind[i] == K_DATA ? data : s->kind[i] == K_ZERO ? iosr_is_zero(q) : data || iosr_is_zero(q);
}

static int in_range(uint64_t a, uint64_t b, uint64_t lo, uint64_t hi) { return a < hi && lo < b; }

/* A page run [a, a+n) that avoids the protected and locked ranges. */
static int pick_run(shadow *s, uint64_t maxn, uint64_t *a, uint64_t *n) {
  for (int t = 0; t < 8; t++) {
    *n = 1 + rnd(s) % maxn;
    *a = rnd(s) % (NP - *n + 1);
    if (!in_range(*a, *a + *n, s->prot_lo, s->prot_hi) && !in_range(*a, *a + *n, s->lock_lo, s->lock_hi)) return 1;
  }
  return 0;
}

static void note(shadow *s, char what, uint64_t a, uint64_t n) {
  s->hist[s->nhist++ % 256] = (typeof(s->hist[0])){s->op, (uint32_t)a, (uint32_t)n, what};
}

/* What a wrong page holds: zero, or which (app, page, version) wrote it. */
static void identify(const shadow *s, const uint8_t *q) {
  if (iosr_is_zero(q)) {
    fprintf(stderr, "  it reads zero\n");
    return;
  }
  uint64_t base = s->seed - (uint64_t)s->id;
  for (int app = 0; app < APPS; app++)
    for (uint64_t k = 0; k < 2; k++)
      for (uint64_t i = 0; i < NP; i++)
        for (uint64_t v = 0; v < 64; v++)
          if (iosr_check(q, k ? (base + (uint64_t)app) | 1ull << 62 : base + (uint64_t)app, i, v)) {
            fprintf(stderr, "  it holds app s%d's %s page %llu, version %llu\n", app, k ? "wiped-region" : "main",
                    (unsigned long long)i, (unsigned long long)v);
            return;
          }
  fprintf(stderr, "  it holds bytes no app wrote (first word %#llx)\n", (unsigned long long)*(const uint64_t *)q);
}

static void fail_at(shadow *s, const char *what, uint64_t i, const uint8_t *q) {
  fprintf(stderr, "app s%d, op %llu: %s (page %llu at %p, kind %d, version %u)\n", s->id, (unsigned long long)s->op,
          what, (unsigned long long)i, i < NP ? (void *)(s->p + i * 4096) : (void *)(s->w + (i - NP) * 4096),
          i < NP ? s->kind[i] : -1, i < NP ? s->ver[i] : 0);
  if (q) identify(s, q);
  for (uint32_t k = s->nhist > 256 ? s->nhist - 256 : 0; k < s->nhist; k++) {
    typeof(s->hist[0]) *h = &s->hist[k % 256];
    if (i >= h->a && i < (uint64_t)h->a + h->n)
      fprintf(stderr, "  op %llu: %c pages %u+%u\n", (unsigned long long)h->op, h->what, h->a, h->n);
  }
  _exit(1);
}

static void fail(shadow *s, const char *what, uint64_t i) { fail_at(s, what, i, NULL); }

static void check_all(shadow *s, int child) {
  for (uint64_t i = 0; i < NP; i++) {
    if (in_range(i, i + 1, s->prot_lo, s->prot_hi)) continue;
    if (!page_ok(s, i)) fail_at(s, child ? "the fork child read other bytes" : "other bytes", i, s->p + i * 4096);
  }
  for (uint64_t i = 0; i < NW; i++) {
    const uint8_t *q = s->w + i * 4096;
    if (child ? !iosr_is_zero(q) : !iosr_check(q, WSEED(s), i, s->wver[i]))
      fail_at(s, child ? "the fork child read data in its wiped region" : "wipe-on-fork region page differs", NP + i, q);
  }
}

static void write_page(shadow *s, uint64_t i) {
  iosr_fill(s->p + i * 4096, s->seed, i, ++s->ver[i]);
  s->kind[i] = K_DATA;
}

static void do_fork(shadow *s) {
  note(s, 'f', 0, NP);
  pid_t c = fork();
  if (c < 0) fail(s, "fork failed", 0);
  if (c == 0) {
    check_all(s, 1);
    for (int k = 0; k < 8; k++) {
      uint64_t a, n;
      if (!pick_run(s, 1, &a, &n)) continue;
      write_page(s, a);
      if (!page_ok(s, a)) fail_at(s, "the fork child's own write", a, s->p + a * 4096);
    }
    _exit(0);
  }
  int st = wait_child(c, 240, "a fork child");
  if (!WIFEXITED(st) || WEXITSTATUS(st)) fail(s, "a fork child failed (see above)", 0);
}

static void do_remap(shadow *s) {
  uint64_t a, n;
  if (!pick_run(s, NS, &a, &n)) return;
  uint8_t *from = s->p + a * 4096;
  if (mremap(from, n * 4096, n * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, s->scratch) != s->scratch)
    fail(s, "mremap away failed", a);
  note(s, 'm', a, n);
  for (uint64_t k = 0; k < n; k++) {
    const uint8_t *q = s->scratch + k * 4096;
    int data = iosr_check(q, s->seed, a + k, s->ver[a + k]);
    int ok = s->kind[a + k] == K_DATA ? data : s->kind[a + k] == K_ZERO ? iosr_is_zero(q) : data || iosr_is_zero(q);
    if (!ok) fail_at(s, "a moved page reads other bytes", a + k, q);
  }
  if (mremap(s->scratch, n * 4096, n * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, from) != from)
    fail(s, "mremap back failed", a);
  /* the scratch range is unmapped now: keep it reserved */
  if (mmap(s->scratch, NS * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != s->scratch)
    fail(s, "re-reserving the scratch area failed", 0);
}

static void end_holds(shadow *s) {
  if (s->prot_hi && s->op >= s->prot_until) {
    if (mprotect(s->p + s->prot_lo * 4096, (s->prot_hi - s->prot_lo) * 4096, PROT_READ | PROT_WRITE))
      fail(s, "mprotect back failed", s->prot_lo);
    s->prot_lo = s->prot_hi = 0;
  }
  if (s->lock_hi && s->op >= s->lock_until) {
    if (munlock(s->p + s->lock_lo * 4096, (s->lock_hi - s->lock_lo) * 4096)) fail(s, "munlock failed", s->lock_lo);
    s->lock_lo = s->lock_hi = 0;
  }
}

static void one_op(shadow *s) {
  uint64_t a, n, r = rnd(s) % 100;
  end_holds(s);
  if (r < 40) {
    if (pick_run(s, 1, &a, &n)) write_page(s, a), note(s, 'w', a, 1);
  } else if (r < 55) {
    for (int k = 0; k < 16; k++)
      if (pick_run(s, 1, &a, &n) && !page_ok(s, a)) fail_at(s, "other bytes", a, s->p + a * 4096);
  } else if (r < 67) {
    if (!pick_run(s, 32, &a, &n)) return;
    int freeing = r >= 62;
    if (madvise(s->p + a * 4096, n * 4096, freeing ? MADV_FREE : MADV_DONTNEED)) fail(s, "madvise failed", a);
    note(s, freeing ? 'F' : 'D', a, n);
    for (uint64_t k = a; k < a + n; k++) s->kind[k] = freeing && s->kind[k] != K_ZERO ? K_MAYBE : K_ZERO;
  } else if (r < 72) {
    do_remap(s);
  } else if (r < 76) {
    if (s->prot_hi || !pick_run(s, 32, &a, &n)) return;
    if (mprotect(s->p + a * 4096, n * 4096, PROT_NONE)) fail(s, "mprotect failed", a);
    note(s, 'p', a, n);
    s->prot_lo = a, s->prot_hi = a + n, s->prot_until = s->op + HOLD;
  } else if (r < 80) {
    if (s->lock_hi || !pick_run(s, 32, &a, &n)) return;
    if (mlock(s->p + a * 4096, n * 4096)) fail(s, "mlock failed", a);
    note(s, 'l', a, n);
    s->lock_lo = a, s->lock_hi = a + n, s->lock_until = s->op + HOLD;
  } else if (r < 83) {
    do_fork(s);
  } else if (r < 86) {
    uint64_t i = rnd(s) % NW;
    iosr_fill(s->w + i * 4096, WSEED(s), i, ++s->wver[i]);
  } else {
    if (!pick_run(s, 64, &a, &n)) return;
    for (uint64_t k = a; k < a + n; k++) write_page(s, k);
    note(s, 'W', a, n);
  }
}

static void app_main(int id, uint64_t seed, int in, int out) {
  char log[320], name[16];
  snprintf(log, sizeof log, "%s/app%d.log", iosr_test_dir, id);
  int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  dup2(fd, 2);
  snprintf(name, sizeof name, "s%d", id);
  iosr_connect_opts o = {.app_name = name, .socket_path = sock};
  iosr_ctx *ctx = iosr_connect(&o);
  CHECK(ctx);
  static shadow sh;
  shadow *s = &sh;
  s->id = id;
  s->seed = seed * 100 + (uint64_t)id;
  s->rng = s->seed;
  iosr_region *r = iosr_region_create(ctx, NP * 4096), *w = iosr_region_create(ctx, NW * 4096);
  CHECK(r && w);
  s->p = iosr_region_base(r);
  s->w = iosr_region_base(w);
  s->scratch = mmap(NULL, NS * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(s->scratch != MAP_FAILED);
  CHECK(madvise(s->w, NW * 4096, MADV_WIPEONFORK) == 0);
  for (uint64_t i = 0; i < NP; i++) write_page(s, i);
  for (uint64_t i = 0; i < NW; i++) iosr_fill(s->w + i * 4096, WSEED(s), i, s->wver[i]);
  chan_send(out, 'r');
  for (;;) {
    char c = chan_recv(in);
    if (c == 'a') {
      for (int k = 0; k < ops; k++, s->op++) {
        one_op(s);
        if (s->op % 50 == 49) check_all(s, 0);
      }
      chan_send(out, 'd');
    } else if (c == 'v') {
      s->prot_until = s->lock_until = 0;
      end_holds(s);
      check_all(s, 0);
      chan_send(out, 'o');
    } else {
      break;
    }
  }
  CHECK(iosr_region_destroy(r) == 0 && iosr_region_destroy(w) == 0);
  CHECK(iosr_disconnect(ctx) == 0);
  _exit(0);
}

typedef struct driver {
  const char *set;
  char dlog[320];
  pid_t daemon;
  iosr_ctl *ctl;
  uint64_t rng, reclaims, restarts;
  int swapped_at_kill[APPS]; /* the app had pages on the swap area when iosrd died: it must resume */
  int to[APPS], from[APPS];
  pid_t app[APPS];
} driver;

static iosr_ctl *ctl_reopen(driver *d) {
  if (d->ctl) iosr_ctl_close(d->ctl);
  d->ctl = NULL;
  for (int i = 0; i < 1000 && !(d->ctl = iosr_ctl_open(sock)); i++) usleep(10000);
  CHECK(d->ctl, "no control connection: %s", strerror(errno));
  return d->ctl;
}

/* One reclaim of a random app (all of it, or some of its pages). */
static void reclaim_some(driver *d) {
  char name[16];
  uint64_t x = iosr_mix(++d->rng);
  snprintf(name, sizeof name, x % 5 ? "s%d" : "--background", (int)(x % APPS));
  uint64_t bytes = x % 3 ? 0 : (1 + (x >> 8) % NP) * 4096ull, got;
  if (iosr_ctl_reclaim(d->ctl, name, bytes, &got) && (errno == ECONNRESET || errno == EPIPE)) ctl_reopen(d);
  d->reclaims++;
}

/* Sends c to every app; reclaims until each has answered want. */
static void phase(driver *d, char c, char want) {
  for (int a = 0; a < APPS; a++) chan_send(d->to[a], c);
  int left = APPS, done[APPS] = {0};
  struct timespec t0, t;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  while (left) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    if (t.tv_sec - t0.tv_sec > PHASE_HANG_S) {
      for (int a = 0; a < APPS; a++)
        if (!done[a]) fprintf(stderr, "app s%d (pid %d) has not answered '%c'\n", a, (int)d->app[a], want);
      FAIL("phase '%c' hung: the apps did not finish within %d s (see their logs in %s)", c, PHASE_HANG_S,
           iosr_test_dir);
    }
    if (want == 'd') reclaim_some(d);
    struct pollfd pf[APPS];
    for (int a = 0; a < APPS; a++) pf[a] = (struct pollfd){done[a] ? -1 : d->from[a], POLLIN, 0};
    if (poll(pf, APPS, want == 'd' ? 0 : 1000) <= 0) continue;
    for (int a = 0; a < APPS; a++)
      if (!done[a] && pf[a].revents) {
        char r = chan_recv(d->from[a]);
        CHECK(r == want, "app s%d failed (answered '%c'; see %s/app%d.log)", a, r ? r : '0', iosr_test_dir, a);
        done[a] = 1;
        left--;
      }
  }
}

static void progress(const driver *d, const char *what) {
  printf("%s (%llu reclaims so far)\n", what, (unsigned long long)d->reclaims);
  fflush(stdout);
}

/* Pages of app a on the swap area only, plus (with clean) the clean ones:
 * read back, not written since, holding their slots. */
static uint64_t app_swapped(driver *d, int a, int *known, int clean) {
  char name[16];
  snprintf(name, sizeof name, "s%d", a);
  iosr_app_stats st;
  *known = iosr_ctl_app_stats(d->ctl, name, &st) == 0;
  CHECK(*known || errno == ESRCH, "statistics of app s%d: %s", a, strerror(errno));
  return *known ? st.swapped_pages + (clean ? st.clean_pages : 0) : 0;
}

/* Kills iosrd once a reclaim of every app is writing, and starts it again.
 * Each app first gets some pages onto the swap area (where there is room), so
 * that it resumes with the new daemon: one with none left IOSR and goes on
 * with ordinary memory (design note section 12). */
static void kill_during_reclaim(driver *d) {
  for (int a = 0; a < APPS; a++) {
    char name[16];
    uint64_t got;
    int known;
    snprintf(name, sizeof name, "s%d", a);
    iosr_ctl_reclaim(d->ctl, name, 64 * 4096, &got); /* ENOSPC: the area is full, others have pages there */
    d->swapped_at_kill[a] = app_swapped(d, a, &known, 0) > 0;
  }
  pid_t t = fork();
  CHECK(t >= 0);
  if (t == 0) {
    char out[256];
    _exit(iosr_tool(sock, "reclaim --background", out, sizeof out));
  }
  uint64_t w0 = iosr_test_stat(d->ctl, "\"writes\":");
  for (int i = 0; i < 3000 && iosr_test_stat(d->ctl, "\"writes\":") == w0; i++) usleep(1000);
  kill(d->daemon, SIGKILL);
  waitpid(d->daemon, NULL, 0);
  waitpid(t, NULL, 0);
  d->daemon = iosr_test_daemon(swap, sock, d->set, d->dlog);
  d->restarts++;
  ctl_reopen(d);
}

int main(int argc, char **argv) {
  if (argc < 3 || argc > 6 || (strcmp(argv[1], "global") && strcmp(argv[1], "process")) ||
      (argc >= 4 && (ops = atoi(argv[3])) <= 0) || (argc >= 5 && strcmp(argv[4], "0") && strcmp(argv[4], "1")) ||
      (argc == 6 && strcmp(argv[5], "0") && strcmp(argv[5], "1"))) {
    fprintf(stderr, "usage: test_stress global|process SEED [OPS [CLEAN [MOVEOUT]]]\n");
    return 2;
  }
  iosr_test_require();
  if (geteuid() != 0) {
    printf("SKIP: the apps fork, and fork needs the userfaultfd FORK event (CAP_SYS_PTRACE: root)\n");
    return 77;
  }
  uint64_t seed = strtoull(argv[2], NULL, 10);
  /* smaller than the apps' memory: some reclaims find the area full */
  iosr_test_swap(swap, sizeof swap, (uint64_t)(APPS * NP * 3 / 4 + 1) * 4096);
  snprintf(sock, sizeof sock, "%s/sock", iosr_test_dir);
  static driver d;
  char set[160];
  /* CLEAN 1: clean pages keep their slot (IOSR_CLEAN_PAGES, off by default) */
  int clean = argc >= 5 && argv[4][0] == '1';
  /* MOVEOUT 0: every page leaves through the dropper's madvise (IOSR_MOVEOUT) */
  int moveout = argc < 6 || argv[5][0] == '1';
  snprintf(set, sizeof set, "slot=%s,reclaim_batch=64,restart_grace_ms=200,clean_pages=%d,moveout=%d", argv[1], clean,
           moveout);
  d.set = set;
  d.rng = seed;
  snprintf(d.dlog, sizeof d.dlog, "%s/iosrd.log", iosr_test_dir);
  d.daemon = iosr_test_daemon(swap, sock, set, d.dlog);
  for (int a = 0; a < APPS; a++) {
    d.app[a] = iosr_test_fork(&d.to[a], &d.from[a]);
    if (!d.app[a]) app_main(a, seed, d.from[a], d.to[a]);
  }
  for (int a = 0; a < APPS; a++) CHECK(chan_recv(d.from[a]) == 'r', "app s%d did not start", a);
  ctl_reopen(&d);
  phase(&d, 'a', 'd');
  progress(&d, "first operations");
  kill_during_reclaim(&d);
  progress(&d, "daemon restarted");
  phase(&d, 'v', 'o');
  progress(&d, "checked after the restart");
  phase(&d, 'a', 'd');
  progress(&d, "second operations");
  phase(&d, 'v', 'o');
  CHECK(iosr_ctl_wait_idle(d.ctl) == 0);
  uint64_t sw = 0;
  for (int a = 0; a < APPS; a++) {
    int known;
    sw += app_swapped(&d, a, &known, 1);
    CHECK(known || !d.swapped_at_kill[a], "app s%d had pages swapped when iosrd died but did not resume", a);
  }
  uint64_t used = iosr_test_stat(d.ctl, "\"used\":"), moved = iosr_test_stat(d.ctl, "\"moveout\":{\"pages\":");
  CHECK(used == sw, "%llu slots used for %llu swapped and clean pages", (unsigned long long)used, (unsigned long long)sw);
  for (int a = 0; a < APPS; a++) chan_send(d.to[a], 'q');
  for (int a = 0; a < APPS; a++) {
    int st = wait_child(d.app[a], 120, "an app");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "app s%d ended with status %#x", a, st);
  }
  iosr_ctl_close(d.ctl);
  iosr_test_stop_daemon(d.daemon);
  iosr_test_cleanup();
  printf("stress [%s, seed %llu]: %d apps x %d ops, %llu reclaims, %llu daemon restart, %llu pages moved out since "
         "it: every byte intact\n", argv[1], (unsigned long long)seed, APPS, 2 * ops, (unsigned long long)d.reclaims,
         (unsigned long long)d.restarts, (unsigned long long)moved);
  return 0;
}
