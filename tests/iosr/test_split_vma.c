/* A region the app split into several VMAs (issue 22's stress found it):
 * mprotect, mlock or a partial mremap cut a region into VMAs, and the kernel
 * fills (UFFDIO_COPY, UFFDIO_ZEROPAGE) one VMA per call, failing a range that
 * leaves it with ENOENT. A read-ahead run or a zero-fill window that crosses
 * a boundary must still map every page, and no fault may wait forever.
 *
 *   test_split_vma cluster|vma|adaptive   swapped pages read back in address
 *                                         order under that read-ahead policy
 *   test_split_vma zero-fill              first touches of untouched pages
 *
 * The region (N pages) is cut into chunks of C pages, every other one made
 * read-only: 2 N / C VMAs whose boundaries fall inside every read-ahead
 * window and zero-fill window. In-process engine; the pages are touched on a
 * thread joined with a hang bound. */
#include "util.h"

#include <pthread.h>
#include <time.h>

#define N 256u
#define C 5u
#define HANG_S 60 /* a touch that takes longer waits forever */

static uint8_t *base;
static int zero_case;
static uint64_t bad = UINT64_MAX;

static int read_only(uint64_t i) { return i / C % 2 == 1; }

static void *toucher(void *arg) {
  (void)arg;
  for (uint64_t i = 0; i < N && bad == UINT64_MAX; i++) {
    uint8_t *q = base + i * 4096;
    if (zero_case) {
      /* writable chunks are written (write faults), read-only ones read */
      if (!read_only(i)) iosr_fill(q, 73, i, 1);
      if (read_only(i) ? !iosr_is_zero(q) : !iosr_check(q, 73, i, 1)) bad = i;
    } else if (!iosr_check(q, 72, i, 0)) {
      bad = i;
    }
  }
  return NULL;
}

static void touch_all(const char *what) {
  pthread_t t;
  CHECK(pthread_create(&t, NULL, toucher, NULL) == 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += HANG_S;
  CHECK(pthread_timedjoin_np(t, NULL, &ts) == 0, "%s: touching the pages hung (more than %d s)", what, HANG_S);
  CHECK(bad == UINT64_MAX, "%s: page %llu holds other bytes", what, (unsigned long long)bad);
}

static void split(void) {
  for (uint64_t i = C; i < N; i += 2 * C) {
    uint64_t n = i + C <= N ? C : N - i;
    CHECK(mprotect(base + i * 4096, n * 4096, PROT_READ) == 0);
  }
}

int main(int argc, char **argv) {
  const char *k = argc == 2 ? argv[1] : "";
  zero_case = !strcmp(k, "zero-fill");
  if (!zero_case && strcmp(k, "cluster") && strcmp(k, "vma") && strcmp(k, "adaptive")) {
    fprintf(stderr, "usage: test_split_vma cluster|vma|adaptive|zero-fill\n");
    return 2;
  }
  iosr_test_require();
  char set[64];
  snprintf(set, sizeof set, "readahead=%s,zero_window=32", zero_case ? "adaptive" : k);
  iosr_test_env env;
  iosr_test_inproc(&env, 16u << 20, set, "split");
  iosr_region *r = iosr_region_create(env.ctx, N * 4096);
  CHECK(r);
  base = iosr_region_base(r);
  if (zero_case) {
    split();
    touch_all("zero fill across VMA boundaries");
    printf("zero-fill: every first touch of a region cut into %u VMAs completed, zeros or the data written\n",
           (N + C - 1) / C);
  } else {
    for (uint64_t i = 0; i < N; i++) iosr_fill(base + i * 4096, 72, i, 0);
    uint64_t got;
    CHECK(iosr_ctl_reclaim(env.ctl, "split", 0, &got) == 0 && got == N * 4096);
    split();
    touch_all("swap-in across VMA boundaries");
    iosr_app_stats st;
    CHECK(iosr_ctl_app_stats(env.ctl, "split", &st) == 0);
    CHECK(st.resident_pages == N && st.swapped_pages == 0, "resident %llu, swapped %llu after reading all",
          (unsigned long long)st.resident_pages, (unsigned long long)st.swapped_pages);
    printf("%s: every swapped page of a region cut into %u VMAs came back (%llu read-ahead pages)\n", k, (N + C - 1) / C,
           (unsigned long long)st.ra_pages);
  }
  CHECK(mprotect(base, N * 4096, PROT_READ | PROT_WRITE) == 0);
  CHECK(iosr_region_destroy(r) == 0);
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
