/* fork (issue 22): a child gets what the kernel gives it, never zeros where
 * the parent's data is, never the parent's data where the kernel gives zeros.
 *
 *   reclaim      the parent forks while it is being reclaimed: one drop done
 *                (its pages discarded, the confirmation not yet in), others
 *                asked for, writes in flight; the child reads every page
 *   wipeonfork   half of a swapped-out region is MADV_WIPEONFORK: the child
 *                reads zeros there (swapped and resident pages alike), the
 *                parent's data in the other half
 *   discard      the parent discards part of a drop's range before the
 *                dropper runs it, then forks: the child reads zero there
 *                (only the dropper's REMOVE would mean "in its slot"),
 *                the parent's data elsewhere
 *   exit-idle    the parent forks with every page swapped out, reads them
 *                all back (the child alone holds the slots), the child exits:
 *                once a wait for idle returns, no slot is in use
 *
 * SETTINGS (k=v,...) are added to the engine's: `discard` needs
 * moveout=0, since only the dropper's path has a drop whose pages are still
 * in the app; `reclaim` runs both ways (pages moved out, or dropped).
 *
 * Needs the userfaultfd FORK event (CAP_SYS_PTRACE: root here). In-process
 * engine; the child exits with the number of wrong pages. */
#include "gate.h"
#include "util.h"

#define N 1024u

static iosr_engine *eng;

static void *reclaimer(void *arg) {
  iosr_ctl *c = iosr_ctl_open_engine(eng);
  uint64_t got;
  CHECK(c && iosr_ctl_reclaim(c, (const char *)arg, 0, &got) == 0);
  iosr_ctl_close(c);
  return NULL;
}

/* The child: pages [zlo, zhi) must read zero, the rest its parent's data. */
static int child_check(const uint8_t *p, uint64_t n, uint64_t zlo, uint64_t zhi, uint64_t seed) {
  int bad = 0;
  for (uint64_t i = 0; i < n; i++)
    if (i >= zlo && i < zhi ? !iosr_is_zero(p + i * 4096) : !iosr_check(p + i * 4096, seed, i, 0)) bad++;
  return bad > 255 ? 255 : bad;
}

static void fork_and_check_zero(const uint8_t *p, uint64_t n, uint64_t zlo, uint64_t zhi, uint64_t seed,
                                const char *what) {
  pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) _exit(child_check(p, n, zlo, zhi, seed));
  int st = wait_child(c, 120, "the child");
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s: the child read %d wrong pages (status %#x)", what,
        WIFEXITED(st) ? WEXITSTATUS(st) : -1, st);
}

static void fork_and_check(const uint8_t *p, uint64_t n, uint64_t wiped, uint64_t seed, const char *what) {
  fork_and_check_zero(p, n, 0, wiped, seed, what);
}

/* The parent discards the middle third of a drop held before it runs, and
 * forks: at the FORK event those pages are DROPPING with one REMOVE, the
 * app's. Returns the discarded page range. */
static void discard_then_fork(iosr_test_env *env, uint8_t *p, uint64_t *zlo, uint64_t *zhi) {
  gate_close(0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reclaimer, "forker") == 0);
  gate_wait(60);
  pthread_mutex_lock(&env->ctx->mu);
  uint64_t s = env->ctx->cur.start, len = env->ctx->cur.len;
  pthread_mutex_unlock(&env->ctx->mu);
  uint64_t third = len / 3 & ~4095ull;
  CHECK(third, "the held drop covers %llu bytes", (unsigned long long)len);
  *zlo = (s + third - (uintptr_t)p) / 4096;
  *zhi = *zlo + third / 4096;
  CHECK(madvise(p + *zlo * 4096, third, MADV_DONTNEED) == 0);
  fork_and_check_zero(p, N, *zlo, *zhi, 51, "fork after a discard inside a drop");
  gate_open();
  pthread_join(t, NULL);
}

int main(int argc, char **argv) {
  if (argc < 2 || argc > 3 ||
      (strcmp(argv[1], "reclaim") && strcmp(argv[1], "wipeonfork") && strcmp(argv[1], "exit-idle") &&
       strcmp(argv[1], "discard"))) {
    fprintf(stderr, "usage: test_fork_cases reclaim|wipeonfork|exit-idle|discard [SETTINGS]\n");
    return 2;
  }
  iosr_test_require();
  if (geteuid() != 0) {
    printf("SKIP: the userfaultfd FORK event needs CAP_SYS_PTRACE (run as root)\n");
    return 77;
  }
  iosr_test_env env;
  char set[160];
  snprintf(set, sizeof set, "reclaim_batch=128%s%s", argc == 3 ? "," : "", argc == 3 ? argv[2] : "");
  iosr_test_inproc(&env, 32u << 20, set, "forker");
  eng = env.eng;
  iosr_region *r = iosr_region_create(env.ctx, N * 4096);
  CHECK(r);
  uint8_t *p = iosr_region_base(r);
  for (uint64_t i = 0; i < N; i++) iosr_fill(p + i * 4096, 51, i, 0);
  if (!strcmp(argv[1], "reclaim")) {
    gate_close(1);
    pthread_t t;
    CHECK(pthread_create(&t, NULL, reclaimer, "forker") == 0);
    uint64_t id = gate_wait(60);
    fork_and_check(p, N, 0, 51, "fork during reclaim");
    gate_open();
    pthread_join(t, NULL);
    printf("fork during reclaim (drop %llu discarded, unconfirmed): the child read every page\n",
           (unsigned long long)id);
  } else if (!strcmp(argv[1], "discard")) {
    uint64_t zlo, zhi;
    discard_then_fork(&env, p, &zlo, &zhi);
    for (uint64_t i = zlo; i < zhi; i++) CHECK(iosr_is_zero(p + i * 4096), "the parent's discarded page %llu",
                                               (unsigned long long)i);
    for (uint64_t i = zlo; i < zhi; i++) iosr_fill(p + i * 4096, 51, i, 0); /* as before, for the check below */
    printf("discard then fork: the child read zero where the parent discarded, its data elsewhere\n");
  } else if (!strcmp(argv[1], "exit-idle")) {
    uint64_t got;
    CHECK(iosr_ctl_reclaim(env.ctl, "forker", 0, &got) == 0 && got == N * 4096ull);
    pid_t c = fork();
    CHECK(c >= 0);
    if (c == 0) _exit(0);
    for (uint64_t i = 0; i < N; i++) CHECK(iosr_check(p + i * 4096, 51, i, 0));
    int st = wait_child(c, 120, "the child");
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    /* the child is gone: a wait for idle reaps it before it answers */
    CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
    uint64_t used = iosr_test_stat(env.ctl, "\"used\":");
    iosr_app_stats ps;
    CHECK(iosr_ctl_app_stats(env.ctl, "forker", &ps) == 0);
    /* the parent's pages read back and not written keep their slots (clean) */
    CHECK(used == ps.clean_pages && ps.swapped_pages == 0, "%llu slots used after the fork child exited, %llu clean",
          (unsigned long long)used, (unsigned long long)ps.clean_pages);
    printf("exit-idle: the exited child's slots are free once a wait for idle returns\n");
  } else {
    CHECK(madvise(p, N / 2 * 4096, MADV_WIPEONFORK) == 0);
    uint64_t got;
    CHECK(iosr_ctl_reclaim(env.ctl, "forker", 0, &got) == 0 && got == N * 4096ull);
    /* a few pages of each half back in: resident at the fork */
    for (uint64_t i = 0; i < N; i += 64) CHECK(iosr_check(p + i * 4096, 51, i, 0));
    fork_and_check(p, N, N / 2, 51, "fork of a MADV_WIPEONFORK region");
    printf("wipeonfork: the child read zeros in the wiped half, the parent's data in the other\n");
  }
  for (uint64_t i = 0; i < N; i++)
    CHECK(iosr_check(p + i * 4096, 51, i, 0), "the parent's page %llu after the fork", (unsigned long long)i);
  CHECK(iosr_region_destroy(r) == 0);
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
