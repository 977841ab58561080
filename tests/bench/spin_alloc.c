/* A test allocator for the suite's own tests (LD_PRELOAD): glibc's malloc plus
 * a known amount of extra work per call, an optional background thread and an
 * optional crash, so tests can check what the suite attributes and reports.
 *   SPIN_ALLOC_ITERS=N        every call first runs N iterations of a loop
 *   SPIN_ALLOC_THREAD=N       at the 1000th call, start a thread that runs N iterations
 *   SPIN_ALLOC_ABORT_AFTER=N  abort() at the N-th call (a crashing allocator)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "glibc_malloc.h"

static long iters = -1, thread_iters, abort_after;
static atomic_long calls;

static long env_long(const char *name) {
  const char *v = getenv(name);
  return v ? atol(v) : 0;
}

__attribute__((noinline)) static void spin(long n) {
  for (volatile long i = 0; i < n; i++) {
  }
}

static void *background(void *arg) {
  (void)arg;
  spin(thread_iters);
  return NULL;
}

/* The background thread always runs its N iterations: joined at exit, or a
 * process that finishes first (a loaded machine) would cut its count short
 * and the attribution test would see less allocator work than it set. */
static pthread_t bg;
static atomic_int bg_started;

__attribute__((destructor)) static void join_background(void) {
  if (atomic_load(&bg_started)) pthread_join(bg, NULL);
}

static void work(void) {
  if (iters < 0) {
    thread_iters = env_long("SPIN_ALLOC_THREAD");
    abort_after = env_long("SPIN_ALLOC_ABORT_AFTER");
    iters = env_long("SPIN_ALLOC_ITERS");
  }
  long c = atomic_fetch_add(&calls, 1) + 1;
  if (abort_after && c == abort_after) abort();
  if (thread_iters && c == 1000) {
    if (pthread_create(&bg, NULL, background, NULL) == 0) atomic_store(&bg_started, 1);
  }
  spin(iters);
}

void *malloc(size_t n) { work(); return __libc_malloc(n); }
void *calloc(size_t a, size_t b) { work(); return __libc_calloc(a, b); }
void *realloc(void *p, size_t n) { work(); return __libc_realloc(p, n); }
void free(void *p) { work(); __libc_free(p); }
void *memalign(size_t a, size_t n) { work(); return __libc_memalign(a, n); }
void *aligned_alloc(size_t a, size_t n) { work(); return __libc_memalign(a, n); }
int posix_memalign(void **out, size_t a, size_t n) {
  work();
  void *p = __libc_memalign(a, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
