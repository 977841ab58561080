/* A warm malloc+free pair of one small size on the thread-local fast path,
 * for counting instructions under callgrind (tests/jwmalloc/fastpath_bench.sh).
 * Linked against jwmalloc or mimalloc; identical code otherwise.
 *
 * Usage: fastpath_pair [SIZE] [PAIRS]. jw_bench_pair() is the only function
 * callgrind collects (--toggle-collect): its calls include the PLT jumps to
 * malloc and free, as a real program's calls do. Eight blocks of the same
 * size stay live, so the pair never empties the slab/page (the steady state
 * of a program). The script runs two pair counts and divides the difference
 * in instructions by the difference in pairs: warm-up, the first refill and
 * process start cancel out exactly (callgrind counts are deterministic). */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) void jw_bench_pair(size_t n) {
  void *p = malloc(n);
  __asm__ volatile("" : : "r"(p) : "memory");
  free(p);
  __asm__ volatile("" ::: "memory"); /* no tail call: callgrind sees a plain return */
}

/* `fastpath_pair mallinfo CALLS`: one mallinfo2() call, the function
 * collected instead (the script's mallinfo line: the cost of the call that
 * ART makes at every collection). */
__attribute__((noinline)) void jw_bench_mallinfo(void) {
  struct mallinfo2 m = mallinfo2();
  __asm__ volatile("" : : "r"(&m) : "memory");
}

int main(int argc, char **argv) {
  if (argc > 2 && strcmp(argv[1], "mallinfo") == 0) {
    long calls = strtol(argv[2], NULL, 10);
    for (long i = 0; i < calls; i++) jw_bench_mallinfo();
    printf("%ld mallinfo2 calls\n", calls);
    return 0;
  }
  size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 32;
  long pairs = argc > 2 ? strtol(argv[2], NULL, 10) : 100000;
  void *keep[8];
  for (int i = 0; i < 8; i++) keep[i] = malloc(size);
  for (long i = 0; i < pairs; i++) jw_bench_pair(size);
  for (int i = 0; i < 8; i++) free(keep[i]);
  printf("%ld pairs of %zu bytes\n", pairs, size);
  return 0;
}
