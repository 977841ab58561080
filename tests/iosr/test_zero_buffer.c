/* Two in-process engines in one process, with different zero_window
 * settings, serving write faults at the same time (issue 21): each engine
 * fills first-touch pages from its own buffer of zeros, so one engine growing
 * its buffer can never free memory another is copying from. One engine's
 * window grows every round (`zero_window` at run time), the other's stays at
 * one page. Every first-touched page must read zero except the byte its
 * thread wrote. CTest runs it plain, under AddressSanitizer and under
 * ThreadSanitizer (a shared buffer is a data race between the engine
 * threads). */
#include "util.h"

#include <pthread.h>

#define NPAGES 1024u
#define THREADS 2u
#define ROUNDS 6u

typedef struct eng_app {
  iosr_engine *eng;
  iosr_ctx *ctx;
  iosr_ctl *ctl;
  iosr_region *r;
  uint8_t *p;
} eng_app;

typedef struct job {
  uint8_t *p;
  unsigned tid;
  unsigned round;
  uint64_t bad;
} job;

static void *toucher(void *arg) {
  job *j = arg;
  /* every THREADS-th page, first touch by a write (UFFDIO_COPY from the zero buffer) */
  for (uint64_t i = j->tid; i < NPAGES; i += THREADS) {
    volatile uint8_t *q = j->p + i * 4096;
    size_t off = (size_t)(iosr_mix(i + j->round) % 4096);
    q[off] = 0x5a;
    for (size_t b = 0; b < 4096; b++)
      if (q[b] != (b == off ? 0x5a : 0)) {
        j->bad++;
        break;
      }
  }
  return NULL;
}

static void open_one(eng_app *x, const char *swap, const char *set, const char *name) {
  x->eng = iosr_engine_start(swap, set);
  CHECK(x->eng);
  iosr_connect_opts o = {.app_name = name, .engine = x->eng};
  x->ctx = iosr_connect(&o);
  x->ctl = iosr_ctl_open_engine(x->eng);
  CHECK(x->ctx && x->ctl);
  x->r = iosr_region_create(x->ctx, NPAGES * 4096);
  CHECK(x->r);
  x->p = iosr_region_base(x->r);
}

int main(void) {
  iosr_test_require();
  char sa[256], sb[256];
  iosr_test_swap(sa, sizeof sa, 8u << 20);
  iosr_test_swap(sb, sizeof sb, 8u << 20);
  eng_app e[2];
  open_one(&e[0], sa, "zero_window=1", "grows");
  open_one(&e[1], sb, "zero_window=1", "stays");
  uint64_t bad = 0;
  for (unsigned round = 0; round < ROUNDS; round++) {
    char zw[16];
    snprintf(zw, sizeof zw, "%u", 2u << round); /* 2, 4, ... 64 pages */
    CHECK(iosr_ctl_set(e[0].ctl, "zero_window", zw) == 0);
    pthread_t t[2 * THREADS];
    job jobs[2 * THREADS];
    for (unsigned k = 0; k < 2 * THREADS; k++) {
      jobs[k] = (job){e[k / THREADS].p, k % THREADS, round, 0};
      CHECK(pthread_create(&t[k], NULL, toucher, &jobs[k]) == 0);
    }
    for (unsigned k = 0; k < 2 * THREADS; k++) {
      pthread_join(t[k], NULL);
      bad += jobs[k].bad;
    }
    /* fresh pages for the next round */
    for (int k = 0; k < 2; k++) CHECK(iosr_region_discard(e[k].r, 0, NPAGES * 4096) == 0);
  }
  CHECK(!bad, "%llu first-touched pages held other bytes than zeros", (unsigned long long)bad);
  for (int k = 0; k < 2; k++) {
    CHECK(iosr_region_destroy(e[k].r) == 0);
    iosr_ctl_close(e[k].ctl);
    CHECK(iosr_disconnect(e[k].ctx) == 0);
    CHECK(iosr_engine_stop(e[k].eng) == 0);
  }
  iosr_test_cleanup();
  printf("zero buffer: two engines, %u rounds of concurrent write faults, every page zero but its byte\n", ROUNDS);
  return 0;
}
