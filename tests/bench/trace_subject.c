/* Replay-determinism test subject: four threads call every allocation function
 * the recorder traces, with frees by other threads, and print how many calls of
 * each aligned kind they made (tests/bench/test_replay.py). Deterministic. */
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 4
#define ROUNDS 3000

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *shared[64];
static long n_posix, n_aligned, n_memalign, n_valloc;

static void *thread_main(void *arg) {
  uint64_t x = (uintptr_t)arg * 7919 + 1;
  void *mine[32] = {0};
  long posix = 0, aligned = 0, mema = 0, val = 0;
  for (int i = 0; i < ROUNDS; i++) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    unsigned k = (unsigned)(x >> 33) % 32, what = (unsigned)(x >> 45) % 10;
    size_t size = 1 + (size_t)((x >> 20) % 3000);
    free(mine[k]);
    switch (what) {
      case 0: mine[k] = calloc(1 + size % 7, size / 7 + 1); break;
      case 1: mine[k] = realloc(malloc(size / 2 + 1), size); break;
      case 2: if (posix_memalign(&mine[k], 64, size) != 0) mine[k] = NULL; posix++; break;
      case 3: mine[k] = aligned_alloc(256, size); aligned++; break;
      case 4: mine[k] = memalign(4096, size); mema++; break;
      case 5: mine[k] = valloc(size); val++; break;
      case 6: mine[k] = realloc(NULL, size); break;
      case 7: {                        /* hand a block to whoever comes next: cross-thread free */
        void *p = malloc(size);
        pthread_mutex_lock(&lock);
        void *old = shared[k];
        shared[k] = p;
        pthread_mutex_unlock(&lock);
        mine[k] = old;
        break;
      }
      case 8: mine[k] = realloc(malloc(size), 0); break;   /* recorded as a free */
      default: mine[k] = malloc(size);
    }
    if (mine[k]) memset(mine[k], 0x5a, 1);
  }
  for (int k = 0; k < 32; k++) free(mine[k]);
  pthread_mutex_lock(&lock);
  n_posix += posix, n_aligned += aligned, n_memalign += mema, n_valloc += val;
  pthread_mutex_unlock(&lock);
  return NULL;
}

int main(void) {
  pthread_t t[THREADS];
  for (long i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, thread_main, (void *)i);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int k = 0; k < 64; k++) free(shared[k]);
  free(NULL);
  printf("subject posix_memalign=%ld aligned_alloc=%ld memalign=%ld valloc=%ld\n", n_posix, n_aligned,
         n_memalign, n_valloc);
  return 0;
}
