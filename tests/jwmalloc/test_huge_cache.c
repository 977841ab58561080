/* Kept direct mappings (api/huge_cache.c; docs/design/api.md): a freed
 * direct mapping is kept for reuse by a later large malloc, within
 * JWMALLOC_HUGE_CACHE_MB, and aged out by the reclaimer. Each case asserts
 * what a user relies on: no mapping handed out twice, data intact, bad frees
 * reported and harmless, nothing kept or leaked past what the design allows,
 * statistics that add up.
 *
 * Usage: test_huge_cache CASE [SCALE]
 *   off        kept mappings do not outlive turning the cache or reclamation
 *              off at run time
 *   calls      calloc, memalign, realloc, double free, the bound of 8 and the
 *              statistics with kept mappings
 *   race       direct mappings freed, reused, realloc'ed, trimmed and aged by
 *              several threads at once: data intact, nothing leaked
 *   remap_hole (the plain build) a direct block mapped in the range a moving
 *              realloc (mremap) just left is registered with its own size
 *              (deterministic: this program's mmap and mremap place them)
 *   fork       (the test-hook build) fork while a thread holds the
 *              kept-mappings lock: the child and the parent use the cache
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
#include <unistd.h>

#include "jwmalloc.h"
#include "raw_mmap.h"
#include "thread_test.h"
#ifdef JW_TEST_HOOKS
#include "common/lock.h"
#include "lock_freezer.h"
#endif

#define MiB ((size_t)1 << 20)

static void huge_setup(void) {
  /* A long interval: the aging pass does not interfere with exact checks. */
  CHECK(jw_option_set("RECLAIM", 1) == 0, "RECLAIM=1");
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 600000) == 0, "interval");
  CHECK(jw_option_set("HUGE_CACHE_MB", 32) == 0, "HUGE_CACHE_MB");
  jw_malloc_trim(0);
}

static int case_off(void) {
  huge_setup();
  /* Reclamation turned off at run time: nothing will age the cache, so the
   * kept mappings must go (api.md: with reclamation off a freed mapping is
   * unmapped at once). */
  void *p = jw_malloc(8 * MiB);
  memset(p, 1, 8 * MiB);
  jw_free(p);
  CHECK(st().huge_kept_bytes == 8 * MiB, "off: an 8 MiB mapping was not kept");
  CHECK(jw_option_set("RECLAIM", 0) == 0, "RECLAIM=0");
  void *q = jw_malloc(20 * MiB); /* no kept mapping fits */
  jw_free(q);
  jw_stats s = st();
  CHECK(s.huge_kept_bytes == 0, "off: %llu bytes kept after reclamation was turned off and a direct "
        "mapping was freed (nothing ages them)", (unsigned long long)s.huge_kept_bytes);
  jw_malloc_trim(0);
  /* The same for HUGE_CACHE_MB=0 at run time. */
  jw_option_set("RECLAIM", 1);
  p = jw_malloc(8 * MiB);
  jw_free(p);
  CHECK(st().huge_kept_bytes == 8 * MiB, "off: an 8 MiB mapping was not kept (2)");
  jw_option_set("HUGE_CACHE_MB", 0);
  q = jw_malloc(20 * MiB);
  jw_free(q);
  s = st();
  CHECK(s.huge_kept_bytes == 0, "off: %llu bytes kept after HUGE_CACHE_MB=0 and a direct mapping freed",
        (unsigned long long)s.huge_kept_bytes);
  jw_option_set("HUGE_CACHE_MB", 32);
  jw_malloc_trim(0);
  printf("off: kept mappings dropped once the cache or reclamation is off\n");
  return 0;
}

static int all_zero(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

static int case_calls(void) {
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
  CHECK(q == p && b.huge_reuses == a.huge_reuses + 1, "calls: calloc did not reuse the kept mapping");
  CHECK(all_zero(q, 7 * MiB + 100), "calls: calloc of a reused mapping is not zeroed");
  jw_free(q);

  /* memalign with an alignment the kept mapping lacks: a fresh aligned one. */
  p = jw_memalign(64 * MiB, 5 * MiB);
  CHECK(p && ((uintptr_t)p & (64 * MiB - 1)) == 0, "calls: memalign(64 MiB) misaligned: %p", (void *)p);
  memset(p, 2, 5 * MiB);
  jw_free(p);
  void *al = jw_memalign(4096, 5 * MiB); /* reuses */
  CHECK(al != NULL && jw_malloc_usable_size(al) >= 5 * MiB, "calls: memalign(4096, 5 MiB)");
  jw_free(al);
  /* No kept mapping is aligned so: fresh, or ENOMEM. */
  p = jw_memalign((size_t)1 << (sizeof(size_t) * 8 - 24), 5 * MiB);
  if (p) {
    CHECK(((uintptr_t)p & (((size_t)1 << (sizeof(size_t) * 8 - 24)) - 1)) == 0,
          "calls: memalign(1 TiB; 256 B on 32-bit) misaligned");
    jw_free(p);
  }
  jw_malloc_trim(0);

  /* realloc of a reused, trimmed mapping keeps the data. */
  p = jw_malloc(8 * MiB);
  jw_free(p);
  q = jw_malloc(5 * MiB + 1);
  CHECK(q == p, "calls: the 8 MiB mapping was not reused for 5 MiB");
  CHECK(jw_malloc_usable_size(q) == 5 * MiB + 4096, "calls: tail not trimmed (%zu)", jw_malloc_usable_size(q));
  for (size_t i = 0; i < 5 * MiB + 1; i += 4096) q[i] = (unsigned char)(i >> 12);
  /* the trimmed tail was unmapped: a free there is reported, not accepted */
  long inv = (long)st().invalid_frees;
  jw_free(p + 6 * MiB);
  CHECK((long)st().invalid_frees == inv + 1, "calls: free inside the trimmed tail not reported");
  unsigned char *r = jw_realloc(q, 12 * MiB);
  CHECK(r != NULL, "calls: realloc up");
  for (size_t i = 0; r && i < 5 * MiB + 1; i += 4096)
    if (r[i] != (unsigned char)(i >> 12)) {
      FAIL("calls: realloc up lost data at %zu", i);
      break;
    }
  r = jw_realloc(r, 100 << 10);
  for (size_t i = 0; r && i < (100 << 10); i += 4096)
    if (r[i] != (unsigned char)(i >> 12)) {
      FAIL("calls: realloc down lost data at %zu", i);
      break;
    }
  jw_free(r);

  /* A second free of a kept mapping is reported and changes nothing. */
  p = jw_malloc(6 * MiB);
  jw_free(p);
  a = st();
  jw_free(p);
  b = st();
  CHECK(b.invalid_frees == a.invalid_frees + 1, "calls: double free of a kept mapping not reported");
  CHECK(b.huge_kept_bytes == a.huge_kept_bytes, "calls: a double free changed the kept bytes");
  q = jw_malloc(6 * MiB);
  void *q2 = jw_malloc(6 * MiB);
  CHECK(q == p && q2 != p, "calls: the kept mapping was handed out twice (%p %p %p)", (void *)p, (void *)q,
        (void *)q2);
  jw_free(q);
  jw_free(q2);
  /* realloc of a kept (freed) mapping: reported, EINVAL */
  a = st();
  errno = 0;
  r = jw_realloc(q, 7 * MiB);
  CHECK(r == NULL && errno == EINVAL && st().invalid_frees == a.invalid_frees + 1,
        "calls: realloc of a kept mapping accepted");

  /* The bound: at most 8 mappings. */
  jw_option_set("HUGE_CACHE_MB", 1000);
  void *v[10];
  for (int i = 0; i < 10; i++) v[i] = jw_malloc(5 * MiB);
  for (int i = 0; i < 10; i++) jw_free(v[i]);
  b = st();
  CHECK(b.huge_kept_bytes <= 8 * 5 * MiB, "calls: %llu bytes kept, over 8 mappings",
        (unsigned long long)b.huge_kept_bytes);
  jw_option_set("HUGE_CACHE_MB", 32);

  /* Statistics: everything freed and trimmed, the direct bytes and the
   * mapped bytes are back where they were. */
  jw_malloc_trim(0);
  b = st();
  CHECK(b.huge_kept_bytes == 0, "calls: kept after trim");
  CHECK(b.huge_bytes == base.huge_bytes, "calls: huge_bytes %llu, was %llu", (unsigned long long)b.huge_bytes,
        (unsigned long long)base.huge_bytes);
  CHECK(b.huge_mallocs - base.huge_mallocs == b.huge_frees - base.huge_frees, "calls: huge mallocs %llu frees %llu",
        (unsigned long long)(b.huge_mallocs - base.huge_mallocs), (unsigned long long)(b.huge_frees - base.huge_frees));
  CHECK(b.mapped_bytes <= base.mapped_bytes + 4 * MiB, "calls: mapped bytes %llu, was %llu",
        (unsigned long long)b.mapped_bytes, (unsigned long long)base.mapped_bytes);
  jw_option_set("ABORT_ON_ERROR", 1);
  printf("calls: calloc, memalign, realloc, double free and statistics with kept mappings\n");
  return 0;
}

/* ---- race: direct mappings freed, reused, trimmed and aged at once ---- */

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
      FAIL("race: allocation of %zu failed", size);
      continue;
    }
    if (kind == 1 && ((uintptr_t)p & ((2 << 20) - 1))) FAIL("race: memalign(2 MiB) gave %p", (void *)p);
    if (jw_malloc_usable_size(p) < size) FAIL("race: usable %zu < %zu", jw_malloc_usable_size(p), size);
    unsigned char v = (unsigned char)(s | 1);
    for (size_t off = 0; off < size; off += 8 * 4096) {
      if (kind == 0 && p[off] != 0) {
        FAIL("race: calloc'd block not zero at %zu", off);
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
        FAIL("race: realloc failed");
      } else {
        p = q;
        size = nsize < size ? nsize : size;
      }
    }
    for (size_t off = 0; off < size; off += 8 * 4096)
      if (p[off] != v) {
        FAIL("race: block %p changed at %zu (handed out twice?)", (void *)p, off);
        break;
      }
    jw_free(p);
  }
  return NULL;
}

static int case_race(void) {
  huge_setup();
  jw_free(jw_malloc(16));
  jw_free(jw_malloc(5 * MiB));
  jw_malloc_trim(0);
  jw_stats a = st();
  CHECK(jw_option_set("RECLAIM_INTERVAL_MS", 1) == 0, "interval 1 ms"); /* the aging pass runs all along */
  enum { W = 4 };
  pthread_t w[W], tr;
  pthread_create(&tr, NULL, trim_until, &race_stop);
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
    test_sleep_ms(10);
  }
  jw_option_set("RECLAIM_INTERVAL_MS", 1000);
  printf("race: %llu direct mappings, %llu served from kept ones, against malloc_trim and 1 ms aging\n",
         (unsigned long long)(b.huge_mallocs - a.huge_mallocs), (unsigned long long)(b.huge_reuses - a.huge_reuses));
  CHECK(b.huge_kept_bytes == 0, "race: %llu bytes kept after malloc_trim", (unsigned long long)b.huge_kept_bytes);
  CHECK(b.huge_bytes == a.huge_bytes, "race: direct bytes %llu, were %llu", (unsigned long long)b.huge_bytes,
        (unsigned long long)a.huge_bytes);
  CHECK(b.huge_mallocs - a.huge_mallocs == b.huge_frees - a.huge_frees, "race: mallocs and frees differ");
  CHECK(b.mapped_bytes - b.backend_free_root_bytes <= a.mapped_bytes + 4 * MiB,
        "race: %llu bytes mapped (%llu of them free roots kept), were %llu: mappings leaked",
        (unsigned long long)b.mapped_bytes, (unsigned long long)b.backend_free_root_bytes,
        (unsigned long long)a.mapped_bytes);
  CHECK(b.huge_reuses > a.huge_reuses, "race: no mapping was reused: the case did not test the cache");
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

/* ---- fork while a thread holds the kept-mappings lock ---- */

#ifdef JW_TEST_HOOKS
static void *holder(void *arg) {
  (void)arg;
  may_freeze = 1;
  jw_free(jw_malloc(6 * MiB)); /* frozen in the put, holding the lock */
  return NULL;
}

static void *releaser(void *arg) {
  (void)arg;
  test_sleep_ms(100); /* fork prepare is waiting by now */
  atomic_store(&release_holder, 1);
  return NULL;
}

static int case_fork(void) {
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
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "fork: child failed (status %#x)", status);
  pthread_join(h, NULL);
  pthread_join(r, NULL);
  jw_test_set_lock_hook(NULL);
  /* The parent goes on using the cache. */
  void *p = jw_malloc(6 * MiB);
  jw_free(p);
  jw_malloc_trim(0);
  alarm(0);
  CHECK(st().huge_kept_bytes == 0, "fork: kept after trim in the parent");
  printf("fork: fork waited for the kept-mappings lock holder; child and parent use the cache\n");
  return 0;
}
#endif

int main(int argc, char **argv) {
  static const test_case cases[] = {
      {"off", case_off},
      {"calls", case_calls},
      {"race", case_race},
#if REMAP_HOOKS
      {"remap_hole", case_remap_hole},
#endif
#ifdef JW_TEST_HOOKS
      {"fork", case_fork},
#endif
  };
  return TEST_MAIN(cases);
}
