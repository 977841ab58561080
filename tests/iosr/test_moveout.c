/* Move-out (design note section 3, "Moved out"): written pages leave the app
 * by UFFDIO_MOVE into its graveyard, and the kernel's refusals send them to
 * the dropper's madvise instead; either way every page comes back as it was.
 *
 *   reclaim        a region reclaimed whole: every page is moved out (a run
 *                  met while the dropper's graveyard discard is unread is
 *                  tried again once it is read), none is left resident,
 *                  the graveyard is emptied and uncharged once the reclaim
 *                  is done, and every page reads back its bytes
 *   fork-shared    the app is reclaimed while a fork child shares its pages,
 *                  then, read back clean (IOSR_CLEAN_PAGES=1: no copy, no
 *                  write), while a second child shares them: each page leaves
 *                  the app, moved out or (where the kernel refuses a shared
 *                  page) dropped; parent and children read their bytes
 *   event-pending  the app's discard of another region is waiting to be read
 *                  when the writes complete: the kernel refuses the move
 *                  (EAGAIN, the engine's view may be stale) and moves none;
 *                  once the engine reads the event, the moves are tried
 *                  again and take the pages; every page reads back its
 *                  bytes
 *
 *   dropper-hold   the dropper makes the moves (as under iosrd: test hook
 *                  IOSR_TEST_DROPPER_MOVES); once the engine has named the
 *                  pages of a drop, it reads none of the app's events until
 *                  the dropper answers: the app's discard of another region
 *                  waits, the kernel refuses the moves, those pages stay
 *                  resident, and a second reclaim moves every page; all read
 *                  back, the discarded page zero
 *
 * In-process engine. Skips where the kernel has no UFFDIO_MOVE (Linux < 6.8). */
#include "util.h"
#include "client/client_int.h"
#include "uffd/uffd.h"

#include <poll.h>
#include <sys/wait.h>

#define N 512u

static iosr_test_env env;

static uint64_t stat_of(const char *key) { return iosr_test_stat(env.ctl, key); }
static uint64_t moved(void) { return stat_of("\"moveout\":{\"pages\":"); }
static uint64_t refused(void) { return stat_of("\"refused_runs\":"); }

static void fill(uint8_t *p, uint64_t n, uint64_t seed, uint32_t ver) {
  for (uint64_t i = 0; i < n; i++) iosr_fill(p + i * 4096, seed, i, ver);
}

static void verify(const uint8_t *p, uint64_t n, uint64_t seed, uint32_t ver, const char *what) {
  for (uint64_t i = 0; i < n; i++)
    CHECK(iosr_check(p + i * 4096, seed, i, ver), "%s: page %llu holds %s", what, (unsigned long long)i,
          iosr_is_zero(p + i * 4096) ? "zero" : "other bytes");
}

static uint64_t resident(const uint8_t *p, uint64_t n) {
  unsigned char v[N];
  CHECK(n <= N && mincore((void *)p, n * 4096, v) == 0);
  uint64_t r = 0;
  for (uint64_t i = 0; i < n; i++) r += v[i] & 1;
  return r;
}

static void reclaim_all(void) {
  uint64_t got;
  CHECK(iosr_ctl_reclaim(env.ctl, "mover", 0, &got) == 0);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
}

static void whole_region(uint8_t *p) {
  uint64_t m0 = moved();
  reclaim_all();
  uint64_t m = moved() - m0;
  /* a batch's moves are refused while the dropper's discard of an earlier
   * batch's graveyard range is unread (an event): they are tried again once
   * it is read, so every page is moved out */
  CHECK(m == N, "%llu of %u pages moved out (%llu runs refused)", (unsigned long long)m, N,
        (unsigned long long)refused());
  CHECK(resident(p, N) == 0, "%llu pages still resident in the region", (unsigned long long)resident(p, N));
  uint64_t g = stat_of("\"graveyard_pages\":");
  CHECK(g == 0, "%llu graveyard pages still charged after the reclaim", (unsigned long long)g);
  verify(p, N, 71, 0, "moved out and read back");
  printf("reclaim: %llu of %u pages moved out (%llu moves refused and tried again), none left in the region or "
         "the graveyard, all read back\n", (unsigned long long)m, N, (unsigned long long)refused());
}

/* A fork child alive (pipe `go` holds it) that checks every page it
 * inherited once told to; returns its pid. */
static pid_t checking_child(const uint8_t *p, int go[2]) {
  CHECK(pipe(go) == 0);
  pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    char b;
    close(go[1]);
    if (read(go[0], &b, 1) != 1) _exit(3);
    for (uint64_t i = 0; i < N; i++)
      if (!iosr_check(p + i * 4096, 71, i, 0)) _exit(1);
    _exit(0);
  }
  close(go[0]);
  return c;
}

static void child_checks(pid_t c, int go[2]) {
  CHECK(write(go[1], "g", 1) == 1);
  int st = 0;
  CHECK(waitpid(c, &st, 0) == c);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork child read other bytes (status %d)", st);
  close(go[1]);
}

/* Every page of the region left it (moved out or dropped): none resident. */
static void all_out(const uint8_t *p, const char *what) {
  CHECK(resident(p, N) == 0, "%s: %llu pages left resident", what, (unsigned long long)resident(p, N));
}

static void fork_shared(uint8_t *p) {
  int go[2];
  pid_t c = checking_child(p, go);
  uint64_t m0 = moved(), r0 = refused();
  reclaim_all();
  all_out(p, "shared with a fork child");
  uint64_t m1 = moved() - m0, r1 = refused() - r0;
  child_checks(c, go);
  verify(p, N, 71, 0, "reclaimed while shared");
  /* read back clean (slots kept: IOSR_CLEAN_PAGES=1), shared with a second
   * child: reclaimed with no copy and no write */
  c = checking_child(p, go);
  m0 = moved();
  r0 = refused();
  uint64_t w0 = stat_of("\"writes\":");
  reclaim_all();
  all_out(p, "clean, shared with a fork child");
  CHECK(stat_of("\"writes\":") == w0, "clean pages were written again");
  child_checks(c, go);
  verify(p, N, 71, 0, "reclaimed clean while shared");
  printf("fork-shared: shared pages reclaimed (%llu moved out, %llu runs refused); clean and shared again "
         "(%llu moved, %llu runs refused), none written; parent and children read every page\n",
         (unsigned long long)m1, (unsigned long long)r1, (unsigned long long)(moved() - m0),
         (unsigned long long)(refused() - r0));
}

static void *discarder(void *arg) {
  CHECK(madvise(arg, 4096, MADV_DONTNEED) == 0); /* waits until the engine reads its REMOVE */
  return NULL;
}

static void *reclaimer(void *arg) {
  (void)arg;
  iosr_ctl *c = iosr_ctl_open_engine(env.eng);
  uint64_t got;
  CHECK(c && iosr_ctl_reclaim(c, "mover", 0, &got) == 0);
  iosr_ctl_close(c);
  return NULL;
}

static void event_pending(uint8_t *p) {
  iosr_region *other = iosr_region_create(env.ctx, 4096);
  CHECK(other);
  uint8_t *o = iosr_region_base(other);
  o[0] = 1;
  uint64_t m0 = moved(), r0 = refused();
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 1) == 0); /* writes queued, not sent */
  pthread_t t, d;
  CHECK(pthread_create(&t, NULL, reclaimer, NULL) == 0);
  iosr_test_wait_queued(env.ctl, 1);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_HOLD_EVENTS, 1) == 0);
  CHECK(pthread_create(&d, NULL, discarder, o) == 0);
  struct pollfd pf = {env.ctx->uffd, POLLIN, 0};
  CHECK(poll(&pf, 1, 60000) == 1, "the discard made no event within 60 s");
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 0) == 0); /* the writes complete: the moves meet the event */
  for (int i = 0; i < 6000 && refused() == r0; i++) usleep(10000);
  CHECK(refused() > r0, "no move was refused while an event was pending");
  CHECK(moved() == m0, "%llu pages moved while an event was pending", (unsigned long long)(moved() - m0));
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_HOLD_EVENTS, 0) == 0);
  pthread_join(d, NULL);
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  uint64_t m1 = moved() - m0;
  CHECK(m1 > 0, "no page moved out once the event was read");
  all_out(p, "moved once the event was read");
  verify(p, N, 71, 0, "moved out after a refused move");
  CHECK(o[0] == 0);
  CHECK(iosr_region_destroy(other) == 0);
  printf("event-pending: %llu moves refused while an event waited, none moved; then %llu of %u moved out, none "
         "left in the region, all read back\n", (unsigned long long)(refused() - r0), (unsigned long long)m1, N);
}

/* The drop gate's stage 4: the engine has named the pages of a drop the
 * dropper moves and reads none of the app's events until it answers. The
 * app then discards a page of another region: its REMOVE waits. */
static int gate_armed;
static uint8_t *gate_other, *gate_region;
static pthread_t gate_discarder;

static void hold_gate(uint64_t id, int stage) {
  (void)id;
  /* the dropper's thread: its running drop is ctx->cur; one of the region's */
  uint64_t at = env.ctx->cur.start, lo = (uint64_t)(uintptr_t)gate_region;
  if (stage != 4 || at < lo || at >= lo + N * 4096ull || !__atomic_exchange_n(&gate_armed, 0, __ATOMIC_ACQ_REL))
    return;
  CHECK(pthread_create(&gate_discarder, NULL, discarder, gate_other) == 0);
  struct pollfd pf = {env.ctx->uffd, POLLIN, 0};
  CHECK(poll(&pf, 1, 60000) == 1, "the discard made no event within 60 s");
}

static void dropper_hold(uint8_t *p) {
  iosr_region *other = iosr_region_create(env.ctx, 4096);
  CHECK(other);
  uint8_t *o = iosr_region_base(other);
  o[0] = 1;
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_DROPPER_MOVES, 1) == 0);
  uint64_t m0 = moved(), r0 = refused();
  gate_other = o;
  gate_region = p;
  __atomic_store_n(&gate_armed, 1, __ATOMIC_RELEASE);
  iosr_test_drop_gate = hold_gate;
  reclaim_all();
  iosr_test_drop_gate = NULL;
  CHECK(!__atomic_load_n(&gate_armed, __ATOMIC_ACQUIRE), "no drop was moved by the dropper");
  pthread_join(gate_discarder, NULL);
  CHECK(refused() > r0, "the dropper's moves were not refused while the app's discard waited");
  uint64_t kept = resident(p, N), m1 = moved() - m0;
  CHECK(kept > 0, "every page left although the first drop's moves were refused");
  CHECK(o[0] == 0);
  verify(p, N, 71, 0, "reclaimed while the dropper's first moves were refused");
  reclaim_all();
  all_out(p, "moved by the dropper");
  verify(p, N, 71, 0, "moved out by the dropper");
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_DROPPER_MOVES, 0) == 0);
  CHECK(iosr_region_destroy(other) == 0);
  printf("dropper-hold: with the app's discard waiting, the dropper's moves were refused and %llu pages stayed "
         "resident (%llu moved by later drops); a second reclaim moved the rest; all read back, the discarded page "
         "zero\n", (unsigned long long)kept, (unsigned long long)m1);
}

int main(int argc, char **argv) {
  const char *k = argc == 2 ? argv[1] : "";
  if (strcmp(k, "reclaim") && strcmp(k, "fork-shared") && strcmp(k, "event-pending") && strcmp(k, "dropper-hold")) {
    fprintf(stderr, "usage: test_moveout reclaim|fork-shared|event-pending|dropper-hold\n");
    return 2;
  }
  iosr_test_require();
  iosr_test_inproc(&env, 32u << 20,
                   !strcmp(k, "fork-shared") ? "test_hooks=1,reclaim_batch=128,clean_pages=1" : "test_hooks=1,reclaim_batch=128",
                   "mover");
  if (!(env.ctx->features & UFFD_FEATURE_MOVE) || !env.ctx->grave) {
    printf("SKIP: no UFFDIO_MOVE (Linux 6.8) or no graveyard: every page goes through the dropper\n");
    iosr_test_inproc_end(&env);
    iosr_test_cleanup();
    return 77;
  }
  iosr_region *r = iosr_region_create(env.ctx, N * 4096);
  CHECK(r);
  uint8_t *p = iosr_region_base(r);
  fill(p, N, 71, 0);
  if (!strcmp(k, "reclaim")) {
    whole_region(p);
  } else if (!strcmp(k, "fork-shared")) {
    if (!(env.ctx->features & UFFD_FEATURE_EVENT_FORK)) {
      printf("SKIP: the userfaultfd FORK event needs CAP_SYS_PTRACE (run as root)\n");
      CHECK(iosr_region_destroy(r) == 0);
      iosr_test_inproc_end(&env);
      iosr_test_cleanup();
      return 77;
    }
    fork_shared(p);
  } else if (!strcmp(k, "event-pending")) {
    event_pending(p);
  } else {
    dropper_hold(p);
  }
  CHECK(iosr_region_destroy(r) == 0);
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
