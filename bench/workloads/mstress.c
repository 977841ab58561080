/* mstress-like workload (mimalloc's stress test as mimalloc-bench describes it),
 * and its sleep-augmented variant (--idle-ms).
 *
 * Rounds of --threads threads; thread i does --steps x (1 + i mod 4) steps, so
 * threads have unequal work. A step allocates into a random slot of the thread's
 * live set (--retain slots), frees a random slot, or exchanges a slot with a
 * random entry of a shared transfer array (--transfer entries): objects migrate
 * between threads and some survive rounds. Sizes are powers of two from 16 to
 * 512 B, with 1% 64x, 0.1% 1024x and 0.01% 16384x larger (up to 8 MiB). After
 * each round the threads free their live sets and exit; new threads start the
 * next round. With --idle-ms, each round (a burst) is followed by an idle period
 * marked for the launcher: the steady-state footprint is read at the end of the
 * idle periods. In duration mode rounds repeat until --duration seconds of
 * bursts have passed (at least --rounds). docs/design/bench.md, "Workloads".
 */
#include <stdio.h>
#include <string.h>

#include "harness.h"

/* An object carries its size and tag in its first 16 bytes, so it can travel
 * through the transfer array as one pointer. */
typedef struct obj {
  uint64_t size, tag;
} obj;

static uint64_t rounds = 10, steps = 20000, transfer_n = 1000, retain = 4000, idle_ms = 0;
static _Atomic(obj *) *transfer;

static size_t draw(jwb_thread *t) {
  size_t s = (size_t)16 << jwb_below(&t->rng, 6);     /* 16 .. 512 */
  if (jwb_below(&t->rng, 100) == 0) {
    uint64_t u = jwb_below(&t->rng, 100);
    if (u == 0) s *= 16384;                           /* 0.01% giant */
    else if (u < 10) s *= 1024;                       /* 0.1% huge */
    else s *= 64;                                     /* 1% large */
  }
  return s;
}

static obj *make(jwb_thread *t) {
  size_t n = draw(t);
  obj *o = jwb_malloc(t, n);
  uint64_t tag = jwb_tag(t->index, t->counter++);
  jwb_fill(o, n, tag);
  o->size = n;
  o->tag = tag;
  return o;
}

static void drop(jwb_thread *t, obj *o) {
  if (!o) return;
  jwb_check(t, o, o->size, o->tag, 16);
  jwb_free(t, o);
}

static void worker(jwb_thread *t) {
  obj **live = jwb_meta_alloc(retain * sizeof(obj *));
  uint64_t n = steps * (1 + t->index % 4);
  for (uint64_t k = 0; k < n; k++) {
    size_t i = (size_t)jwb_below(&t->rng, retain);
    uint64_t r = jwb_below(&t->rng, 100);
    if (r < 50) {
      drop(t, live[i]);
      live[i] = make(t);
    } else if (r < 80) {
      drop(t, live[i]);
      live[i] = NULL;
    } else {
      if (!live[i]) live[i] = make(t);
      size_t j = (size_t)jwb_below(&t->rng, transfer_n);
      /* acq_rel: the object's contents travel with the pointer in both directions */
      live[i] = atomic_exchange_explicit(&transfer[j], live[i], memory_order_acq_rel);
    }
  }
  for (size_t i = 0; i < retain; i++) drop(t, live[i]);
  jwb_meta_free(live, retain * sizeof(obj *));
}

int main(int argc, char **argv) {
  const jwb_opt opts[] = {
      {"rounds", JWB_OPT_U64, &rounds, "rounds of threads (default 10; at least this many in duration mode)"},
      {"steps", JWB_OPT_U64, &steps, "steps of thread i per round: steps x (1 + i mod 4) (default 20000)"},
      {"retain", JWB_OPT_U64, &retain, "live-set slots per thread (default 4000)"},
      {"transfer", JWB_OPT_U64, &transfer_n, "entries of the shared transfer array (default 1000)"},
      {"idle-ms", JWB_OPT_U64, &idle_ms, "idle period after each round, ms (sleep-augmented; default 0)"},
      {0},
  };
  jwb_init(argc, argv, "mstress-like: rounds of threads, migrating objects, optional idle periods", opts);
  if (rounds < 1 || steps < 1 || retain < 1 || transfer_n < 1) {
    fprintf(stderr, "%s: rounds, steps, retain and transfer must be >= 1\n", jwb.name);
    return 2;
  }
  transfer = jwb_meta_alloc(transfer_n * sizeof(*transfer));
  uint64_t done = 0;
  while (done < rounds || (jwb.duration_s > 0 && jwb_elapsed() < jwb.duration_s)) {
    if (idle_ms) jwb_mark("burst");
    jwb_run(jwb.threads, worker, -1);
    done++;
    if (idle_ms) {
      jwb_mark("idle");
      jwb_sleep_ms((double)idle_ms);
    }
  }
  if (idle_ms) jwb_mark("end");
  jwb_region_end();
  jwb_thread *m = jwb_main_ctx();
  for (size_t j = 0; j < transfer_n; j++) drop(m, atomic_load(&transfer[j]));
  char extra[128];
  snprintf(extra, sizeof extra, "rounds=%llu steps=%llu retain=%llu transfer=%llu idle_ms=%llu",
           (unsigned long long)done, (unsigned long long)steps, (unsigned long long)retain,
           (unsigned long long)transfer_n, (unsigned long long)idle_ms);
  return jwb_report(extra);
}
