/* Integrity (issue 5, "Must be shown"): random page contents survive at
 * least 20 swap-out/swap-in cycles under a policy combination (argv: slot
 * readahead sched), while app threads write during swap-out; every page is
 * checked after every cycle. In-process engine; CTest runs all twelve
 * combinations. */
#include "util.h"
#include <pthread.h>
#include <stdatomic.h>


#define NPAGES 2048u
#define WRITERS 2u
#define CYCLES 20u

static uint8_t *base;
static uint64_t ver[NPAGES];
static atomic_int stop_writers;
static atomic_ulong writes_done;
static const uint64_t seed = 0x5eedf00dull;

static void *writer(void *arg) {
  uintptr_t id = (uintptr_t)arg;
  uint64_t x = iosr_mix(id + 1 + atomic_load(&writes_done));
  while (!atomic_load_explicit(&stop_writers, memory_order_acquire)) {
    x = iosr_mix(x);
    uint64_t i = (x % (NPAGES / WRITERS)) * WRITERS + id; /* this writer's pages only */
    uint64_t v = ++ver[i];
    iosr_fill(base + i * 4096, seed, i, v);
    atomic_fetch_add_explicit(&writes_done, 1, memory_order_relaxed);
    usleep(300); /* an app writing now and then, not a spinning benchmark */
  }
  return NULL;
}

static void start_writers(pthread_t *t) {
  atomic_store(&stop_writers, 0);
  for (uintptr_t w = 0; w < WRITERS; w++) CHECK(pthread_create(&t[w], NULL, writer, (void *)w) == 0);
}

static void stop_all(pthread_t *t) {
  atomic_store_explicit(&stop_writers, 1, memory_order_release);
  for (unsigned w = 0; w < WRITERS; w++) pthread_join(t[w], NULL);
}

int main(int argc, char **argv) {
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: test_integrity global|process cluster|vma|adaptive fifo|sios [key=value,...]\n");
    return 2;
  }
  iosr_test_require();
  char settings[256];
  snprintf(settings, sizeof settings, "slot=%s,readahead=%s,sched=%s%s%s", argv[1], argv[2], argv[3],
           argc == 5 ? "," : "", argc == 5 ? argv[4] : "");
  iosr_test_env t;
  iosr_test_inproc(&t, 48u << 20, settings, "integrity");
  iosr_ctx *ctx = t.ctx;
  iosr_ctl *ctl = t.ctl;
  iosr_region *r = iosr_region_create(ctx, NPAGES * 4096);
  CHECK(r);
  base = iosr_region_base(r);
  for (uint64_t i = 0; i < NPAGES; i++) iosr_fill(base + i * 4096, seed, i, 0);
  uint64_t order[NPAGES];
  uint64_t total_swapped = 0, total_wp = 0;
  for (unsigned c = 0; c < CYCLES; c++) {
    pthread_t t[WRITERS];
    /* 1. swap out everything while the writers write */
    start_writers(t);
    uint64_t got = 0;
    CHECK(iosr_ctl_reclaim(ctl, "integrity", 0, &got) == 0);
    total_swapped += got / 4096;
    /* 2. writers go on for a while: their writes fault swapped pages back in */
    unsigned long w0 = atomic_load(&writes_done);
    while (atomic_load(&writes_done) - w0 < 100) usleep(1000);
    stop_all(t);
    /* 3. every page, in address order or a random order */
    for (uint64_t i = 0; i < NPAGES; i++) order[i] = i;
    if (c & 1)
      for (uint64_t i = NPAGES; i > 1; i--) {
        uint64_t j = iosr_mix(c * 7919 + i) % i, tmp = order[i - 1];
        order[i - 1] = order[j];
        order[j] = tmp;
      }
    for (uint64_t k = 0; k < NPAGES; k++) {
      uint64_t i = order[k];
      CHECK(iosr_check(base + i * 4096, seed, i, ver[i]), "cycle %u: page %llu (version %llu) differs [%s]", c,
            (unsigned long long)i, (unsigned long long)ver[i], settings);
    }
    iosr_app_stats st;
    CHECK(iosr_ctl_app_stats(ctl, "integrity", &st) == 0);
    CHECK(st.swapped_pages == 0 && st.resident_pages == NPAGES, "cycle %u: %llu swapped, %llu resident", c,
          (unsigned long long)st.swapped_pages, (unsigned long long)st.resident_pages);
    total_wp = st.wp_faults;
  }
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(ctl, "integrity", &st) == 0);
  /* the cycles really swapped: most pages went out every time */
  CHECK(total_swapped >= (uint64_t)CYCLES * NPAGES / 2, "only %llu pages swapped out in %u cycles",
        (unsigned long long)total_swapped, CYCLES);
  CHECK(st.major_faults > 0 && st.read_reqs > 0 && st.write_reqs > 0);
  CHECK(iosr_region_destroy(r) == 0);
  iosr_test_inproc_end(&t);
  iosr_test_cleanup();
  printf("integrity [%s]: %u cycles, %llu pages swapped out, %llu write faults during swap-out, %llu writes, "
         "%llu reads (%llu pages read ahead)\n",
         settings, CYCLES, (unsigned long long)total_swapped, (unsigned long long)total_wp,
         (unsigned long long)st.write_reqs, (unsigned long long)st.read_reqs, (unsigned long long)st.ra_pages);
  return 0;
}
