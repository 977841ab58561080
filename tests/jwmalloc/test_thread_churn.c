/* Threads created and joined in rounds, with stacks large enough that
 * glibc's stack cache (40 MiB) overflows: pthread_join then frees the TLS of
 * cached stacks from the dynamic linker while holding the stack-cache lock.
 * With a 1 ms reclaim interval the reclaim thread comes and goes, and a free
 * that wanted to start it there used to call pthread_create under that lock:
 * a deadlock (also in a forked child, at the reclaim thread's own exit).
 * Linked to libjwmalloc.so; a watchdog process turns a hang into a failure. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check.h"

static void *work(void *a) {
  char *p = malloc(100 + (size_t)a * 64);
  memset(p, 1, 100);
  free(p);
  return NULL;
}

static void rounds(int n) {
  for (int r = 0; r < n; r++) {
    int k = 2 + (r * 7) % 14;
    pthread_t t[16];
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstacksize(&at, (size_t)(1 + r % 5) << 22); /* 4-20 MiB */
    for (int i = 0; i < k; i++) pthread_create(&t[i], &at, work, (void *)(long)i);
    for (int i = 0; i < k; i++) pthread_join(t[i], NULL);
    pthread_attr_destroy(&at);
    free(malloc(1 << 20)); /* a range to age: the reclaim thread has work, then idles out */
    if (r % 3 == 0) {
      struct timespec ts = {0, 2000000};
      nanosleep(&ts, NULL);
    }
  }
}

/* The rounds, then the same in a forked child. */
static int run(int n) {
  rounds(n);
  pid_t pid = fork();
  if (pid == 0) {
    rounds(n / 3);
    _exit(0);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %d", st);
  return test_failures() != 0;
}

/* A hung thread sits in pthread_create with every signal blocked (the
 * reclaim thread's creation blocks them), so no alarm can end it: the work
 * runs in its own process group, watched from here and killed on a hang. */
int main(int argc, char **argv) {
  int n = argc > 1 ? atoi(argv[1]) : 300;
  pid_t w = fork();
  if (w == 0) {
    setpgid(0, 0);
    _exit(run(n));
  }
  setpgid(w, w);
  int st = 0;
  for (int i = 0; i < 1200; i++) { /* 120 s */
    if (waitpid(w, &st, WNOHANG) == w) {
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) {
        printf("thread churn: %d rounds (and %d in a child) without a hang\n", n, n / 3);
        return 0;
      }
      fprintf(stderr, "test_thread_churn: worker failed (status %d)\n", st);
      return 1;
    }
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
  }
  kill(-w, SIGKILL);
  waitpid(w, &st, 0);
  fprintf(stderr, "test_thread_churn: hang (deadlock creating the reclaim thread?); killed\n");
  return 1;
}
