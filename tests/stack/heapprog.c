/* A multi-threaded heap workload for the stack tests (docs/design/stack.md).
 * It is an ordinary program on the system's malloc: the tests run it under
 * `jwmalloc run --swap`. Every block carries its size and a seed in its first
 * 16 bytes and a pattern derived from them in the rest, so a page that comes
 * back with other bytes, or zero, is found.
 *
 *   heapprog churn THREADS
 *     Each thread keeps SLOTS blocks (16 B to 8 MiB) and replaces, reallocs
 *     and hands blocks to the next thread (which verifies and frees them)
 *     until standard input ends; then every block is verified.
 *     Prints "ready" after the first fill, then "verified N corrupt C".
 *   heapprog freed THREADS LIVE_MIB FREED_MIB
 *     Each thread allocates its share of LIVE_MIB, then of FREED_MIB, and
 *     frees the latter: the heap holds LIVE_MIB of data and FREED_MIB of
 *     free memory. Prints "ready live=BYTES freed=BYTES", waits for standard
 *     input to end (the threads stay alive, their caches full), verifies.
 *
 * Exit 0 when every block verified, 1 on corruption, 2 on bad usage.
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SLOTS 1000
#define HANDOFF 64

typedef struct inbox {
  pthread_mutex_t mu;
  void *blk[HANDOFF];
  int n;
} inbox;

typedef struct worker {
  pthread_t th;
  int id, nthreads;
  uint64_t rng;
  void *slot[SLOTS];
  uint64_t verified, corrupt, live_bytes, freed_bytes;
  size_t live_mib, freed_mib;
  inbox box;
  struct worker *all;
} worker;

static volatile int stop; /* set once by the main thread; read by the workers */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int nparked, released;

static uint64_t next(uint64_t *s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/* Sizes as programs allocate: mostly small, some mid and large, a few huge. */
static size_t pick_size(uint64_t *rng, int huge) {
  uint64_t r = next(rng) % 1000;
  if (r < 700) return 16 + next(rng) % 1008;
  if (r < 900) return 2048 + next(rng) % 14336;
  if (r < 999 || !huge) return 16384 + next(rng) % (128 << 10);
  return (5u << 20) + next(rng) % (3u << 20);
}

static void fill(uint8_t *p, size_t n, uint64_t seed) {
  memcpy(p, &n, 8);
  memcpy(p + 8, &seed, 8);
  uint64_t s = seed;
  for (size_t i = 16; i + 8 <= n; i += 8) {
    uint64_t v = next(&s);
    memcpy(p + i, &v, 8);
  }
}

/* 1 when the block holds what fill wrote (its size is read from it). */
static int check(const uint8_t *p, size_t *size) {
  uint64_t n, seed;
  memcpy(&n, p, 8);
  memcpy(&seed, p + 8, 8);
  *size = n;
  if (n < 16 || n > (16u << 20)) return 0;
  uint64_t s = seed, v;
  for (size_t i = 16; i + 8 <= n; i += 8) {
    uint64_t want = next(&s);
    memcpy(&v, p + i, 8);
    if (v != want) return 0;
  }
  return 1;
}

static void *new_block(worker *w, int huge) {
  size_t n = pick_size(&w->rng, huge);
  uint8_t *p = malloc(n);
  if (p == NULL) {
    fprintf(stderr, "heapprog: malloc(%zu) failed\n", n);
    exit(1);
  }
  fill(p, n, next(&w->rng));
  return p;
}

static void verify(worker *w, void *p, const char *where) {
  size_t n;
  if (check(p, &n)) w->verified++;
  else {
    w->corrupt++;
    fprintf(stderr, "heapprog: thread %d: corrupt block %p (%s)\n", w->id, p, where);
  }
}

static void drain(worker *w) {
  pthread_mutex_lock(&w->box.mu);
  for (int i = 0; i < w->box.n; i++) {
    verify(w, w->box.blk[i], "handed over");
    free(w->box.blk[i]);
  }
  w->box.n = 0;
  pthread_mutex_unlock(&w->box.mu);
}

/* Hands p to the next thread; 0 when its inbox is full (p stays ours). */
static int hand_over(worker *w, void *p) {
  worker *to = &w->all[(w->id + 1) % w->nthreads];
  pthread_mutex_lock(&to->box.mu);
  int ok = to->box.n < HANDOFF;
  if (ok) to->box.blk[to->box.n++] = p;
  pthread_mutex_unlock(&to->box.mu);
  return ok;
}

static void churn_step(worker *w) {
  int i = (int)(next(&w->rng) % SLOTS);
  uint64_t op = next(&w->rng) % 16;
  verify(w, w->slot[i], "slot");
  if (op == 0) {
    /* realloc: the old contents up to the smaller size must move intact */
    size_t n;
    uint64_t seed;
    check(w->slot[i], &n);
    memcpy(&seed, (uint8_t *)w->slot[i] + 8, 8);
    size_t m = pick_size(&w->rng, 1);
    uint8_t *q = realloc(w->slot[i], m);
    if (q == NULL) exit(1);
    uint64_t s = seed, v;
    for (size_t k = 16; k + 8 <= (n < m ? n : m); k += 8) {
      memcpy(&v, q + k, 8);
      if (v != next(&s)) {
        w->corrupt++;
        fprintf(stderr, "heapprog: thread %d: realloc lost data at offset %zu\n", w->id, k);
        break;
      }
    }
    fill(q, m, next(&w->rng));
    w->slot[i] = q;
    return;
  }
  if (op == 1 && hand_over(w, w->slot[i])) {
    w->slot[i] = new_block(w, 1);
    return;
  }
  free(w->slot[i]);
  w->slot[i] = new_block(w, 1);
}

static void *churn_main(void *arg) {
  worker *w = arg;
  for (int i = 0; i < SLOTS; i++) w->slot[i] = new_block(w, 1);
  pthread_mutex_lock(&park_mu);
  nparked++;
  pthread_cond_broadcast(&park_cv);
  pthread_mutex_unlock(&park_mu);
  while (!__atomic_load_n(&stop, __ATOMIC_ACQUIRE)) {
    for (int k = 0; k < 64; k++) churn_step(w);
    drain(w);
  }
  return NULL;
}

/* freed: the live share first, then the garbage share, freed at once. */
static void *freed_main(void *arg) {
  worker *w = arg;
  size_t cap = 1u << 20, n = 0, g = 0;
  void **live = malloc(cap * sizeof *live), **junk = malloc(cap * sizeof *junk);
  if (!live || !junk) exit(1);
  for (uint64_t b = 0; b < (uint64_t)w->live_mib << 20 && n < cap; n++) {
    live[n] = new_block(w, 0);
    size_t sz;
    check(live[n], &sz);
    b += sz;
    w->live_bytes += sz;
  }
  for (uint64_t b = 0; b < (uint64_t)w->freed_mib << 20 && g < cap; g++) {
    junk[g] = new_block(w, 1);
    size_t sz;
    check(junk[g], &sz);
    b += sz;
    w->freed_bytes += sz;
  }
  for (size_t i = 0; i < g; i++) free(junk[i]);
  free(junk);
  pthread_mutex_lock(&park_mu);
  nparked++;
  pthread_cond_broadcast(&park_cv);
  while (!released) pthread_cond_wait(&park_cv, &park_mu);
  pthread_mutex_unlock(&park_mu);
  for (size_t i = 0; i < n; i++) {
    verify(w, live[i], "live");
    free(live[i]);
  }
  free(live);
  return NULL;
}

int main(int argc, char **argv) {
  int freed = argc == 5 && strcmp(argv[1], "freed") == 0;
  if (!freed && !(argc == 3 && strcmp(argv[1], "churn") == 0)) {
    fprintf(stderr, "usage: heapprog churn THREADS | heapprog freed THREADS LIVE_MIB FREED_MIB\n");
    return 2;
  }
  int t = atoi(argv[2]);
  if (t < 1 || t > 64) {
    fprintf(stderr, "heapprog: THREADS must be 1 to 64\n");
    return 2;
  }
  worker *w = calloc((size_t)t, sizeof *w);
  if (!w) return 1;
  for (int i = 0; i < t; i++) {
    w[i].id = i;
    w[i].nthreads = t;
    w[i].all = w;
    w[i].rng = 0x1234567ull * (uint64_t)(i + 1);
    if (freed) {
      w[i].live_mib = (size_t)atoi(argv[3]) / (size_t)t;
      w[i].freed_mib = (size_t)atoi(argv[4]) / (size_t)t;
    }
    pthread_mutex_init(&w[i].box.mu, NULL);
    if (pthread_create(&w[i].th, NULL, freed ? freed_main : churn_main, &w[i])) return 1;
  }
  pthread_mutex_lock(&park_mu);
  while (nparked < t) pthread_cond_wait(&park_cv, &park_mu);
  pthread_mutex_unlock(&park_mu);
  uint64_t live = 0, fb = 0;
  for (int i = 0; i < t; i++) live += w[i].live_bytes, fb += w[i].freed_bytes;
  if (freed) printf("ready live=%llu freed=%llu\n", (unsigned long long)live, (unsigned long long)fb);
  else printf("ready\n");
  fflush(stdout);
  char buf[256];
  while (fgets(buf, sizeof buf, stdin)) {
  }
  __atomic_store_n(&stop, 1, __ATOMIC_RELEASE);
  pthread_mutex_lock(&park_mu);
  released = 1;
  pthread_cond_broadcast(&park_cv);
  pthread_mutex_unlock(&park_mu);
  uint64_t verified = 0, corrupt = 0;
  for (int i = 0; i < t; i++) pthread_join(w[i].th, NULL);
  for (int i = 0; i < t; i++) {
    drain(&w[i]);
    for (int k = 0; !freed && k < SLOTS; k++) {
      verify(&w[i], w[i].slot[k], "final");
      free(w[i].slot[k]);
    }
    verified += w[i].verified;
    corrupt += w[i].corrupt;
  }
  printf("verified %llu corrupt %llu\n", (unsigned long long)verified, (unsigned long long)corrupt);
  free(w);
  return corrupt ? 1 : 0;
}
