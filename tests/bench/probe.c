/* Launcher test subject: makes an exact number of mmap/munmap system calls,
 * then grows its RSS by a known amount and drops it again, marking each phase
 * (tests/bench/test_launcher.py).  usage: probe CALLS MIB HOLD_MS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void mark(const char *name) {
  const char *fd = getenv("JWBENCH_MARK_FD");
  if (!fd) return;
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  char line[96];
  int n = snprintf(line, sizeof line, "%llu %s\n",
                   (unsigned long long)ts.tv_sec * 1000000000ull + (unsigned long long)ts.tv_nsec, name);
  if (write(atoi(fd), line, (size_t)n) < 0) exit(1);
}

static void hold(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: probe CALLS MIB HOLD_MS\n");
    return 2;
  }
  long calls = atol(argv[1]), mib = atol(argv[2]), ms = atol(argv[3]);
  mark("calls");
  for (long i = 0; i < calls; i++) {
    /* raw system calls: no libc wrapper can batch or skip them */
    long p = syscall(SYS_mmap, 0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == -1 || syscall(SYS_munmap, p, 4096) != 0) return 1;
  }
  size_t bytes = (size_t)mib << 20;
  char *big = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (big == MAP_FAILED) return 1;
  memset(big, 1, bytes);
  mark("peak");
  hold(ms);
  munmap(big, bytes);
  mark("low");
  hold(ms);
  mark("end");
  return 0;
}
