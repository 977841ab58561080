/* The null allocator: close to the least an allocator can do and still run
 * the suite's workloads with their block checks and bounded memory. It
 * measures the harness's own cost per call through the same LD_PRELOAD path
 * as the allocators compared (docs/design/bench.md, "Harness cost"). Not an
 * allocator to use: it never gives memory back to the system.
 *
 * A block is a multiple of 16 bytes up to 1 KiB (classes 1..64: 16 c bytes),
 * then a power of two (class 64 + k: 2^(10+k) bytes), so that the blocks lie
 * about as densely as a real allocator's; an 8-byte header just before the
 * pointer returned holds the class and the distance back to the block's
 * start, so free needs no lookup. Each thread
 * keeps one LIFO list per class; free pushes onto the freeing thread's list
 * (a cross-thread free costs the same as a local one). A list that reaches
 * a magazine's worth of blocks becomes the class's spare; the previous spare
 * goes to a depot shared by all threads (one mutex, a few times per thousand
 * calls at most), where an empty list takes it back. New blocks are carved
 * from a per-thread chunk of one reserved region. A thread's lists go to the
 * depot when it exits, so threads that come and go (larson) leak nothing.
 *
 * malloc and free: about ten instructions each on the common path. Alignment:
 * 16 bytes (posix_memalign and the like: any power of two). Thread-safe.
 * Errors: NULL with ENOMEM when the region is used up, EINVAL for a bad
 * alignment, as the C and POSIX functions say.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))
#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)

#define HDR 16u                           /* keeps the pointer 16-byte aligned */
#define NCLASS 95u                        /* 16 B .. 2^40 B: requests up to 2^39 */
#define CHUNK ((size_t)1 << 20)           /* a thread's bump chunk */
#define MAX_REQUEST ((size_t)1 << 39)

typedef struct blk {
  struct blk *next;                       /* in a list */
  struct blk *next_mag;                   /* head of a magazine in the depot */
  uint64_t count;                         /* head of a magazine: its blocks */
} blk;

typedef struct cls {
  blk *cur;                               /* this thread's list */
  uint32_t n;                             /* its length */
  blk *spare;                             /* a full magazine, or NULL */
} cls;

static __thread cls tc[NCLASS];
static __thread char *bump, *bump_end;
static __thread int registered;

static pthread_mutex_t depot_lock = PTHREAD_MUTEX_INITIALIZER;
static blk *depot[NCLASS];
static pthread_once_t once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static char *region, *region_end;
static char *_Atomic region_next;

static inline size_t class_bytes(unsigned c) { return c <= 64 ? (size_t)c << 4 : (size_t)1024 << (c - 64); }
/* raw: the request plus the header, at least 17. */
static inline unsigned class_of(size_t raw) {
  return raw <= 1024 ? (unsigned)((raw + 15) >> 4)
                     : 54u + (unsigned)(64 - __builtin_clzll((unsigned long long)(raw - 1)));
}
/* Blocks per magazine: 64 up to 8 KiB, then fewer, so that what a thread
 * keeps stays near 512 KiB per class; 4 from 128 KiB (set by init_once,
 * before the first block exists). */
static uint8_t mags[NCLASS];
static inline uint32_t mag(unsigned c) { return mags[c]; }

/* ------------------------------------------------------------- memory */

static void thread_exit(void *arg);

static void init_once(void) {
  /* One reserved region, pages backed only when touched; halve the
   * reservation until the system grants it. */
  for (size_t sz = (size_t)1 << 40; sz >= ((size_t)1 << 30); sz >>= 1) {
    void *p = mmap(NULL, sz, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
      region = p;
      region_end = region + sz;
      break;
    }
  }
  region_next = region;
  for (unsigned c = 0; c < NCLASS; c++) {
    size_t per = ((size_t)512 << 10) / (c ? class_bytes(c) : 16);
    mags[c] = (uint8_t)(per > 64 ? 64 : per < 4 ? 4 : per);
  }
  (void)pthread_key_create(&exit_key, thread_exit);
}

static char *region_take(size_t bytes) {
  pthread_once(&once, init_once);
  if (!region) return NULL;
  char *p = atomic_fetch_add_explicit(&region_next, bytes, memory_order_relaxed);
  if (p + bytes > region_end || p + bytes < p) return NULL;
  return p;
}

static void register_thread(void) {
  pthread_once(&once, init_once);
  registered = 1;
  (void)pthread_setspecific(exit_key, (void *)1); /* thread_exit runs when this thread ends */
}

static void depot_push(unsigned c, blk *head, uint64_t count) {
  head->count = count;
  pthread_mutex_lock(&depot_lock);
  head->next_mag = depot[c];
  depot[c] = head;
  pthread_mutex_unlock(&depot_lock);
}

static blk *depot_pop(unsigned c) {
  pthread_mutex_lock(&depot_lock);
  blk *head = depot[c];
  if (head) depot[c] = head->next_mag;
  pthread_mutex_unlock(&depot_lock);
  return head;
}

static void thread_exit(void *arg) {
  (void)arg;
  for (unsigned c = 0; c < NCLASS; c++) {
    cls *k = &tc[c];
    if (k->cur) depot_push(c, k->cur, k->n);
    if (k->spare) depot_push(c, k->spare, mag(c));
    k->cur = k->spare = NULL;
    k->n = 0;
  }
}

/* An empty list: the spare, a magazine from the depot, or a new block. */
static __attribute__((noinline)) blk *refill(unsigned c) {
  cls *k = &tc[c];
  if (!registered) register_thread();
  blk *m = k->spare;
  uint32_t n = mag(c);
  if (m) {
    k->spare = NULL;
  } else if ((m = depot_pop(c)) != NULL) {
    n = (uint32_t)m->count;
  } else {
    size_t sz = class_bytes(c);
    if (sz >= CHUNK) return (blk *)region_take(sz);
    if (bump + sz > bump_end || !bump) {
      bump = region_take(CHUNK);
      if (!bump) return NULL;
      bump_end = bump + CHUNK;
    }
    blk *b = (blk *)bump;
    bump += sz;
    return b;
  }
  k->cur = m->next;
  k->n = n - 1;
  return m;
}

/* A full list becomes the spare (the previous spare goes to the depot);
 * b starts the new list. */
static __attribute__((noinline)) void flush_push(unsigned c, blk *b) {
  cls *k = &tc[c];
  if (!registered) register_thread();
  if (k->spare) depot_push(c, k->spare, mag(c));
  k->spare = k->cur;
  b->next = NULL;
  k->cur = b;
  k->n = 1;
}

static inline blk *take(unsigned c) {
  cls *k = &tc[c];
  blk *b = k->cur;
  if (LIKELY(b)) {
    k->cur = b->next;
    k->n--;
    return b;
  }
  return refill(c);
}

static inline void *finish(blk *b, unsigned c, size_t off) {
  char *p = (char *)b + off;
  ((uint64_t *)p)[-1] = c | (uint64_t)off << 8;
  return p;
}

/* ------------------------------------------------------------- the API */

static __attribute__((noinline)) void *malloc_slow(size_t n) {
  if (n > MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  unsigned c = class_of(n + HDR);
  blk *b = refill(c);
  if (!b) {
    errno = ENOMEM;
    return NULL;
  }
  return finish(b, c, HDR);
}

EXPORT void *malloc(size_t n) {
  /* Too large (its class would lie beyond the table), or an empty list: a
   * tail call, so the common path saves no registers. */
  if (UNLIKELY(n > MAX_REQUEST)) return malloc_slow(n);
  unsigned c = class_of(n + HDR);
  cls *k = &tc[c];
  blk *b = k->cur;
  if (UNLIKELY(!b)) return malloc_slow(n);
  k->cur = b->next;
  k->n--;
  return finish(b, c, HDR);
}

EXPORT void free(void *p) {
  if (UNLIKELY(!p)) return;
  uint64_t h = ((uint64_t *)p)[-1];
  unsigned c = (unsigned)(h & 0xff);
  blk *b = (blk *)((char *)p - (h >> 8));
  cls *k = &tc[c];
  if (UNLIKELY(k->n >= mag(c))) {
    flush_push(c, b); /* a tail call: the common path saves no registers */
    return;
  }
  b->next = k->cur;
  k->cur = b;
  k->n++;
}

EXPORT size_t malloc_usable_size(void *p) {
  if (!p) return 0;
  uint64_t h = ((uint64_t *)p)[-1];
  return class_bytes((unsigned)(h & 0xff)) - (size_t)(h >> 8);
}

EXPORT void *calloc(size_t n, size_t size) {
  size_t bytes;
  if (__builtin_mul_overflow(n, size, &bytes)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = malloc(bytes);
  if (p) memset(p, 0, bytes);
  return p;
}

EXPORT void *realloc(void *p, size_t n) {
  if (!p) return malloc(n);
  if (n == 0) { /* as glibc: frees and returns NULL */
    free(p);
    return NULL;
  }
  size_t have = malloc_usable_size(p);
  if (n <= have) return p;
  void *q = malloc(n);
  if (!q) return NULL;
  memcpy(q, p, have);
  free(p);
  return q;
}

static void *aligned(size_t align, size_t n) {
  if (align <= HDR) return malloc(n);
  if (n > MAX_REQUEST || align > MAX_REQUEST) {
    errno = ENOMEM;
    return NULL;
  }
  unsigned c = class_of(n + align + HDR);
  blk *b = take(c);
  if (!b) {
    errno = ENOMEM;
    return NULL;
  }
  uintptr_t p = ((uintptr_t)b + HDR + align - 1) & ~(uintptr_t)(align - 1);
  return finish(b, c, p - (uintptr_t)b);
}

static inline int pow2(size_t a) { return a && !(a & (a - 1)); }

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!pow2(align) || align % sizeof(void *)) return EINVAL;
  int e = errno;
  void *p = aligned(align, n);
  if (!p) {
    errno = e;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!pow2(align)) {
    errno = EINVAL;
    return NULL;
  }
  return aligned(align, n);
}

EXPORT void *memalign(size_t align, size_t n) { return aligned_alloc(align, n); }

EXPORT void *valloc(size_t n) { return aligned((size_t)sysconf(_SC_PAGESIZE), n); }

EXPORT void *pvalloc(size_t n) {
  size_t pg = (size_t)sysconf(_SC_PAGESIZE);
  return aligned(pg, (n + pg - 1) & ~(pg - 1));
}
