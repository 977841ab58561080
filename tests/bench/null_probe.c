/* Subject for the null allocator's test (tests/bench/preload_test.py): under
 * LD_PRELOAD of libjwb_null.so, every form of allocation returns memory of
 * the size and alignment asked for that no other live block overlaps,
 * calloc's is zero, realloc keeps the contents, and blocks freed by another
 * thread come back. Exits 0, or 1 with a line naming the first failure. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4000
static void *hand[4][N];

static void bad(const char *what, size_t n) {
  printf("FAIL: %s (%zu bytes)\n", what, n);
  exit(1);
}

static void *worker(void *arg) {
  unsigned id = (unsigned)(uintptr_t)arg;
  unsigned char *live[N];
  size_t len[N];
  uint64_t x = 88172645463325252ull ^ id;
  for (int i = 0; i < N; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    size_t n = 1 + (size_t)(x % (i % 64 == 0 ? 300000 : 2048));
    size_t align = (size_t)8 << (x >> 60 & 7); /* 8 .. 1024 */
    unsigned char *p;
    switch (i % 5) {
      case 0: p = malloc(n); break;
      case 1: if (posix_memalign((void **)&p, align, n)) p = NULL; break;
      case 2: p = aligned_alloc(align, n); break;
      case 3:
        p = calloc(1, n);
        for (size_t k = 0; p && k < n; k++)
          if (p[k]) bad("calloc memory not zero", n);
        break;
      default: p = memalign(align, n); break;
    }
    if (!p) bad("NULL", n);
    if ((uintptr_t)p % ((i % 5 == 1 || i % 5 == 2 || i % 5 == 4) ? align : 16)) bad("misaligned", n);
    if (malloc_usable_size(p) < n) bad("usable size below the request", n);
    memset(p, (int)(i & 0xff), n);
    live[i] = p;
    len[i] = n;
  }
  for (int i = 0; i < N; i++)
    for (size_t k = 0; k < len[i]; k += 97)
      if (live[i][k] != (unsigned char)(i & 0xff)) bad("a block was overwritten by another (overlap)", len[i]);
  for (int i = 0; i < N; i += 2) {
    unsigned char *q = realloc(live[i], len[i] * 3 + 1);
    if (!q) bad("realloc NULL", len[i]);
    for (size_t k = 0; k < len[i]; k += 61)
      if (q[k] != (unsigned char)(i & 0xff)) bad("realloc lost the contents", len[i]);
    live[i] = q;
  }
  for (int i = 0; i < N; i++) hand[id][i] = live[i]; /* the next thread frees them */
  return NULL;
}

int main(void) {
  pthread_t th[4];
  for (int round = 0; round < 3; round++) {
    for (uintptr_t i = 0; i < 4; i++)
      if (pthread_create(&th[i], NULL, worker, (void *)i)) bad("pthread_create", 0);
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    for (int t = 0; t < 4; t++)
      for (int i = 0; i < N; i++) free(hand[(t + 1) % 4][i]);
  }
  free(NULL);
  printf("ok\n");
  return 0;
}
