/* Generational lifetimes (brief: "in a streaming workload 90% of pages were
 * freed within 33.55 ms while over 1% lived longer than 3.22 s").
 *
 * The threads together allocate --rate blocks per second (mixed sizes, 24 B to
 * 128 KiB). Each block gets a lifetime: 90% uniform in [0, 35 ms), 9%
 * log-uniform in [35 ms, 3 s), 1% uniform in [3 s, 6 s), and is freed when it
 * expires (a 1 ms timing wheel per thread, linked through the blocks). In
 * duration mode time is real (paced, with sleeps); in ops mode time is virtual
 * (each allocation advances the clock by 1/rate), so the run is deterministic.
 * docs/design/bench.md, "Footprint".
 */
#include <math.h>
#include <stdio.h>

#include "harness.h"

#define WHEEL 8192                      /* 1 ms slots: 8.2 s > the longest lifetime */

static double rate = 100000;
static atomic_ullong n_short, n_mid, n_long;

/* A live block is linked into its expiry slot through its first 16 bytes. */
typedef struct blk {
  struct blk *next;
  uint32_t size, counter;              /* counter: which tag the block carries */
} blk;

static uint64_t lifetime_us(jwb_thread *t) {
  uint64_t u = jwb_below(&t->rng, 1000);
  if (u < 900) {
    atomic_fetch_add_explicit(&n_short, 1, memory_order_relaxed);
    return jwb_below(&t->rng, 35000);
  }
  if (u < 990) {
    atomic_fetch_add_explicit(&n_mid, 1, memory_order_relaxed);
    return (uint64_t)(35000.0 * pow(3e6 / 35000.0, jwb_unit(&t->rng)));
  }
  atomic_fetch_add_explicit(&n_long, 1, memory_order_relaxed);
  return 3000000 + jwb_below(&t->rng, 3000000);
}

static void expire(jwb_thread *t, blk **wheel, uint64_t *cursor_ms, uint64_t now_ms) {
  for (; *cursor_ms <= now_ms; (*cursor_ms)++) {
    blk **head = &wheel[*cursor_ms % WHEEL];
    blk *b = *head;
    *head = NULL;
    while (b) {
      blk *next = b->next;
      jwb_check(t, b, b->size, jwb_tag(t->index, b->counter), 16);
      jwb_free(t, b);
      b = next;
    }
  }
}

static void worker(jwb_thread *t) {
  blk **wheel = jwb_meta_alloc(WHEEL * sizeof(blk *));
  double per_thread = rate / jwb.threads;
  uint64_t made = 0, cursor = 0, start = jwb_now_ns();
  int real = jwb.duration_s > 0;
  while (!jwb_done(t)) {
    uint64_t now_us;
    if (real) {
      now_us = (jwb_now_ns() - start) / 1000;
      uint64_t due = (uint64_t)(per_thread * (double)now_us / 1e6);
      if (made >= due) {
        expire(t, wheel, &cursor, now_us / 1000);
        jwb_sleep_ms(1);
        continue;
      }
    } else {
      now_us = (uint64_t)((double)made * 1e6 / per_thread);
    }
    size_t n = jwb_size_mixed(&t->rng);
    if (n < 24) n = 24;
    uint32_t c = (uint32_t)t->counter++;
    blk *b = jwb_malloc(t, n);
    jwb_fill(b, n, jwb_tag(t->index, c));
    b->size = (uint32_t)n;
    b->counter = c;
    uint64_t die_ms = (now_us + lifetime_us(t)) / 1000;
    if (die_ms <= cursor) die_ms = cursor + 1;          /* never into a slot already passed */
    b->next = wheel[die_ms % WHEEL];
    wheel[die_ms % WHEEL] = b;
    made++;
    expire(t, wheel, &cursor, now_us / 1000);
  }
  expire(t, wheel, &cursor, cursor + WHEEL);             /* everything left */
  jwb_meta_free(wheel, WHEEL * sizeof(blk *));
}

int main(int argc, char **argv) {
  jwb.ops = 200000;
  const jwb_opt opts[] = {
      {"rate", JWB_OPT_DOUBLE, &rate, "allocations per second, all threads together (default 100000)"},
      {0},
  };
  jwb_init(argc, argv, "generational: 90% of blocks die within 35 ms, 1% live beyond 3 s", opts);
  if (rate < 1) {
    fprintf(stderr, "%s: --rate must be at least 1\n", jwb.name);
    return 2;
  }
  jwb_run(jwb.threads, worker, 0);
  jwb_region_end();
  char extra[160];
  unsigned long long s = atomic_load(&n_short), m = atomic_load(&n_mid), l = atomic_load(&n_long);
  double all = (double)(s + m + l);
  snprintf(extra, sizeof extra, "rate=%.0f short=%llu mid=%llu long=%llu short_frac=%.4f long_frac=%.4f", rate, s, m,
           l, all > 0 ? (double)s / all : 0, all > 0 ? (double)l / all : 0);
  return jwb_report(extra);
}
