/* The app changing its own memory (brief: "ask for the corresponding
 * userfaultfd events and keep the page table of the swap system consistent
 * with them, or a discarded page comes back from swap with stale data"):
 * madvise(DONTNEED) while pages are being written out, munmap of part of a
 * swapped region, mremap of a swapped region, fork with pages swapped out. */
#include "util.h"
#include <pthread.h>
#include <stdatomic.h>


static iosr_engine *eng;
static atomic_int done;

static void *reclaim_thread(void *arg) {
  iosr_ctl *c = iosr_ctl_open_engine(eng);
  uint64_t got;
  CHECK(c && iosr_ctl_reclaim(c, (const char *)arg, 0, &got) == 0);
  iosr_ctl_close(c);
  atomic_store(&done, 1);
  return NULL;
}

static uint64_t slots_used(iosr_ctl *ctl) { return iosr_test_stat(ctl, "\"used\":"); }

int main(void) {
  iosr_test_require();
  iosr_test_env env;
  iosr_test_inproc(&env, 32u << 20, "test_hooks=1", "ev");
  eng = env.eng;
  iosr_ctx *ctx = env.ctx;
  iosr_ctl *ctl = env.ctl;
  const uint64_t N = 1024;
  iosr_region *r;
  uint8_t *p = iosr_test_fill_new_region(ctx, N, 21, &r);

  /* 1. discard while the pages are being written out */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 1) == 0);
  pthread_t t;
  atomic_store(&done, 0);
  CHECK(pthread_create(&t, NULL, reclaim_thread, "ev") == 0);
  iosr_test_wait_queued(ctl, 4);
  CHECK(madvise(p, N / 2 * 4096, MADV_DONTNEED) == 0); /* pages write-protected, writes queued */
  CHECK(iosr_ctl_test(ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(ctl) == 0);
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "ev", &st) == 0);
  CHECK(slots_used(ctl) == st.swapped_pages, "slots used %llu, swapped %llu", (unsigned long long)slots_used(ctl),
        (unsigned long long)st.swapped_pages);
  for (uint64_t i = 0; i < N; i++)
    CHECK(i < N / 2 ? iosr_is_zero(p + i * 4096) : iosr_check(p + i * 4096, 21, i, 0), "page %llu after discard",
          (unsigned long long)i);
  fprintf(stderr, "discard during swap-out: discarded pages read zero, the rest intact\n");

  /* 2. munmap of the middle of a swapped-out region */
  for (uint64_t i = 0; i < N; i++) iosr_fill(p + i * 4096, 22, i, 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(ctl, "ev", 0, &got) == 0 && slots_used(ctl) == N);
  CHECK(munmap(p + 256 * 4096, 256 * 4096) == 0);
  CHECK(slots_used(ctl) == N - 256, "slots used %llu after munmap", (unsigned long long)slots_used(ctl));
  for (uint64_t i = 0; i < N; i++)
    if (i < 256 || i >= 512) CHECK(iosr_check(p + i * 4096, 22, i, 0));
  fprintf(stderr, "munmap: the unmapped part's slots freed, the rest intact\n");

  /* 3. mremap of swapped pages: they follow the move */
  iosr_region *r2 = iosr_region_create(ctx, 256 * 4096);
  CHECK(r2);
  uint8_t *q = iosr_region_base(r2);
  for (uint64_t i = 0; i < 256; i++) iosr_fill(q + i * 4096, 23, i, 0);
  CHECK(iosr_ctl_reclaim(ctl, "ev", 0, &got) == 0);
  uint8_t *dst = mmap(NULL, 256 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(dst != MAP_FAILED);
  CHECK(mremap(q, 256 * 4096, 256 * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == dst);
  for (uint64_t i = 0; i < 256; i += 2) CHECK(iosr_check(dst + i * 4096, 23, i, 0), "moved page %llu", (unsigned long long)i);
  CHECK(iosr_ctl_reclaim(ctl, "ev", 0, &got) == 0);
  CHECK(mremap(dst, 256 * 4096, 256 * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, q) == q); /* back home */
  for (uint64_t i = 0; i < 256; i++) CHECK(iosr_check(q + i * 4096, 23, i, 0), "page %llu moved back", (unsigned long long)i);
  fprintf(stderr, "mremap: swapped pages read correctly at the new address and back\n");
  CHECK(iosr_region_destroy(r2) == 0);

  /* 4. fork with pages swapped out: the child reads them from the shared
   * slots, its writes stay its own */
  for (uint64_t i = 0; i < N; i++)
    if (i < 256 || i >= 512) iosr_fill(p + i * 4096, 24, i, 0);
  CHECK(iosr_ctl_reclaim(ctl, "ev", 0, &got) == 0);
  pid_t c = fork();
  CHECK(c >= 0);
  if (c == 0) {
    for (uint64_t i = 0; i < N; i++)
      if ((i < 256 || i >= 512) && !iosr_check(p + i * 4096, 24, i, 0)) _exit(1);
    for (uint64_t i = 0; i < 64; i++) iosr_fill(p + i * 4096, 99, i, 0);
    _exit(0);
  }
  int ws;
  waitpid(c, &ws, 0);
  if (geteuid() != 0) {
    /* without CAP_SYS_PTRACE there is no FORK event: the region is not
     * inherited (MADV_DONTFORK) and the child faults on it, loudly */
    CHECK(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGSEGV, "unprivileged child: status %d", ws);
    fprintf(stderr, "fork (unprivileged): the child got no copy of the region (SIGSEGV), never zeros\n");
    iosr_test_inproc_end(&env);
    iosr_test_cleanup();
    return 0;
  }
  CHECK(WIFEXITED(ws) && WEXITSTATUS(ws) == 0, "child saw wrong data (status %d)", ws);
  for (uint64_t i = 0; i < N; i++)
    if (i < 256 || i >= 512) CHECK(iosr_check(p + i * 4096, 24, i, 0));
  /* the child's entry goes when its memory does */
  char *js = NULL;
  for (int i = 0; i < 400; i++) {
    free(js);
    js = iosr_ctl_stat_json(ctl);
    if (!strstr(js, "\"forked\":true")) break;
    usleep(10000);
  }
  CHECK(!strstr(js, "\"forked\":true"), "forked child not reaped: %s", js);
  free(js);
  fprintf(stderr, "fork: the child read every swapped page, its writes stayed its own, it was reaped\n");

  CHECK(iosr_region_destroy(r) == 0);
  CHECK(slots_used(ctl) == 0);
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
