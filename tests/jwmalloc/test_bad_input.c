/* Bad input: double frees and frees/reallocs of pointers jwmalloc never
 * returned are reported in one line on stderr and abort(), in every tier;
 * JWMALLOC_ABORT_ON_ERROR=0 turns that into a warning and the program goes
 * on; allocation failure returns NULL with ENOMEM and never aborts.
 * Each case runs in a forked child (linked to libjwmalloc.so, standard
 * names). */
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jwmalloc.h"

#pragma GCC diagnostic ignored "-Wfree-nonheap-object"
#pragma GCC diagnostic ignored "-Wuse-after-free"

static int failures;

/* Runs fn in a child with stderr captured; returns its wait status. */
static int run_child(void (*fn)(void), char *err, size_t cap) {
  int fds[2];
  if (pipe(fds) != 0) abort();
  fflush(NULL);
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    dup2(fds[1], 2);
    /* The first free of a range starts the reclaim thread, and creating it
     * allocates (pthread_create's TLS vector), which may reuse a range the
     * case has just freed: start it before the case. */
    free(malloc(100000));
    fn();
    _exit(0);
  }
  close(fds[1]);
  size_t len = 0;
  ssize_t n;
  while (len + 1 < cap && (n = read(fds[0], err + len, cap - 1 - len)) > 0) len += (size_t)n;
  err[len] = 0;
  close(fds[0]);
  int status;
  waitpid(pid, &status, 0);
  return status;
}

static int count_lines(const char *s) {
  int n = 0;
  for (; *s; s++) n += *s == '\n';
  return n;
}

/* The child must abort with exactly one line mentioning `want`. */
static void expect_abort(const char *name, void (*fn)(void), const char *want) {
  char err[4096];
  int st = run_child(fn, err, sizeof err);
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGABRT || strstr(err, want) == NULL ||
      strncmp(err, "jwmalloc: ", 10) != 0 || count_lines(err) != 1) {
    fprintf(stderr, "%s: expected one line with '%s' and SIGABRT; got status %#x, stderr: %s\n", name, want, st, err);
    failures++;
  } else {
    printf("%-28s -> %s", name, err);
  }
}

static void *thread_free(void *p) {
  free(p);
  return NULL;
}

static char global_buf[256];
static void *volatile sink;

static void small_double(void) {
  char *p = malloc(32), *q = malloc(32);
  free(p), free(q), free(p);
}
static void mid_double(void) {
  char *p = malloc(5000);
  free(p), free(p);
}
/* A range the thread's block cache holds after the first free (40 KiB, and
 * 600 KiB in the budget of the larger ranges: it carries the free key
 * there), and one too large for it (the backend's records say it is free). */
static void large_double(void) {
  char *p = malloc(40000);
  free(p), free(p);
}
static void large_double_big(void) {
  char *p = malloc(600000);
  free(p), free(p);
}
/* A block never handed out, waiting in the thread's bin (the next block of
 * a fresh slab) or in the midend's pointer cache (the next block of a fresh
 * midend slab): freed, it would be cached and handed out twice. The classes
 * are ones the test process uses nowhere else, so the neighbour is free. */
static void small_never_allocated(void) {
  char *p = malloc(1000);
  free(p + malloc_usable_size(p));
  sink = malloc(1000), sink = malloc(1000);
}
static void mid_never_allocated(void) {
  char *p = malloc(2500);
  free(p + malloc_usable_size(p));
  sink = malloc(2500), sink = malloc(2500);
}
/* The start of a range below an over-aligned block (never handed out):
 * accepted, it went into the block cache while its block stayed live, and
 * the range was handed out twice. One-granule ranges first shift the next
 * range off an 8 KiB boundary. */
static void overaligned_range_start(void) {
  for (int i = 0; i < 16; i++) {
    sink = memalign(4096, 4096);
    char *p = memalign(8192, 14000); /* a 5-granule range (20 KiB) */
    if (malloc_usable_size(p) == 16384) { /* its range starts 4 KiB below */
      free(p - 4096);
      _exit(0);
    }
  }
  _exit(2);
}
static void large_double_uncached(void) {
  char *p = malloc(1500000); /* above the block cache's largest class (1 MiB) */
  free(p), free(p);
}
static void huge_double(void) {
  char *p = malloc(8 << 20);
  free(p), free(p);
}
static void stack_free(void) {
  char x[64];
  sink = x;
  free(sink);
}
static void global_free(void) { free(global_buf + 16); }
/* An interior pointer of another thread's block (the slow path checks
 * block boundaries; the owner's own fast path checks only 16-byte alignment
 * and the header, see docs/design/frontend.md). */
static void small_interior(void) {
  char *p = malloc(64);
  pthread_t t;
  pthread_create(&t, NULL, thread_free, p + 16);
  pthread_join(t, NULL);
}
/* From another thread, a pointer in a slab's tail (past its last block, on
 * the class's stride): the slow path's capacity check (issue 8's remote free
 * path, frontend.md "Frees from other threads"). Class 176: 22 blocks end at
 * offset 64 + 3872, the tail's 160 bytes follow. */
static void small_tail(void) {
  char *p = malloc(176);
  char *page = (char *)((uintptr_t)p & ~(uintptr_t)4095);
  pthread_t t;
  pthread_create(&t, NULL, thread_free, page + 64 + 22 * 176);
  pthread_join(t, NULL);
}
static void small_misaligned(void) {
  char *p = malloc(64);
  free(p + 1);
}
static void mid_interior(void) {
  char *p = malloc(5000);
  free(p + 64);
}
static void large_interior(void) {
  char *p = malloc(100000);
  free(p + 8192);
}
static void huge_interior(void) {
  char *p = malloc(8 << 20);
  free(p + 4096);
}
/* The backend's metadata lookup says what a bad pointer points into
 * (issue 3): the middle of a live range, or a free range. */
static void realloc_range_interior(void) {
  char *p = malloc(100000);
  sink = realloc(p + 4096, 200000);
}
static void usable_range_interior(void) {
  char *p = malloc(100000);
  sink = (void *)(uintptr_t)malloc_usable_size(p + 12288);
}
static void realloc_range_freed(void) {
  char *p = malloc(1500000); /* above the block cache's classes: the backend's free range */
  free(p);
  sink = realloc(p, 10);
}
static void free_into_freed_range(void) {
  char *p = malloc(1500000);
  free(p);
  free(p + 65536);
}
static void realloc_stack(void) {
  char x[64];
  sink = x;
  sink = realloc(sink, 100);
}
static void realloc_freed(void) {
  char *p = malloc(48);
  free(p);
  sink = realloc(p, 100);
}
static void usable_stack(void) {
  char x[64];
  sink = x;
  sink = (void *)(uintptr_t)malloc_usable_size(sink);
}

static void cross_thread_double(void) {
  char *p = malloc(40);
  pthread_t t;
  pthread_create(&t, NULL, thread_free, p);
  pthread_join(t, NULL);
  pthread_create(&t, NULL, thread_free, p);
  pthread_join(t, NULL);
}

/* With ABORT_ON_ERROR=0: warnings, the program continues and allocates. */
static void warn_only(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  char *p = malloc(32);
  free(p);
  free(p);
  free(global_buf);
  char *m = malloc(5000);
  free(m);
  free(m);
  if (realloc(global_buf, 10) != NULL) _exit(3);
  for (int i = 0; i < 1000; i++) free(malloc((size_t)i * 7));
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  _exit(s.invalid_frees == 4 ? 0 : 4);
}

/* Out of memory under RLIMIT_AS: NULL and ENOMEM in every tier, no abort,
 * and everything works again once memory is freed. */
static void out_of_memory(void) {
  struct rlimit rl = {(rlim_t)512 << 20, (rlim_t)512 << 20};
  if (setrlimit(RLIMIT_AS, &rl) != 0) _exit(5);
  errno = 0;
  if (malloc((size_t)600 << 20) != NULL || errno != ENOMEM) _exit(6);
  void *chain = NULL;
  static const size_t sizes[] = {1 << 20, 100000, 5000, 100};
  size_t counts[4] = {0};
  for (int k = 0; k < 4; k++) {
    for (;;) {
      errno = 0;
      void **b = malloc(sizes[k]);
      if (b == NULL) {
        if (errno != ENOMEM) _exit(7);
        break;
      }
      *b = chain;
      chain = b;
      counts[k]++;
    }
  }
  if (counts[0] == 0) _exit(8);
  while (chain) {
    void **b = chain;
    chain = *b;
    free(b);
  }
  void *again = malloc(1 << 20);
  if (again == NULL) _exit(9);
  free(again);
  fprintf(stderr, "out of memory: NULL/ENOMEM after %zu x 1 MiB, %zu x 100 KB, %zu x 5000 B, %zu x 100 B\n",
          counts[0], counts[1], counts[2], counts[3]);
  _exit(0);
}

static void expect_exit0(const char *name, void (*fn)(void), const char *want) {
  char err[8192];
  int st = run_child(fn, err, sizeof err);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || (want && strstr(err, want) == NULL)) {
    fprintf(stderr, "%s: expected exit 0%s%s; got status %#x, stderr: %s\n", name, want ? " with " : "",
            want ? want : "", st, err);
    failures++;
  } else {
    printf("%-28s -> exit 0; %s", name, err[0] ? err + (count_lines(err) > 1 ? 0 : 0) : "\n");
  }
}

int main(void) {
  expect_abort("small double free", small_double, "free(): double free detected");
  expect_abort("midend double free", mid_double, "free(): double free detected");
  expect_abort("range double free", large_double, "free(): double free detected");
  expect_abort("600 KiB range double free", large_double_big, "free(): double free detected");
  expect_abort("range double free, uncached", large_double_uncached, "free(): invalid pointer: inside the free ");
  expect_abort("direct double free", huge_double, "free(): invalid pointer");
  expect_abort("cross-thread double free", cross_thread_double, "free(): double free detected");
  expect_abort("small block never handed out", small_never_allocated, "free(): double free detected");
  expect_abort("midend block never handed out", mid_never_allocated, "free(): double free detected");
  expect_abort("over-aligned range's start", overaligned_range_start,
               "free(): invalid pointer: not a block start in the live 20 KiB range");
  expect_abort("free of a stack pointer", stack_free, "free(): invalid pointer");
  expect_abort("free of a global", global_free, "free(): invalid pointer");
  expect_abort("small interior pointer", small_interior, "free(): invalid pointer: not a block start in the live 4 KiB slab");
  expect_abort("small tail pointer", small_tail, "free(): invalid pointer: not a block start in the live 4 KiB slab");
  expect_abort("small misaligned pointer", small_misaligned, "free(): invalid pointer: not a block start");
  expect_abort("midend interior pointer", mid_interior, "free(): invalid pointer: not a block start in the live");
  expect_abort("range interior pointer", large_interior, "free(): invalid pointer: 8192 bytes into the live 112 KiB range");
  expect_abort("realloc, range interior", realloc_range_interior, "realloc(): invalid pointer: 4096 bytes into the live");
  expect_abort("usable size, range interior", usable_range_interior,
               "malloc_usable_size(): invalid pointer: 12288 bytes into the live");
  expect_abort("realloc of a freed range", realloc_range_freed, "realloc(): invalid pointer: inside the free ");
  expect_abort("free into a freed range", free_into_freed_range, "free(): invalid pointer: inside the free ");
  expect_abort("direct interior pointer", huge_interior, "free(): invalid pointer");
  expect_abort("realloc of a stack pointer", realloc_stack, "realloc(): invalid pointer");
  expect_abort("realloc of a freed block", realloc_freed, "realloc(): double free detected");
  expect_abort("usable size of a stack ptr", usable_stack, "malloc_usable_size(): invalid pointer");
  expect_exit0("ABORT_ON_ERROR=0", warn_only, "call ignored");
  expect_exit0("out of memory", out_of_memory, "NULL/ENOMEM");
  if (failures) return 1;
  puts("bad input: ok");
  return 0;
}
