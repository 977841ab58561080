/* Drop-in replacement: the standard names of the malloc family, glibc's
 * extras (mallinfo, mallinfo2, malloc_stats) and every C++ operator new and
 * delete, all on jwmalloc. Brief: "Tiers"; docs/design/api.md.
 *
 * The C++ operators are defined here in C under their Itanium-ABI names
 * (LP64: size_t is 'm'), so C programs do not load libstdc++. Allocation
 * failure follows the C++ rules: call the new-handler while there is one,
 * else throw std::bad_alloc (nothrow forms return NULL). Both come from
 * libstdc++ through weak references, present whenever C++ code runs.
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <string.h>

#include "../../include/jwmalloc.h"
#include "../backend/page_source.h"
#include "../common/log.h"
#include "fastpath.h"

#define JW_NAME(x) x
#include "entry.inc"

JW_EXPORT void malloc_stats(void) { jw_stats_print(2); }

static void fill_mallinfo(jw_stats *s, jw_pages_stats *ps) {
  jw_stats_get(s, sizeof *s);
  jw_pages_get_stats(ps);
}

/* Fields: arena = bytes in page-source roots, hblks/hblkhd = direct
 * mappings, uordblks = bytes in live ranges and mappings (slabs counted
 * whole), fordblks = the rest of the roots, keepcost = cached free ranges. */
JW_EXPORT struct mallinfo2 mallinfo2(void) {
  jw_stats s;
  jw_pages_stats ps;
  fill_mallinfo(&s, &ps);
  struct mallinfo2 m;
  memset(&m, 0, sizeof m);
  m.arena = ps.mapped_bytes;
  m.hblks = s.huge_mallocs - s.huge_frees;
  m.hblkhd = s.huge_bytes;
  m.uordblks = ps.live_bytes + s.huge_bytes;
  m.fordblks = ps.mapped_bytes - ps.live_bytes;
  m.keepcost = ps.cached_bytes;
  m.usmblks = s.peak_mapped_bytes;
  return m;
}

static int clamp(size_t v) { return v > INT32_MAX ? INT32_MAX : (int)v; }

JW_EXPORT struct mallinfo mallinfo(void) {
  struct mallinfo2 m2 = mallinfo2();
  struct mallinfo m;
  memset(&m, 0, sizeof m);
  m.arena = clamp(m2.arena);
  m.hblks = clamp(m2.hblks);
  m.hblkhd = clamp(m2.hblkhd);
  m.uordblks = clamp(m2.uordblks);
  m.fordblks = clamp(m2.fordblks);
  m.keepcost = clamp(m2.keepcost);
  m.usmblks = clamp(m2.usmblks);
  return m;
}

/* ---- C++ operators ---- */

typedef void (*jw_new_handler)(void);
extern jw_new_handler _ZSt15get_new_handlerv(void) __attribute__((weak));
extern void _ZSt17__throw_bad_allocv(void) __attribute__((weak, noreturn));

/* new failed: new-handler loop, then bad_alloc (or NULL for nothrow). */
JW_NOINLINE static void *new_retry(size_t n, size_t align, int nothrow) {
  for (;;) {
    void *p = align <= JW_MIN_ALIGN ? jw_malloc_slow(n) : jw_memalign_impl(align, n);
    if (p) return p;
    jw_new_handler h = _ZSt15get_new_handlerv ? _ZSt15get_new_handlerv() : NULL;
    if (h == NULL) {
      if (nothrow) return NULL;
      if (_ZSt17__throw_bad_allocv) _ZSt17__throw_bad_allocv();
      jw_fatal("operator new(%zu): out of memory and no std::bad_alloc to throw", n);
    }
    h();
  }
}

static inline void *cxx_new(size_t n, int nothrow) {
  void *p = jw_fast_malloc(n);
  return JW_LIKELY(p != NULL) ? p : new_retry(n, 0, nothrow);
}

static inline void cxx_delete(void *p) {
  if (JW_LIKELY(jw_fast_free(p))) return;
  jw_free_slow(p);
}

#define NOTHROW const void *nt __attribute__((unused))
JW_EXPORT void *_Znwm(size_t n) { return cxx_new(n, 0); }
JW_EXPORT void *_Znam(size_t n) { return cxx_new(n, 0); }
JW_EXPORT void *_ZnwmRKSt9nothrow_t(size_t n, NOTHROW) { return cxx_new(n, 1); }
JW_EXPORT void *_ZnamRKSt9nothrow_t(size_t n, NOTHROW) { return cxx_new(n, 1); }
JW_EXPORT void *_ZnwmSt11align_val_t(size_t n, size_t al) { return new_retry(n, al, 0); }
JW_EXPORT void *_ZnamSt11align_val_t(size_t n, size_t al) { return new_retry(n, al, 0); }
JW_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, NOTHROW) { return new_retry(n, al, 1); }
JW_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t n, size_t al, NOTHROW) { return new_retry(n, al, 1); }
/* Every delete form frees; the size and alignment arguments are not needed
 * (the pointer says where the block lives). */
#define JW_DELETE(name, ...)                \
  JW_EXPORT void name(void *p, ##__VA_ARGS__) { cxx_delete(p); }
#define UNUSED_SZ size_t n __attribute__((unused))
#define UNUSED_AL size_t al __attribute__((unused))
JW_DELETE(_ZdlPv)
JW_DELETE(_ZdaPv)
JW_DELETE(_ZdlPvm, UNUSED_SZ)
JW_DELETE(_ZdaPvm, UNUSED_SZ)
JW_DELETE(_ZdlPvRKSt9nothrow_t, NOTHROW)
JW_DELETE(_ZdaPvRKSt9nothrow_t, NOTHROW)
JW_DELETE(_ZdlPvSt11align_val_t, UNUSED_AL)
JW_DELETE(_ZdaPvSt11align_val_t, UNUSED_AL)
JW_DELETE(_ZdlPvmSt11align_val_t, UNUSED_SZ, UNUSED_AL)
JW_DELETE(_ZdaPvmSt11align_val_t, UNUSED_SZ, UNUSED_AL)
JW_DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, UNUSED_AL, NOTHROW)
JW_DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, UNUSED_AL, NOTHROW)
