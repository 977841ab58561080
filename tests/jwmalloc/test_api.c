/* API conformance: every allocation function, every size from 0 to 64 MiB
 * across every class and tier boundary, every power-of-two alignment from 1
 * to 1 MiB, errno cases, usable size >= the size asked, realloc keeping
 * content as it moves between tiers.
 *
 * Built three ways from this one file: with JW_DROPIN the standard names
 * (malloc, ...) linked to libjwmalloc.so, checking through jwmalloc's
 * statistics that it served them; otherwise the jw_ API linked to
 * libjwmalloc_api.a and its ASan and TSan variants. */
#include <errno.h>
#include <malloc.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jwmalloc.h"

/* The errno cases below are deliberate: sizes beyond any object, a block
 * used after a *failed* reallocarray, the deprecated mallinfo. */
#pragma GCC diagnostic ignored "-Walloc-size-larger-than="
#pragma GCC diagnostic ignored "-Wuse-after-free"
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

#ifdef JW_DROPIN
#define M(x) x
#else
#define M(x) jw_##x
#endif

#include "check.h"

/* The page in force: the kernel's, or JWMALLOC_PAGE_SIZE's (label page16k). */
static size_t page_size(void) {
  long v = 4096;
  return jw_option_get("PAGE_SIZE", &v) == 0 ? (size_t)v : 4096;
}

static unsigned char pat(size_t n, size_t i) { return (unsigned char)(n * 31 + i * 7 + 1); }

/* Fills the block (sparsely for big ones: every 4 KiB plus both ends). */
static void fill(unsigned char *p, size_t n, size_t tag) {
  if (n <= 65536) {
    for (size_t i = 0; i < n; i++) p[i] = pat(tag, i);
    return;
  }
  for (size_t i = 0; i < n; i += 4096) p[i] = pat(tag, i);
  for (size_t i = n - 64; i < n; i++) p[i] = pat(tag, i);
}

static int verify(const unsigned char *p, size_t n, size_t tag) {
  if (n <= 65536) {
    for (size_t i = 0; i < n; i++)
      if (p[i] != pat(tag, i)) return 0;
    return 1;
  }
  for (size_t i = 0; i < n; i += 4096)
    if (p[i] != pat(tag, i)) return 0;
  for (size_t i = n - 64; i < n; i++)
    if (p[i] != pat(tag, i)) return 0;
  return 1;
}

static void one_size(size_t n) {
  unsigned char *p = M(malloc)(n);
  CHECK(p != NULL, "malloc(%zu) failed", n);
  if (!p) return;
  CHECK(((uintptr_t)p & 15) == 0, "malloc(%zu) = %p not 16-aligned", n, (void *)p);
  CHECK(M(malloc_usable_size)(p) >= n, "usable %zu < %zu", M(malloc_usable_size)(p), n);
  fill(p, n, n);
  CHECK(verify(p, n, n), "content of malloc(%zu)", n);
  M(free)(p);
}

/* "quick" (the TSan build, where every byte written is instrumented): every
 * size up to 4100 instead of 20000; the boundaries and alignments stay. */
static size_t exhaustive_max = 20000;

static void sizes(void) {
  for (size_t n = 0; n <= exhaustive_max; n++) one_size(n);
  static const size_t bounds[] = {2016, 2017, 2047, 2048, 2049, 16384, 16385, 65536, 1 << 20, (4 << 20) - 4096,
                                  4 << 20, (4 << 20) + 1, (4 << 20) + 4096, 8 << 20, 64 << 20};
  for (size_t i = 0; i < sizeof bounds / sizeof bounds[0]; i++)
    for (size_t d = 0; d < 3; d++) one_size(bounds[i] - 1 + d);
  for (size_t s = 32768; s <= ((size_t)64 << 20); s *= 2)
    for (size_t d = 0; d < 3; d++) one_size(s - 1 + d);
  for (size_t s = 20000; s <= ((size_t)4 << 20); s = s * 9 / 8) one_size(s); /* many range sizes */
  /* Many live at once: no two blocks overlap. */
  enum { LIVE = 3000 };
  static unsigned char *live[LIVE];
  static size_t len[LIVE];
  uint64_t x = 88172645463325252ULL;
  for (int i = 0; i < LIVE; i++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    len[i] = (i % 50 == 0) ? x % (300 << 10) : (i % 7 == 0) ? x % 20000 : x % 2100;
    live[i] = M(malloc)(len[i]);
    CHECK(live[i] != NULL, "malloc");
    fill(live[i], len[i], (size_t)i);
  }
  for (int i = 0; i < LIVE; i++) CHECK(verify(live[i], len[i], (size_t)i), "live block %d (%zu B) overwritten", i, len[i]);
  for (int i = 0; i < LIVE; i += 2) M(free)(live[i]);
  for (int i = 1; i < LIVE; i += 2) CHECK(verify(live[i], len[i], (size_t)i), "block %d after frees", i);
  for (int i = 1; i < LIVE; i += 2) M(free)(live[i]);
}

static void aligned_one(size_t a, size_t n) {
  void *p = NULL;
  if (a >= sizeof(void *)) {
    int r = M(posix_memalign)(&p, a, n);
    CHECK(r == 0 && p, "posix_memalign(%zu, %zu) = %d", a, n, r);
    if (p) {
      CHECK(((uintptr_t)p & (a - 1)) == 0, "posix_memalign(%zu, %zu) = %p misaligned", a, n, p);
      CHECK(M(malloc_usable_size)(p) >= n, "usable");
      fill(p, n, n + a);
      CHECK(verify(p, n, n + a), "content");
      M(free)(p);
    }
  }
  p = M(aligned_alloc)(a, n);
  CHECK(p && ((uintptr_t)p & (a - 1)) == 0, "aligned_alloc(%zu, %zu) = %p", a, n, p);
  if (p) {
    CHECK(M(malloc_usable_size)(p) >= n, "usable");
    fill(p, n, n);
    M(free)(p);
  }
  p = M(memalign)(a, n);
  CHECK(p && ((uintptr_t)p & (a - 1)) == 0, "memalign(%zu, %zu) = %p", a, n, p);
  if (p) {
    fill(p, n, n);
    M(free)(p);
  }
}

static void alignments(void) {
  for (size_t a = 1; a <= ((size_t)1 << 20); a *= 2) {
    const size_t ns[] = {0, 1, 15, 16, 17, 100, a - 1, a, a + 1, 2016, 2017, 5000, 16384, 16385, 100000,
                         (4 << 20) - a, 4 << 20, (4 << 20) + 1, 9 << 20};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) aligned_one(a, ns[i]);
  }
  aligned_one((size_t)4 << 20, 100); /* a whole root */
  aligned_one((size_t)8 << 20, 100); /* beyond a root: a direct mapping */
  size_t pg = page_size();
  void *p = M(valloc)(100);
  CHECK(p && ((uintptr_t)p & (pg - 1)) == 0, "valloc");
  M(free)(p);
  p = M(pvalloc)(pg + 1);
  CHECK(p && ((uintptr_t)p & (pg - 1)) == 0 && M(malloc_usable_size)(p) >= 2 * pg, "pvalloc rounds up to pages");
  M(free)(p);
  p = M(pvalloc)(0);
  CHECK(p && M(malloc_usable_size)(p) >= pg, "pvalloc(0) is one page");
  M(free)(p);
}

static void errnos(void) {
  errno = 0;
  CHECK(M(calloc)(SIZE_MAX / 2 + 1, 2) == NULL && errno == ENOMEM, "calloc overflow");
  errno = 0;
  CHECK(M(malloc)(SIZE_MAX) == NULL && errno == ENOMEM, "malloc(SIZE_MAX)");
  errno = 0;
  CHECK(M(malloc)((size_t)PTRDIFF_MAX + 1) == NULL && errno == ENOMEM, "malloc(PTRDIFF_MAX+1)");
  errno = 0;
#if UINTPTR_MAX > 0xffffffffu
  CHECK(M(malloc)((size_t)1 << 47) == NULL && errno == ENOMEM, "malloc(128 TiB: beyond the address space)");
#else
  CHECK(M(malloc)((size_t)3 << 30) == NULL && errno == ENOMEM, "malloc(3 GiB: beyond a 32-bit address space)");
#endif
  char *p = M(malloc)(10);
  strcpy(p, "keep");
  errno = 0;
  CHECK(M(reallocarray)(p, SIZE_MAX / 4, 8) == NULL && errno == ENOMEM, "reallocarray overflow");
  CHECK(strcmp(p, "keep") == 0, "reallocarray overflow must leave the block");
  errno = 0;
  CHECK(M(realloc)(p, SIZE_MAX - 100) == NULL && errno == ENOMEM, "realloc huge");
  CHECK(strcmp(p, "keep") == 0, "failed realloc must leave the block");
  p = M(reallocarray)(p, 10, 10);
  CHECK(p && strcmp(p, "keep") == 0, "reallocarray");
  M(free)(p);
  void *q = (void *)1;
  errno = 1234;
  CHECK(M(posix_memalign)(&q, 0, 10) == EINVAL, "posix_memalign(0)");
  CHECK(M(posix_memalign)(&q, 3, 10) == EINVAL, "posix_memalign(3)");
  CHECK(M(posix_memalign)(&q, sizeof(void *) / 2, 10) == EINVAL, "posix_memalign(sizeof(void *) / 2)");
  CHECK(M(posix_memalign)(&q, 24, 10) == EINVAL, "posix_memalign(24)");
  CHECK(M(posix_memalign)(&q, 64, SIZE_MAX / 2) == ENOMEM, "posix_memalign huge");
  CHECK(errno == 1234 && q == (void *)1, "posix_memalign must not touch errno or *out on failure");
  errno = 0;
  CHECK(M(aligned_alloc)(3, 10) == NULL && errno == EINVAL, "aligned_alloc(3)");
  /* memalign, as glibc's: any alignment, rounded up to a power of two */
  q = M(memalign)(48, 10);
  CHECK(q && ((uintptr_t)q & 63) == 0, "memalign(48) = %p, want 64-aligned", q);
  M(free)(q);
  q = M(memalign)(5000, 100);
  CHECK(q && ((uintptr_t)q & 8191) == 0, "memalign(5000) = %p, want 8192-aligned", q);
  M(free)(q);
  errno = 0;
  CHECK(M(memalign)(SIZE_MAX / 2 + 2, 10) == NULL && errno == EINVAL, "memalign(> 2^63)");
  q = M(aligned_alloc)(0, 10);
  CHECK(q != NULL, "aligned_alloc(0) behaves as alignment 1");
  M(free)(q);
  /* calloc zeroes memory that was dirty before, in every tier */
  static const size_t cs[] = {8, 100, 2000, 3000, 16000, 40000, 1 << 20, 5 << 20};
  for (size_t i = 0; i < sizeof cs / sizeof cs[0]; i++) {
    for (int round = 0; round < 3; round++) {
      unsigned char *d = M(malloc)(cs[i]);
      memset(d, 0xa5, cs[i]);
      M(free)(d);
      unsigned char *z = M(calloc)(1, cs[i]);
      size_t bad = 0;
      for (size_t j = 0; j < cs[i]; j++) bad += z[j] != 0;
      CHECK(bad == 0, "calloc(%zu) not zeroed", cs[i]);
      memset(z, 0x5a, cs[i]);
      M(free)(z);
    }
  }
  M(free)(NULL);
  CHECK(M(malloc_usable_size)(NULL) == 0, "usable(NULL)");
}

static void reallocs(void) {
  static const size_t steps[] = {1, 100, 2016, 2017, 3000, 16384, 16385, 100000, 4 << 20, (4 << 20) + 1,
                                 10 << 20, 20 << 20, 5 << 20, 3 << 20, 20000, 10000, 500, 16, 1, 0};
  unsigned char *p = M(realloc)(NULL, 0);
  CHECK(p != NULL, "realloc(NULL, 0) = malloc(0)");
  size_t have = 0;
  for (size_t i = 0; i < sizeof steps / sizeof steps[0]; i++) {
    size_t n = steps[i];
    unsigned char *q = M(realloc)(p, n);
    if (n == 0) {
      CHECK(q == NULL, "realloc(p, 0) frees and returns NULL");
      break;
    }
    CHECK(q != NULL, "realloc to %zu", n);
    size_t keep = have < n ? have : n;
    for (size_t j = 0; j < keep; j++)
      if (q[j] != pat(7, j)) {
        CHECK(0, "realloc %zu -> %zu lost byte %zu", have, n, j);
        break;
      }
    for (size_t j = 0; j < n; j++) q[j] = pat(7, j);
    p = q;
    have = n;
  }
}

static void extras(void) {
  jw_stats before, after;
  M(malloc_trim)(0); /* the 100000-byte block below from the backend, not from this thread's block cache */
  CHECK(jw_stats_get(&before, sizeof before) == 0, "stats");
  void *a = M(malloc)(40), *b = M(malloc)(5000), *c = M(malloc)(100000), *d = M(malloc)(6 << 20);
  CHECK(jw_stats_get(&after, sizeof after) == 0, "stats");
  CHECK(after.mid_mallocs > before.mid_mallocs, "midend counted");
  CHECK(after.large_mallocs == before.large_mallocs + 1, "range counted");
  CHECK(after.huge_mallocs == before.huge_mallocs + 1, "direct mapping counted");
  CHECK(after.huge_bytes >= before.huge_bytes + (6 << 20), "direct bytes");
  CHECK(after.mapped_bytes > 0 && after.peak_mapped_bytes >= after.mapped_bytes, "mapped");
  CHECK(after.resident_bytes > 0 && after.peak_resident_bytes >= after.resident_bytes / 2, "resident");
  /* The backend's own figures: the 100000-byte block is a range of a root. */
  CHECK(after.backend_root_bytes >= (4u << 20) && after.backend_root_bytes % (4u << 20) == 0, "backend roots");
  CHECK(after.backend_metadata_bytes >= after.backend_root_bytes / 4096 * 12, "12 bytes of records per granule");
  CHECK(after.backend_peak_metadata_bytes >= after.backend_metadata_bytes, "metadata peak");
  CHECK(after.backend_allocs > before.backend_allocs && after.backend_allocs >= after.backend_frees, "range counts");
  CHECK(after.backend_free_root_bytes <= after.backend_root_bytes, "kept roots");
  /* A caller built against the first, shorter jw_stats still gets its fields. */
  jw_stats old;
  memset(&old, 0xab, sizeof old);
  size_t v1 = offsetof(jw_stats, madvise_calls) + sizeof(uint64_t);
  CHECK(jw_stats_get(&old, v1) == 0 && old.large_mallocs == after.large_mallocs, "stats of the first layout");
  CHECK(old.backend_root_bytes == 0xababababababababull, "nothing written past the caller's size");
  CHECK(jw_stats_get(&old, v1 - 1) == -1 && errno == EINVAL, "stats shorter than the first layout");
#ifdef JW_DROPIN
  struct mallinfo2 mi = mallinfo2();
  CHECK(mi.arena > 0 && mi.hblks >= 1 && mi.hblkhd >= (6 << 20) && mi.uordblks > 0, "mallinfo2");
  struct mallinfo m1 = mallinfo();
  CHECK(m1.arena > 0, "mallinfo");
  malloc_stats();
#endif
  M(free)(a), M(free)(b), M(free)(c), M(free)(d);
  jw_stats_get(&after, sizeof after);
  CHECK(after.huge_frees == before.huge_frees + 1 && after.large_frees == before.large_frees + 1, "frees counted");
  int r = M(malloc_trim)(0);
  CHECK(r == 0 || r == 1, "malloc_trim returns 0 or 1");
  long v = -1;
  CHECK(jw_option_get("POOL_PERCENT", &v) == 0 && v >= 0, "option get");
  errno = 0;
  CHECK(jw_option_get("NO_SUCH", &v) == -1 && errno == EINVAL, "unknown option");
  CHECK(jw_option_set("POOL_MIN", -1) == -1 && errno == EINVAL, "bad option value");
  CHECK(jw_stats_get(NULL, sizeof after) == -1 && errno == EINVAL, "stats NULL");
  CHECK(jw_stats_get(&after, 8) == -1 && errno == EINVAL, "stats short");
}

/* Freed direct mappings are kept for reuse within the bound and dropped by
 * malloc_trim (docs/design/api.md, "Kept direct mappings"). */
static void kept_mappings(void) {
  M(malloc_trim)(0);
  jw_stats a, b;
  unsigned char *p = M(malloc)(8 << 20);
  CHECK(p != NULL, "8 MiB");
  fill(p, 8 << 20, 3);
  M(free)(p);
  jw_stats_get(&a, sizeof a);
  CHECK(a.huge_kept_bytes == (8 << 20), "a freed 8 MiB mapping is kept (%llu)", (unsigned long long)a.huge_kept_bytes);
  unsigned char *q = M(malloc)((5 << 20) + 1);
  jw_stats_get(&b, sizeof b);
  CHECK(q == p && b.huge_reuses == a.huge_reuses + 1, "a 5 MiB request reuses the kept mapping");
  CHECK(b.huge_kept_bytes == 0, "the reused mapping left the cache");
  CHECK(M(malloc_usable_size)(q) == (5 << 20) + page_size(), "the tail past an eighth went back (%zu)", M(malloc_usable_size)(q));
  fill(q, (5 << 20) + 1, 4);
  CHECK(verify(q, (5 << 20) + 1, 4), "reused mapping holds data");
  M(free)(q);
  CHECK(M(malloc_trim)(0) == 1, "malloc_trim gives the kept mapping back");
  jw_stats_get(&a, sizeof a);
  CHECK(a.huge_kept_bytes == 0, "nothing kept after malloc_trim");
  long old = 0;
  CHECK(jw_option_get("HUGE_CACHE_MB", &old) == 0 && old == 32, "HUGE_CACHE_MB default 32 (%ld)", old);
  CHECK(jw_option_set("HUGE_CACHE_MB", 0) == 0, "HUGE_CACHE_MB settable");
  M(free)(M(malloc)(6 << 20));
  jw_stats_get(&a, sizeof a);
  CHECK(a.huge_kept_bytes == 0, "HUGE_CACHE_MB=0 keeps nothing");
  jw_option_set("HUGE_CACHE_MB", 16);
  void *big[3];
  for (int i = 0; i < 3; i++) big[i] = M(malloc)(6 << 20);
  for (int i = 0; i < 3; i++) M(free)(big[i]);
  jw_stats_get(&a, sizeof a);
  CHECK(a.huge_kept_bytes == (12 << 20), "the bound keeps the two newest 6 MiB mappings (%llu)",
        (unsigned long long)a.huge_kept_bytes);
  M(free)(M(malloc)(20 << 20));
  jw_stats_get(&b, sizeof b);
  CHECK(b.huge_kept_bytes == (12 << 20), "a mapping above the bound is not kept");
  jw_option_set("HUGE_CACHE_MB", old);
  M(malloc_trim)(0);
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "quick") == 0) exhaustive_max = 4100;
  jw_stats s0, s1;
  jw_stats_get(&s0, sizeof s0);
  sizes();
  alignments();
  errnos();
  reallocs();
  extras();
  kept_mappings();
  jw_stats_get(&s1, sizeof s1);
  CHECK(s1.small_mallocs - s0.small_mallocs >= 4000, "the frontend served the small calls (%llu)",
        (unsigned long long)(s1.small_mallocs - s0.small_mallocs));
  CHECK(s1.invalid_frees == 0, "no bad free reported");
  if (test_failures()) return 1;
  printf("api: ok (%llu frontend, %llu midend, %llu range, %llu direct mallocs)\n",
         (unsigned long long)(s1.small_mallocs - s0.small_mallocs), (unsigned long long)(s1.mid_mallocs - s0.mid_mallocs),
         (unsigned long long)(s1.large_mallocs - s0.large_mallocs), (unsigned long long)(s1.huge_mallocs - s0.huge_mallocs));
  return 0;
}
