/* Process life (docs/design/api.md): allocation before main (a constructor
 * that runs before jwmalloc's own), in atexit handlers and destructors, in a
 * thread's TLS destructor that runs after jwmalloc released that thread's
 * cache, from many threads, and in a forked child. Linked to libjwmalloc.so,
 * and statically (-static) with libjwmalloc.a. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "jwmalloc.h"

static char *early;
static pthread_key_t late_key;
static int failures;

__attribute__((constructor(101))) static void before_main(void) {
  early = malloc(100);
  strcpy(early, "allocated before main");
  free(malloc(5000));
}

/* Created after jwmalloc's key, so it runs after jwmalloc released this
 * thread's cache: frees a block of an abandoned slab, allocates again. */
static void late_destructor(void *v) {
  free(v);
  char *p = malloc(64);
  memset(p, 1, 64);
  free(p);
}

static void *thread_fn(void *arg) {
  (void)arg;
  pthread_setspecific(late_key, malloc(32));
  void *keep[100];
  for (int i = 0; i < 100; i++) keep[i] = malloc((size_t)i * 13 + 1);
  for (int i = 0; i < 100; i += 2) free(keep[i]);
  return keep[1]; /* freed by main after this thread is gone */
}

static void at_exit(void) {
  char *p = malloc(1000);
  memset(p, 2, 1000);
  free(p);
}

__attribute__((destructor)) static void after_main(void) { free(malloc(77)); }

int main(void) {
  if (early == NULL || strcmp(early, "allocated before main") != 0) {
    fprintf(stderr, "allocation before main lost\n");
    return 1;
  }
  free(early);
  atexit(at_exit);
  pthread_key_create(&late_key, late_destructor);
  jw_stats a, b;
  jw_stats_get(&a, sizeof a);
  for (int round = 0; round < 10; round++) {
    pthread_t t[20];
    void *ret[20];
    for (int i = 0; i < 20; i++) pthread_create(&t[i], NULL, thread_fn, NULL);
    for (int i = 0; i < 20; i++) pthread_join(t[i], &ret[i]);
    for (int i = 0; i < 20; i++) free(ret[i]);
  }
  pid_t pid = fork();
  if (pid == 0) {
    for (int i = 0; i < 10000; i++) free(malloc((size_t)i % 3000 + 1));
    _exit(0);
  }
  int st;
  waitpid(pid, &st, 0);
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    fprintf(stderr, "forked child failed: %#x\n", st);
    failures++;
  }
  jw_stats_get(&b, sizeof b);
  if (b.threads_exited - a.threads_exited < 200) {
    fprintf(stderr, "thread caches not released: %llu\n", (unsigned long long)(b.threads_exited - a.threads_exited));
    failures++;
  }
  if (b.small_mallocs - a.small_mallocs < 20000 || b.invalid_frees != 0) {
    fprintf(stderr, "jwmalloc did not serve the calls\n");
    failures++;
  }
  if (failures) return 1;
  printf("process life: ok (%llu threads, %llu abandoned slabs)\n",
         (unsigned long long)(b.threads_exited - a.threads_exited),
         (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs));
  return 0;
}
