/* libjwmalloc.so loaded with dlopen (the jw_ API from ctypes or a plugin),
 * used from several threads until its reclaim thread runs, then dlclose'd:
 * the process must go on (threads start and exit, fork) without running
 * unmapped code. Before the library was linked -z nodelete, the reclaim
 * thread and the thread-exit key destructor crashed here.
 * Usage: test_dlopen PATH_TO_LIBJWMALLOC_SO */
#include <dirent.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

static void *(*jm)(size_t);
static void (*jf)(void *);

static void *use(void *arg) {
  (void)arg;
  for (int i = 0; i < 2000; i++) jf(jm((size_t)(16 + i * 37 % 40000)));
  for (int i = 0; i < 8; i++) jf(jm((size_t)1 << 20)); /* ranges: the reclaimer has work */
  return NULL;
}

static void *idle(void *arg) { return arg; }

/* Is a thread named jw-reclaim running in this process? */
static int reclaim_thread_running(void) {
  DIR *d = opendir("/proc/self/task");
  struct dirent *e;
  int found = 0;
  while (d && (e = readdir(d)) != NULL) {
    char path[300], comm[32] = "";
    snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f && fgets(comm, sizeof comm, f) && strncmp(comm, "jw-reclaim", 10) == 0) found = 1;
    if (f) fclose(f);
  }
  if (d) closedir(d);
  return found;
}

int main(int argc, char **argv) {
  if (argc < 2) return 2;
  setenv("JWMALLOC_RECLAIM_INTERVAL_MS", "2", 1);
  void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  CHECK(h != NULL, "dlopen: %s", dlerror());
  if (h == NULL) return 1;
  jm = (void *(*)(size_t))dlsym(h, "jw_malloc");
  jf = (void (*)(void *))dlsym(h, "jw_free");
  CHECK(jm && jf, "jw_malloc/jw_free not found");
  pthread_t t[4];
  for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, use, NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < 200 && !reclaim_thread_running(); i++) {
    jf(jm((size_t)1 << 20));
    usleep(1000);
  }
  CHECK(reclaim_thread_running(), "the reclaim thread never started: the test would prove nothing");
  void *p = jm(100); /* this thread has a thread cache (its exit key is set) */
  jf(p);
  CHECK(dlclose(h) == 0, "dlclose: %s", dlerror());
  /* the library's threads and hooks outlive dlclose: threads come and go,
   * the process forks, the reclaim thread keeps its schedule */
  for (int r = 0; r < 20; r++) {
    for (int i = 0; i < 4; i++) pthread_create(&t[i], NULL, idle, NULL);
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    usleep(2000);
  }
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  int st = 0;
  waitpid(pid, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "fork child status %d", st);
  if (test_failures()) return 1;
  printf("dlopen/dlclose: ok\n");
  return 0;
}
