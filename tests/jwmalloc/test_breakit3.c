/* Hostile tests of four changes (breakit3): kept direct mappings
 * (api/huge_cache.c), the counted remote list, the ready stack in batches,
 * same-class pooled page reuse, and the per-thread count of frees made by
 * threads without a cache. Each case asserts a property a user relies on:
 * no block handed out twice, data intact, bad frees reported and harmless,
 * nothing kept or leaked past what the design allows, statistics that add up.
 *
 * Usage: test_breakit3 CASE [SCALE]
 *   counts     frees by threads that never allocate are all counted
 *   huge_off   kept mappings do not outlive turning the cache or reclamation off
 *   huge_misc  calloc, memalign, realloc, double free, stats with kept mappings
 *   huge_race  direct mappings freed, reused, realloc'ed, trimmed and aged by
 *              several threads at once: data intact, nothing leaked
 *   remap_hole a direct block mapped in the range a moving realloc (mremap)
 *              just left: registered with its own size (deterministic)
 *   pooled     bad frees into pooled and reused pages; reused pages hand out
 *              each block once
 *   batches    an owner with more notified slabs than a refill moves: frees
 *              its own blocks into waiting slabs, exits with the stack full
 *              or with a batch pending; every page comes back
 *   idle_owner (not in the default run) pages emptied by consumers reach the
 *              reclaimer although their owner went idle after a refill
 *   churn      threads exiting while others free into their slabs, consumers
 *              that never allocate, malloc_trim in a loop: every block once,
 *              pages come back, counts
 *   huge_fork  (hooks build) fork while a thread holds the kept-mappings lock
 * SCALE: percent of the full size (sanitizer builds).
 */
#define _GNU_SOURCE 1 /* MREMAP_FIXED */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "backend/backend.h"
#include "checked_blocks.h"
#include "jwmalloc.h"
#include "raw_mmap.h"
#ifdef JW_TEST_HOOKS
#include "common/lock.h"
#endif

static int scale = 100;

static long scaled(long n) { return n * scale / 100 > 0 ? n * scale / 100 : 1; }

static jw_stats st(void) {
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  return s;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

/* The n live blocks of `size` bytes in v do not overlap (each handed out once). */
static int distinct(void **v, size_t n, size_t size) {
  uintptr_t *c = malloc(n * sizeof *c); /* glibc's: the test's own memory */
  memcpy(c, v, n * sizeof *c);
  qsort(c, n, sizeof *c, cmp_ptr);
  int ok = 1;
  for (size_t i = 1; i < n; i++)
    if (c[i] - c[i - 1] < size) {
      FAIL("blocks %p and %p overlap (size %zu): handed out twice", (void *)c[i - 1], (void *)c[i], size);
      ok = 0;
    }
  free(c);
  return ok;
}

/* ---- counts: frees by threads that never allocate ---- */

#define CN 40
static void *cblocks[CN];

static void *free_five(void *arg) {
  size_t i = (uintptr_t)arg;
  for (size_t k = 0; k < 5; k++) jw_free(cblocks[i * 5 + k]); /* never allocates: no thread cache */
  return NULL;
}

/* Frees from a key destructor that runs after jwmalloc's thread-exit hook
 * (keys are destroyed in creation order; jwmalloc's is created first). */
static pthread_key_t late_key;
static void late_free(void *v) {
  void **b = v;
  for (int k = 0; k < 5; k++) jw_free(b[k]);
}
static void *alloc_then_late_free(void *arg) {
  void **b = arg;
  jw_free(jw_malloc(100)); /* this thread has a cache */
  pthread_setspecific(late_key, b);
  return NULL;
}

static int case_counts(void) {
  pthread_key_create(&late_key, late_free);
  for (int round = 0; round < 3; round++) {
    jw_stats a = st();
    for (int i = 0; i < CN; i++) cblocks[i] = jw_malloc(32);
    pthread_t t[CN / 5];
    for (int i = 0; i < CN / 5; i++) pthread_create(&t[i], NULL, free_five, (void *)(uintptr_t)i);
    for (int i = 0; i < CN / 5; i++) pthread_join(t[i], NULL);
    jw_stats b = st();
    /* The frees of the exited threads are all done: the statistics must say so
     * (mallocs minus frees is the number of live blocks). */
    CHECK(b.small_mallocs - a.small_mallocs == CN, "counts: %llu small mallocs, want %d",
          (unsigned long long)(b.small_mallocs - a.small_mallocs), CN);
    CHECK(b.small_frees - a.small_frees == CN,
          "counts: %llu of %d small frees counted after their threads exited (round %d)",
          (unsigned long long)(b.small_frees - a.small_frees), CN, round);
    CHECK(b.cross_thread_frees - a.cross_thread_frees == CN, "counts: %llu of %d cross-thread frees counted",
          (unsigned long long)(b.cross_thread_frees - a.cross_thread_frees), CN);
  }
  /* Frees after the thread's cache was released (thread exit). */
  jw_stats a = st();
  for (int i = 0; i < 5; i++) cblocks[i] = jw_malloc(32);
  pthread_t t;
  pthread_create(&t, NULL, alloc_then_late_free, cblocks);
  pthread_join(t, NULL);
  jw_stats b = st();
  CHECK(b.small_frees - a.small_frees == 6, "counts: %llu of 6 small frees counted (5 after the cache's release)",
        (unsigned long long)(b.small_frees - a.small_frees));
  printf("counts: frees by %d threads without a cache all counted, and frees after thread exit\n", 3 * CN / 5);
  return 0;
}

/* ---- kept direct mappings ---- */

#define MiB ((size_t)1 << 20)

static void huge_setup(void) {
  /* A long interval: the aging pass does not interfere with exact checks. */
  CHECK(jw_option_set("RECLAIM", 1) == 0, "RECLAIM=1");
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 600000) == 0, "interval");
  CHECK(jw_option_set("HUGE_CACHE_MB", 32) == 0, "HUGE_CACHE_MB");
  jw_malloc_trim(0);
}

static int case_huge_off(void) {
  huge_setup();
  /* Reclamation turned off at run time: nothing will age the cache, so the
   * kept mappings must go (api.md: with reclamation off a freed mapping is
   * unmapped at once). */
  void *p = jw_malloc(8 * MiB);
  memset(p, 1, 8 * MiB);
  jw_free(p);
  CHECK(st().huge_kept_bytes == 8 * MiB, "huge_off: an 8 MiB mapping was not kept");
  CHECK(jw_option_set("RECLAIM", 0) == 0, "RECLAIM=0");
  void *q = jw_malloc(20 * MiB); /* no kept mapping fits */
  jw_free(q);
  jw_stats s = st();
  CHECK(s.huge_kept_bytes == 0, "huge_off: %llu bytes kept after reclamation was turned off and a direct "
        "mapping was freed (nothing ages them)", (unsigned long long)s.huge_kept_bytes);
  jw_malloc_trim(0);
  /* The same for HUGE_CACHE_MB=0 at run time. */
  jw_option_set("RECLAIM", 1);
  p = jw_malloc(8 * MiB);
  jw_free(p);
  CHECK(st().huge_kept_bytes == 8 * MiB, "huge_off: an 8 MiB mapping was not kept (2)");
  jw_option_set("HUGE_CACHE_MB", 0);
  q = jw_malloc(20 * MiB);
  jw_free(q);
  s = st();
  CHECK(s.huge_kept_bytes == 0, "huge_off: %llu bytes kept after HUGE_CACHE_MB=0 and a direct mapping freed",
        (unsigned long long)s.huge_kept_bytes);
  jw_option_set("HUGE_CACHE_MB", 32);
  jw_malloc_trim(0);
  printf("huge_off: kept mappings dropped once the cache or reclamation is off\n");
  return 0;
}

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static int case_huge_misc(void) {
  huge_setup();
  jw_option_set("ABORT_ON_ERROR", 0);
  /* Warm up: the backend's first root and the direct-mapping registry are
   * mapped once and stay. */
  jw_free(jw_malloc(16));
  jw_free(jw_malloc(5 * MiB));
  jw_malloc_trim(0);
  jw_stats base = st();

  /* calloc from a kept mapping is zeroed, the part past an eighth too. */
  unsigned char *p = jw_malloc(8 * MiB);
  memset(p, 0xab, 8 * MiB);
  jw_free(p);
  jw_stats a = st();
  unsigned char *q = jw_calloc(1, 7 * MiB + 100);
  jw_stats b = st();
  CHECK(q == p && b.huge_reuses == a.huge_reuses + 1, "huge_misc: calloc did not reuse the kept mapping");
  CHECK(all_zero(q, 7 * MiB + 100), "huge_misc: calloc of a reused mapping is not zeroed");
  jw_free(q);

  /* memalign with an alignment the kept mapping lacks: a fresh aligned one. */
  p = jw_memalign(64 * MiB, 5 * MiB);
  CHECK(p && ((uintptr_t)p & (64 * MiB - 1)) == 0, "huge_misc: memalign(64 MiB) misaligned: %p", (void *)p);
  memset(p, 2, 5 * MiB);
  jw_free(p);
  void *al = jw_memalign(4096, 5 * MiB); /* reuses */
  CHECK(al != NULL && jw_malloc_usable_size(al) >= 5 * MiB, "huge_misc: memalign(4096, 5 MiB)");
  jw_free(al);
  p = jw_memalign((size_t)1 << (sizeof(size_t) * 8 - 24), 5 * MiB); /* no kept mapping is aligned so: fresh, or ENOMEM */
  if (p) {
    CHECK(((uintptr_t)p & (((size_t)1 << (sizeof(size_t) * 8 - 24)) - 1)) == 0, "huge_misc: memalign(1 TiB; 256 B on 32-bit) misaligned");
    jw_free(p);
  }
  jw_malloc_trim(0);

  /* realloc of a reused, trimmed mapping keeps the data. */
  p = jw_malloc(8 * MiB);
  jw_free(p);
  q = jw_malloc(5 * MiB + 1);
  CHECK(q == p, "huge_misc: the 8 MiB mapping was not reused for 5 MiB");
  CHECK(jw_malloc_usable_size(q) == 5 * MiB + 4096, "huge_misc: tail not trimmed (%zu)", jw_malloc_usable_size(q));
  for (size_t i = 0; i < 5 * MiB + 1; i += 4096) q[i] = (unsigned char)(i >> 12);
  /* the trimmed tail was unmapped: a free there is reported, not accepted */
  long inv = (long)st().invalid_frees;
  jw_free(p + 6 * MiB);
  CHECK((long)st().invalid_frees == inv + 1, "huge_misc: free inside the trimmed tail not reported");
  unsigned char *r = jw_realloc(q, 12 * MiB);
  CHECK(r != NULL, "huge_misc: realloc up");
  for (size_t i = 0; r && i < 5 * MiB + 1; i += 4096)
    if (r[i] != (unsigned char)(i >> 12)) {
      FAIL("huge_misc: realloc up lost data at %zu", i);
      break;
    }
  r = jw_realloc(r, 100 << 10);
  for (size_t i = 0; r && i < (100 << 10); i += 4096)
    if (r[i] != (unsigned char)(i >> 12)) {
      FAIL("huge_misc: realloc down lost data at %zu", i);
      break;
    }
  jw_free(r);

  /* A second free of a kept mapping is reported and changes nothing. */
  p = jw_malloc(6 * MiB);
  jw_free(p);
  a = st();
  jw_free(p);
  b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "huge_misc: double free of a kept mapping not reported");
  CHECK(b.huge_kept_bytes == a.huge_kept_bytes, "huge_misc: a double free changed the kept bytes");
  q = jw_malloc(6 * MiB);
  void *q2 = jw_malloc(6 * MiB);
  CHECK(q == p && q2 != p, "huge_misc: the kept mapping was handed out twice (%p %p %p)", (void *)p, (void *)q,
        (void *)q2);
  jw_free(q);
  jw_free(q2);
  /* realloc of a kept (freed) mapping: reported, EINVAL */
  a = st();
  errno = 0;
  r = jw_realloc(q, 7 * MiB);
  CHECK(r == NULL && errno == EINVAL && st().invalid_frees == a.invalid_frees + 1,
        "huge_misc: realloc of a kept mapping accepted");

  /* The bound: at most 8 mappings. */
  jw_option_set("HUGE_CACHE_MB", 1000);
  void *v[10];
  for (int i = 0; i < 10; i++) v[i] = jw_malloc(5 * MiB);
  for (int i = 0; i < 10; i++) jw_free(v[i]);
  b = st();
  CHECK(b.huge_kept_bytes <= 8 * 5 * MiB, "huge_misc: %llu bytes kept, over 8 mappings", (unsigned long long)b.huge_kept_bytes);
  jw_option_set("HUGE_CACHE_MB", 32);

  /* Statistics: everything freed and trimmed, the direct bytes and the
   * mapped bytes are back where they were. */
  jw_malloc_trim(0);
  b = st();
  CHECK(b.huge_kept_bytes == 0, "huge_misc: kept after trim");
  CHECK(b.huge_bytes == base.huge_bytes, "huge_misc: huge_bytes %llu, was %llu", (unsigned long long)b.huge_bytes,
        (unsigned long long)base.huge_bytes);
  CHECK(b.huge_mallocs - base.huge_mallocs == b.huge_frees - base.huge_frees, "huge_misc: huge mallocs %llu frees %llu",
        (unsigned long long)(b.huge_mallocs - base.huge_mallocs), (unsigned long long)(b.huge_frees - base.huge_frees));
  CHECK(b.mapped_bytes <= base.mapped_bytes + 4 * MiB, "huge_misc: mapped bytes %llu, was %llu",
        (unsigned long long)b.mapped_bytes, (unsigned long long)base.mapped_bytes);
  jw_option_set("ABORT_ON_ERROR", 1);
  printf("huge_misc: calloc, memalign, realloc, double free and statistics with kept mappings\n");
  return 0;
}

/* ---- huge_race: direct mappings freed, reused, trimmed and aged at once ---- */

#if defined(__SANITIZE_THREAD__)
#define RUN_UNDER_TSAN 1
#else
#define RUN_UNDER_TSAN 0
#endif

static atomic_int race_stop;

static void *huge_worker(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 11);
  long n = scaled(300);
  for (long i = 0; i < n; i++) {
    size_t size = 4 * MiB + 1 + rnd(&s) % (8 * MiB);
    unsigned kind = (unsigned)(rnd(&s) % 4);
    unsigned char *p;
    if (kind == 0) p = jw_calloc(1, size);
    else if (kind == 1) p = jw_memalign((size_t)2 << 20, size);
    else p = jw_malloc(size);
    if (p == NULL) {
      FAIL("huge_race: allocation of %zu failed", size);
      continue;
    }
    if (kind == 1 && ((uintptr_t)p & ((2 << 20) - 1))) FAIL("huge_race: memalign(2 MiB) gave %p", (void *)p);
    if (jw_malloc_usable_size(p) < size) FAIL("huge_race: usable %zu < %zu", jw_malloc_usable_size(p), size);
    unsigned char v = (unsigned char)(s | 1);
    for (size_t off = 0; off < size; off += 8 * 4096) {
      if (kind == 0 && p[off] != 0) {
        FAIL("huge_race: calloc'd block not zero at %zu", off);
        break;
      }
      p[off] = v;
    }
    p[size - 1] = v;
    /* realloc, up or down, keeps the data. Not under ThreadSanitizer: it
     * does not intercept mremap, so a range a realloc moved keeps its old
     * owner's shadow and the next mapping there reads as a race. */
    if (!RUN_UNDER_TSAN && rnd(&s) % 4 == 0) {
      size_t nsize = 4 * MiB + 1 + rnd(&s) % (8 * MiB);
      unsigned char *q = jw_realloc(p, nsize);
      if (q == NULL) {
        FAIL("huge_race: realloc failed");
      } else {
        p = q;
        size = nsize < size ? nsize : size;
      }
    }
    for (size_t off = 0; off < size; off += 8 * 4096)
      if (p[off] != v) {
        FAIL("huge_race: block %p changed at %zu (handed out twice?)", (void *)p, off);
        break;
      }
    jw_free(p);
  }
  return NULL;
}

static void *trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&race_stop)) {
    jw_malloc_trim(0);
    sleep_ms(1);
  }
  return NULL;
}

static int case_huge_race(void) {
  huge_setup();
  jw_free(jw_malloc(16));
  jw_free(jw_malloc(5 * MiB));
  jw_malloc_trim(0);
  jw_stats a = st();
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 1) == 0, "interval 1 ms"); /* the aging pass runs all along */
  enum { W = 4 };
  pthread_t w[W], tr;
  pthread_create(&tr, NULL, trimmer, NULL);
  for (int i = 0; i < W; i++) pthread_create(&w[i], NULL, huge_worker, (void *)(uintptr_t)i);
  for (int i = 0; i < W; i++) pthread_join(w[i], NULL);
  atomic_store(&race_stop, 1);
  pthread_join(tr, NULL);
  /* Every mapping went back: what is mapped is what was before, give or take
   * the small tiers' memory (realloc down to a large block does not happen)
   * and entirely free roots the backend keeps on purpose for a while (the
   * root reserve, backend.md 7c: they age out; counted apart). An emptied
   * root becomes whole only when its last pieces are filed: ranges in the
   * per-class bitmaps wait for the next cycle's flush, a release batch's for
   * its filing (backend.md 7a). On a loaded machine the 1 ms cycles may not
   * have run since the workers stopped: a leak stays, so the check is
   * retried, the cycles still running, for a bounded while. */
  jw_stats b;
  for (int i = 0; i < 200; i++) {
    jw_malloc_trim(0);
    b = st();
    if (b.mapped_bytes - b.backend_free_root_bytes <= a.mapped_bytes + 4 * MiB) break;
    sleep_ms(10);
  }
  jw_option_set("RECLAIM_INTERVAL_MS", 1000);
  printf("huge_race: %llu direct mappings, %llu served from kept ones, against malloc_trim and 1 ms aging\n",
         (unsigned long long)(b.huge_mallocs - a.huge_mallocs), (unsigned long long)(b.huge_reuses - a.huge_reuses));
  CHECK(b.huge_kept_bytes == 0, "huge_race: %llu bytes kept after malloc_trim", (unsigned long long)b.huge_kept_bytes);
  CHECK(b.huge_bytes == a.huge_bytes, "huge_race: direct bytes %llu, were %llu", (unsigned long long)b.huge_bytes,
        (unsigned long long)a.huge_bytes);
  CHECK(b.huge_mallocs - a.huge_mallocs == b.huge_frees - a.huge_frees, "huge_race: mallocs and frees differ");
  CHECK(b.mapped_bytes - b.backend_free_root_bytes <= a.mapped_bytes + 4 * MiB,
        "huge_race: %llu bytes mapped (%llu of them free roots kept), were %llu: mappings leaked",
        (unsigned long long)b.mapped_bytes, (unsigned long long)b.backend_free_root_bytes,
        (unsigned long long)a.mapped_bytes);
  CHECK(b.huge_reuses > a.huge_reuses, "huge_race: no mapping was reused: the case did not test the cache");
  return 0;
}

/* ---- remap_hole: a mapping made in the range a moving realloc just left ----
 *
 * The plain test binary defines mmap and mremap (the jw_ library is linked
 * statically, so its calls resolve here) to place mappings where the case
 * says. jw_realloc grows block p, and the kernel moves it (MREMAP_FIXED, as
 * MREMAP_MAYMOVE allows); right after that system call, while jw_realloc has
 * not yet updated the direct-mapping registry, the hook does what another
 * thread could do at that moment: maps a 10 MiB block, which lands at p (the
 * range just left), and asks its usable size. It must read its own size, not
 * the moved block's old entry; freeing both must give back exactly what was
 * mapped. */
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !defined(JW_TEST_HOOKS)
#define REMAP_HOOKS 1
#else
#define REMAP_HOOKS 0
#endif
#if REMAP_HOOKS
static char *map_at;         /* the next mapping goes here (MAP_FIXED_NOREPLACE) */
static char *move_to;        /* a growing mremap moves the block here */
static void *hole_block;
static size_t hole_usable;

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  if (map_at != NULL) {
    addr = map_at;
    map_at = NULL;
    flags |= MAP_FIXED_NOREPLACE;
  }
  return jw_raw_mmap(addr, len, prot, flags, fd, off);
}

void *mremap(void *old, size_t old_size, size_t new_size, int flags, ...) {
  if (move_to == NULL || new_size <= old_size) return (void *)syscall(SYS_mremap, old, old_size, new_size, flags, NULL);
  char *to = move_to;
  move_to = NULL;
  void *r = (void *)syscall(SYS_mremap, old, old_size, new_size, flags | MREMAP_FIXED, to);
  if (r == (void *)to) {
    map_at = old; /* another thread's malloc, between the move and the registry update */
    hole_block = jw_malloc(10 * MiB);
    hole_usable = hole_block ? jw_malloc_usable_size(hole_block) : 0;
  }
  return r;
}

static int case_remap_hole(void) {
  huge_setup();
  jw_option_set("HUGE_CACHE_MB", 0); /* fresh mappings only */
  jw_free(jw_malloc(5 * MiB));
  jw_stats a = st();
  /* An address range free for 64 MiB: reserved, then given back. */
  char *r = (char *)jw_raw_mmap(NULL, 64 * MiB, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  syscall(SYS_munmap, r, 64 * MiB);
  map_at = r;
  unsigned char *p = jw_malloc(6 * MiB);
  CHECK(p == (unsigned char *)r, "remap_hole: the block was not placed at %p", (void *)r);
  p[0] = 7;
  move_to = r + 32 * MiB;
  unsigned char *q = jw_realloc(p, 12 * MiB);
  CHECK(q == (unsigned char *)r + 32 * MiB && q[0] == 7, "remap_hole: realloc did not move the block (%p)", (void *)q);
  CHECK(hole_block == (void *)p, "remap_hole: the block mapped after the move is at %p, not %p", hole_block, (void *)p);
  CHECK(hole_usable >= 10 * MiB, "remap_hole: the 10 MiB block mapped where realloc's block had been read %zu "
        "usable bytes: the registry still held the moved block's entry", hole_usable);
  CHECK(jw_malloc_usable_size(hole_block) == 10 * MiB, "remap_hole: it reads %zu after realloc",
        jw_malloc_usable_size(hole_block));
  CHECK(jw_malloc_usable_size(q) == 12 * MiB, "remap_hole: the moved block reads %zu", jw_malloc_usable_size(q));
  memset(hole_block, 1, 10 * MiB);
  memset(q, 2, 12 * MiB);
  jw_free(hole_block);
  jw_free(q);
  jw_stats b = st();
  CHECK(b.huge_bytes == a.huge_bytes, "remap_hole: direct bytes %llu, were %llu", (unsigned long long)b.huge_bytes,
        (unsigned long long)a.huge_bytes);
  CHECK(b.mapped_bytes == a.mapped_bytes, "remap_hole: %llu bytes mapped, were %llu",
        (unsigned long long)b.mapped_bytes, (unsigned long long)a.mapped_bytes);
  jw_option_set("HUGE_CACHE_MB", 32);
  printf("remap_hole: a block mapped where a moving realloc had just been is registered with its own size\n");
  return 0;
}
#endif

/* ---- pooled pages ---- */

/* Allocates `n` blocks of `size` into v; returns how many share s's page. */
static int in_page(void **v, int n, uintptr_t page) {
  int k = 0;
  for (int i = 0; i < n; i++) k += ((uintptr_t)v[i] & ~(uintptr_t)4095) == page;
  return k;
}

#define PSIZE 48
#define PCAP (4032 / PSIZE) /* 84 blocks a slab */
#define PN (PCAP * 6)
static void *pv[PN];

static void *fill_and_exit(void *arg) {
  void **out = arg;
  for (int i = 0; i < PCAP; i++) out[i] = jw_malloc(PSIZE);
  return NULL;
}

static int case_pooled(void) {
  jw_option_set("ABORT_ON_ERROR", 0);
  jw_option_set("RECLAIM", 0); /* nothing ages the pool under the test */
  /* Every free to its slab, so that the page empties at its last free (with
   * the bin, frontend.md "The bin", it empties when the bin gives it back). */
  CHECK(jw_option_set("BIN", 0) == 0, "pooled: JWMALLOC_BIN is a run-time option");
  for (int i = 0; i < PN; i++) pv[i] = jw_malloc(PSIZE);
  CHECK(distinct(pv, PN, PSIZE), "pooled: first blocks");
  /* Empty the page of block 0 (a full, parked slab): it goes to the pool. */
  uintptr_t page = (uintptr_t)pv[0] & ~(uintptr_t)4095;
  int k = in_page(pv, PN, page);
  CHECK(k == PCAP, "pooled: %d blocks in the first page, want %d", k, PCAP);
  void *victim = NULL;
  for (int i = 0; i < PN; i++)
    if (((uintptr_t)pv[i] & ~(uintptr_t)4095) == page) {
      victim = pv[i];
      jw_free(pv[i]);
      pv[i] = NULL;
    }
  /* A free into the pooled page: reported, nothing changes. */
  jw_stats a = st();
  jw_free(victim);
  jw_free((char *)page + 64 + 5 * PSIZE);
  jw_stats b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 2, "pooled: frees into a pooled page not reported (%llu)",
        (unsigned long long)(b.invalid_frees - a.invalid_frees));
  /* The class refills from the pool: the page comes back with its list. */
  void *w[PCAP * 2];
  for (int i = 0; i < PCAP * 2; i++) w[i] = jw_malloc(PSIZE);
  jw_stats c = st();
  CHECK(c.pool_hits > b.pool_hits, "pooled: the pooled page was not reused");
  CHECK(in_page(w, PCAP * 2, page) == PCAP, "pooled: the reused page handed out %d blocks, want %d",
        in_page(w, PCAP * 2, page), PCAP);
  void *all[PN + PCAP * 2];
  int n = 0;
  for (int i = 0; i < PN; i++)
    if (pv[i]) all[n++] = pv[i];
  for (int i = 0; i < PCAP * 2; i++) all[n++] = w[i];
  CHECK(distinct(all, (size_t)n, PSIZE), "pooled: after reuse");
  for (int i = 0; i < PCAP * 2; i++) jw_free(w[i]);

  /* A free of a block still in the bin of a reused page (never handed
   * out): reported, and the block is not handed out twice. Empty a page,
   * take it back with few blocks handed out, free one that was not. */
  for (int i = 0; i < PN; i++)
    if (pv[i]) jw_free(pv[i]), pv[i] = NULL;
  jw_malloc_trim(0); /* pages to the backend: a clean start */
  for (int i = 0; i < PN; i++) pv[i] = jw_malloc(PSIZE);
  page = (uintptr_t)pv[0] & ~(uintptr_t)4095;
  for (int i = 0; i < PN; i++)
    if (((uintptr_t)pv[i] & ~(uintptr_t)4095) == page) jw_free(pv[i]), pv[i] = NULL;
  void *x[4];
  for (int i = 0; i < 4; i++) x[i] = jw_malloc(PSIZE);
  int xk = in_page(x, 4, page);
  if (xk == 4) { /* it came back (pool hit): three of its blocks are still in the bin */
    void *notyet = NULL;
    for (int j = 0; j < PCAP && notyet == NULL; j++) {
      void *cand = (char *)page + 64 + (size_t)j * PSIZE;
      int used = 0;
      for (int i = 0; i < 4; i++) used |= x[i] == cand;
      if (!used) notyet = cand;
    }
    a = st();
    jw_free(notyet);
    b = st();
    CHECK(b.invalid_frees == a.invalid_frees + 1, "pooled: a free of a never handed-out block of a reused page "
          "was accepted");
    void *y[PCAP];
    for (int i = 0; i < PCAP; i++) y[i] = jw_malloc(PSIZE);
    void *z[PCAP + 4];
    memcpy(z, x, sizeof x);
    memcpy(z + 4, y, sizeof y);
    CHECK(distinct(z, PCAP + 4, PSIZE), "pooled: after a bad free in a reused page");
    for (int i = 0; i < PCAP; i++) jw_free(y[i]);
  } else {
    FAIL("pooled: the emptied page was not taken back from the pool (%d of 4 blocks there)", xk);
  }
  for (int i = 0; i < 4; i++) jw_free(x[i]);
  for (int i = 0; i < PN; i++)
    if (pv[i]) jw_free(pv[i]), pv[i] = NULL;

  /* A page adopted from an abandoned slab is formatted again: a thread
   * fills a slab and exits, this thread frees every block (the last free
   * adopts the page into this thread's pool), then allocates the class. */
  jw_malloc_trim(0);
  void *t_out[PCAP];
  pthread_t t;
  pthread_create(&t, NULL, fill_and_exit, t_out);
  pthread_join(t, NULL);
  uintptr_t apage = (uintptr_t)t_out[0] & ~(uintptr_t)4095;
  CHECK(in_page(t_out, PCAP, apage) == PCAP, "pooled: the thread's blocks span pages");
  for (int i = 0; i < PCAP; i++) jw_free(t_out[i]);
  a = st();
  jw_free(t_out[3]); /* the adopted page is pooled: reported */
  b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "pooled: a free into an adopted pooled page not reported");
  void *u[PCAP * 2];
  for (int i = 0; i < PCAP * 2; i++) u[i] = jw_malloc(PSIZE);
  CHECK(distinct(u, PCAP * 2, PSIZE), "pooled: after adoption");
  CHECK(in_page(u, PCAP * 2, apage) == 0 || in_page(u, PCAP * 2, apage) == PCAP,
        "pooled: the adopted page handed out %d blocks", in_page(u, PCAP * 2, apage));
  for (int i = 0; i < PCAP * 2; i++) jw_free(u[i]);
  jw_option_set("ABORT_ON_ERROR", 1);
  jw_option_set("RECLAIM", 1);
  printf("pooled: bad frees into pooled and reused pages reported; reused pages hand out each block once\n");
  return 0;
}

/* ---- batches: more notified slabs than one refill moves ---- */

#define BSIZE 64
#define BCAP (4032 / BSIZE) /* 63 blocks a slab */
#define BSLABS 24
#define BN (BCAP * BSLABS)
static void *bblk[BN];
static void *bextra[BN];

static void *free_even(void *arg) {
  (void)arg;
  for (int i = 0; i < BN; i += 2) jw_free(bblk[i]); /* never allocates */
  return NULL;
}

static void remote_free_even(void) {
  pthread_t t;
  pthread_create(&t, NULL, free_even, NULL);
  pthread_join(t, NULL);
}

/* mode 0: refill, free own blocks, reuse; 1: exit with the stack untouched;
 * 2: exit with slabs left from a batch (ready_todo). */
static void *batch_owner(void *arg) {
  int mode = (int)(uintptr_t)arg;
  for (int i = 0; i < BN; i++) bblk[i] = make(BSIZE, (uint64_t)i * 7 + 1);
  remote_free_even(); /* every slab notified: BSLABS on the ready stack */
  if (mode == 1) return NULL;
  void *one = make(BSIZE, 5); /* a refill moves one batch */
  if (mode == 2) {
    check_and_free(one);
    return NULL;
  }
  for (int i = 1; i < BN; i += 2) check_and_free(bblk[i]); /* own frees into NOTIFIED, waiting slabs */
  for (int i = 0; i < BN; i++) bextra[i] = make(BSIZE, (uint64_t)i * 13 + 3);
  void *all[BN + 1];
  memcpy(all, bextra, sizeof bextra);
  all[BN] = one;
  distinct(all, BN + 1, BSIZE);
  for (int i = 0; i < BN; i++) check_and_free(bextra[i]);
  check_and_free(one);
  return NULL;
}

static int case_batches(void) {
  jw_free(jw_malloc(16));
  jw_malloc_trim(0);
  jw_stats a = st();
  for (int mode = 0; mode < 3; mode++) {
    pthread_t t;
    pthread_create(&t, NULL, batch_owner, (void *)(uintptr_t)mode);
    pthread_join(t, NULL);
    if (mode != 0) /* the owner exited holding the odd blocks: abandoned slabs, freed here */
      for (int i = 1; i < BN; i += 2) check_and_free(bblk[i]);
  }
  jw_malloc_trim(0);
  jw_stats b = st();
  long growth = (long)b.page_source_live_bytes - (long)a.page_source_live_bytes;
  printf("batches: %d notified slabs per owner, %llu abandoned, live bytes %+ld after all frees\n", BSLABS,
         (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs), growth);
  CHECK(b.abandoned_slabs - a.abandoned_slabs >= 2 * BSLABS, "batches: %llu slabs abandoned, want >= %d",
        (unsigned long long)(b.abandoned_slabs - a.abandoned_slabs), 2 * BSLABS);
  CHECK(growth <= 16 * 1024, "batches: %ld bytes still live after every block was freed: pages lost", growth);
  CHECK(b.small_mallocs - a.small_mallocs == b.small_frees - a.small_frees, "batches: %llu mallocs, %llu frees",
        (unsigned long long)(b.small_mallocs - a.small_mallocs), (unsigned long long)(b.small_frees - a.small_frees));
  char err[256];
  if (jw_backend_check_all(err, sizeof err) != 0) FAIL("batches: backend check: %s", err);
  return 0;
}

/* ---- idle_owner: NOT in the default run (a known limitation, see the
 * report of breakit3): an owner whose consumers emptied 40 of its slabs
 * refills once and goes idle. Before the ready stack moved in batches the
 * refill took every notified slab, the emptied pages went to the pool and the
 * reclaimer gave them back within two intervals; now 8 move and the other 31
 * stay on the owner-only list, out of the reclaimer's reach, until the owner
 * refills again, trims or exits. Reproduce: test_breakit3 idle_owner ---- */

#define IN (BCAP * 40)
static void *iblk[IN];
static atomic_int idle_phase;

static void *idle_consumer(void *arg) {
  (void)arg;
  for (int i = 0; i < IN; i++) jw_free(iblk[i]);
  return NULL;
}

static void *idle_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < IN; i++) iblk[i] = jw_malloc(BSIZE);
  pthread_t c;
  pthread_create(&c, NULL, idle_consumer, NULL);
  pthread_join(c, NULL);
  void *more[BCAP + 2]; /* the current slab's collected blocks, then one refill */
  for (int i = 0; i < BCAP + 2; i++) more[i] = jw_malloc(BSIZE);
  atomic_store(&idle_phase, 1);
  while (atomic_load(&idle_phase) != 2) sleep_ms(1); /* idle, alive */
  for (int i = 0; i < BCAP + 2; i++) jw_free(more[i]);
  return NULL;
}

static int case_idle_owner(void) {
  jw_option_set("RECLAIM", 1);
  jw_option_set("RECLAIM_INTERVAL_MS", 5);
  jw_free(jw_malloc(16));
  jw_stats a = st();
  pthread_t t;
  pthread_create(&t, NULL, idle_owner, NULL);
  while (atomic_load(&idle_phase) != 1) sleep_ms(1);
  long held = 0;
  for (int i = 0; i < 200; i++) { /* up to 1 s: 200 intervals */
    sleep_ms(5);
    held = (long)st().page_source_live_bytes - (long)a.page_source_live_bytes;
    if (held <= 4 * 4096) break;
  }
  printf("idle_owner: %ld KiB of emptied slabs still held by an idle owner after its consumers freed 40 slabs\n",
         held >> 10);
  CHECK(held <= 4 * 4096, "idle_owner: %ld KiB of pages its consumers emptied stay with an idle owner", held >> 10);
  atomic_store(&idle_phase, 2);
  pthread_join(t, NULL);
  jw_option_set("RECLAIM_INTERVAL_MS", 1000);
  return 0;
}

/* ---- churn: exiting owners, consumers that never allocate ---- */

#define RING 4096
static void *_Atomic ring[RING];

static void *churn_producer(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ULL * ((uintptr_t)arg + 1);
  int n = 300 + (int)(rnd(&s) % 300);
  for (int i = 0; i < n; i++) {
    uint64_t r = rnd(&s) % 100;
    size_t size = r < 80 ? 16 + rnd(&s) % 240 : r < 97 ? 256 + rnd(&s) % 1700 : 2048 + rnd(&s) % 6000;
    void *p = make(size, s);
    if (p == NULL) continue;
    void *old = atomic_exchange(&ring[rnd(&s) % RING], p);
    if (old) check_and_free(old); /* a block of another (maybe exited) thread */
  }
  return NULL;
}

static atomic_int stop_consumers;

/* Never allocates: every free is a cross-thread free without a cache. */
static void *churn_consumer(void *arg) {
  uint64_t s = 0x2545f4914f6cdd1dULL * ((uintptr_t)arg + 7);
  while (!atomic_load(&stop_consumers)) {
    void *p = atomic_exchange(&ring[rnd(&s) % RING], NULL);
    if (p) check_and_free(p);
  }
  return NULL;
}

/* malloc_trim in a loop (the midend's trim and the kept mappings race the
 * frees); a thread that allocates only through its trims. */
static void *churn_trimmer(void *arg) {
  (void)arg;
  while (!atomic_load(&stop_consumers)) {
    jw_malloc_trim(0);
    sleep_ms(1);
  }
  return NULL;
}

static void churn_phase(int waves) {
  enum { C = 3, W = 6 };
  pthread_t cs[C], tr;
  atomic_store(&stop_consumers, 0);
  pthread_create(&tr, NULL, churn_trimmer, NULL);
  for (int i = 0; i < C; i++) pthread_create(&cs[i], NULL, churn_consumer, (void *)(uintptr_t)i);
  for (int w = 0; w < waves; w++) {
    pthread_t ps[W];
    for (int i = 0; i < W; i++) pthread_create(&ps[i], NULL, churn_producer, (void *)(uintptr_t)(w * W + i));
    for (int i = 0; i < W; i++) pthread_join(ps[i], NULL);
  }
  atomic_store(&stop_consumers, 1);
  for (int i = 0; i < C; i++) pthread_join(cs[i], NULL);
  pthread_join(tr, NULL);
  for (int i = 0; i < RING; i++) {
    void *p = atomic_exchange(&ring[i], NULL);
    if (p) check_and_free(p);
  }
  jw_malloc_trim(0);
}

static int case_churn(void) {
  int waves = (int)scaled(60);
  jw_free(jw_malloc(16));
  jw_malloc_trim(0);
  jw_stats a = st();
  churn_phase(waves);
  jw_stats b = st();
  churn_phase(waves);
  jw_stats c = st();
  long growth = (long)c.page_source_live_bytes - (long)b.page_source_live_bytes;
  printf("churn: %d waves x 2, %llu abandoned slabs, %llu cross-thread frees, live bytes %+ld after the second "
         "phase\n", waves, (unsigned long long)(c.abandoned_slabs - a.abandoned_slabs),
         (unsigned long long)(c.cross_thread_frees - a.cross_thread_frees), growth);
  CHECK(c.abandoned_slabs > a.abandoned_slabs, "churn: no slab was abandoned: the case did not test it");
  /* Every block freed: the second phase must not leave more pages live than
   * the first (abandoned slabs give their pages back when the count ends). */
  CHECK(growth <= 13 * 72 * 1024, "churn: %ld more bytes live after the second phase: pages lost", growth);
  CHECK(c.small_mallocs - a.small_mallocs == c.small_frees - a.small_frees,
        "churn: %llu small mallocs, %llu small frees, every block freed",
        (unsigned long long)(c.small_mallocs - a.small_mallocs), (unsigned long long)(c.small_frees - a.small_frees));
  char err[256];
  if (jw_backend_check_all(err, sizeof err) != 0) FAIL("churn: backend check: %s", err);
  return 0;
}

/* ---- fork while a thread holds the kept-mappings lock ---- */

#ifdef JW_TEST_HOOKS
#include "lock_freezer.h"

static void *holder(void *arg) {
  (void)arg;
  may_freeze = 1;
  jw_free(jw_malloc(6 * MiB)); /* frozen in the put, holding the lock */
  return NULL;
}

static void *releaser(void *arg) {
  (void)arg;
  sleep_ms(100); /* fork prepare is waiting by now */
  atomic_store(&release_holder, 1);
  return NULL;
}

static int case_huge_fork(void) {
  huge_setup();
  jw_free(jw_malloc(16));
  freeze_kind = JW_LK_HUGE;
  jw_test_set_lock_hook(freeze_hook);
  alarm(60); /* a hang bound: fork must not deadlock */
  pthread_t h, r;
  pthread_create(&h, NULL, holder, NULL);
  while (!atomic_load(&frozen)) usleep(1000);
  pthread_create(&r, NULL, releaser, NULL);
  pid_t pid = fork();
  if (pid == 0) {
    /* The child: the lock was released; kept mappings work. */
    void *p = jw_malloc(7 * MiB);
    memset(p, 3, 7 * MiB);
    jw_free(p);
    jw_stats s;
    jw_stats_get(&s, sizeof s);
    if (s.huge_kept_bytes < 7 * MiB) _exit(3);
    void *q = jw_malloc(7 * MiB);
    if (q != p) _exit(4);
    jw_free(q);
    jw_malloc_trim(0);
    jw_stats_get(&s, sizeof s);
    _exit(s.huge_kept_bytes == 0 ? 0 : 5);
  }
  CHECK(pid > 0, "fork: %s", strerror(errno));
  int status = 0;
  waitpid(pid, &status, 0);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "huge_fork: child failed (status %#x)", status);
  pthread_join(h, NULL);
  pthread_join(r, NULL);
  jw_test_set_lock_hook(NULL);
  /* The parent goes on using the cache. */
  void *p = jw_malloc(6 * MiB);
  jw_free(p);
  jw_malloc_trim(0);
  alarm(0);
  CHECK(st().huge_kept_bytes == 0, "huge_fork: kept after trim in the parent");
  printf("huge_fork: fork waited for the kept-mappings lock holder; child and parent use the cache\n");
  return 0;
}
#endif

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: test_breakit3 counts|huge_off|huge_misc|huge_race|remap_hole|pooled|batches|idle_owner|churn|huge_fork [SCALE]\n");
    return 2;
  }
  if (argc > 2) scale = atoi(argv[2]);
  const char *c = argv[1];
  if (strcmp(c, "counts") == 0) case_counts();
  else if (strcmp(c, "huge_off") == 0) case_huge_off();
  else if (strcmp(c, "huge_misc") == 0) case_huge_misc();
  else if (strcmp(c, "pooled") == 0) case_pooled();
  else if (strcmp(c, "huge_race") == 0) case_huge_race();
#if REMAP_HOOKS
  else if (strcmp(c, "remap_hole") == 0) case_remap_hole();
#endif
  else if (strcmp(c, "churn") == 0) case_churn();
  else if (strcmp(c, "batches") == 0) case_batches();
  else if (strcmp(c, "idle_owner") == 0) case_idle_owner();
#ifdef JW_TEST_HOOKS
  else if (strcmp(c, "huge_fork") == 0) case_huge_fork();
#endif
  else {
    fprintf(stderr, "test_breakit3: unknown case %s\n", c);
    return 2;
  }
  int f = test_failures();
  if (f) fprintf(stderr, "test_breakit3 %s: %d failures\n", c, f);
  return f ? 1 : 0;
}
