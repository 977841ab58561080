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
#include <stdio.h>
#include <stdint.h>
#include <string.h>

#include "../../include/jwmalloc.h"
#include "../pages/page_source.h"
#include "../common/log.h"
#include "android.h"
#include "fastpath.h"

#define JW_NAME(x) x
#include "entry.inc"

JW_EXPORT void malloc_stats(void) { jw_stats_print(2); }

/* glibc's other public names for the same calls. A program or library that
 * calls one (the __libc_* names are what malloc wrappers and old hook code
 * call; cfree is the old name of free, still bound by old binaries) would
 * otherwise reach glibc's allocator with jwmalloc's blocks, or hand glibc's
 * blocks to jwmalloc. Aliases: same code, same errno rules. */
#if __has_attribute(copy)
#define JW_ALIAS_ATTRS(target) __attribute__((copy(target)))
#else
#define JW_ALIAS_ATTRS(target)
#endif
#define JW_ALIAS(name, target) \
  extern __typeof(target) name JW_EXPORT JW_ALIAS_ATTRS(target) __attribute__((alias(#target)))
JW_ALIAS(__libc_malloc, malloc);
JW_ALIAS(__libc_free, free);
JW_ALIAS(__libc_calloc, calloc);
JW_ALIAS(__libc_realloc, realloc);
JW_ALIAS(__libc_memalign, memalign);
JW_ALIAS(__libc_valloc, valloc);
JW_ALIAS(__libc_pvalloc, pvalloc);
JW_ALIAS(cfree, free);

/* mallopt(3): Android's parameters (M_DECAY_TIME, M_PURGE, M_PURGE_ALL)
 * act; glibc's are accepted and ignored (android.c). */
JW_EXPORT int mallopt(int param, int value) { return jw_mallopt(param, value); }
JW_ALIAS(__libc_mallopt, mallopt);

/* Android's malloc_disable, malloc_enable, malloc_iterate (android.c,
 * iterate.c; include/jwmalloc.h). */
JW_EXPORT void malloc_disable(void) { jw_malloc_disable(); }
JW_EXPORT void malloc_enable(void) { jw_malloc_enable(); }
JW_EXPORT int malloc_iterate(uintptr_t base, size_t size, void (*callback)(uintptr_t, size_t, void *), void *arg) {
  return jw_malloc_iterate(base, size, callback, arg);
}

/* From counters alone (android.c): cheap enough for a runtime that calls it
 * at every garbage collection (ART). */
JW_EXPORT struct mallinfo2 mallinfo2(void) {
  struct mallinfo2 m;
  jw_mallinfo_fill(&m);
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
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
JW_ALIAS(__libc_mallinfo, mallinfo);
#pragma GCC diagnostic pop

/* malloc_info(3): glibc's XML layout (one heap), filled with jwmalloc's
 * figures as mallinfo2 defines them, so that tools parsing it see this
 * allocator's memory instead of glibc's empty arena. options must be 0
 * (else returns EINVAL, as glibc). The caller's FILE is written with fputs:
 * stdio is the interface here, and this runs outside every allocator lock
 * (the stream may allocate its buffer through malloc). Returns 0, or -1 when
 * the stream fails. */
JW_EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0) return EINVAL;
  struct mallinfo2 m = mallinfo2();
  size_t cur = m.arena + m.hblkhd;
  char buf[1024];
  const char *sys =
      "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n"
      "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n";
  char sysbuf[320];
  jw_format(sysbuf, sizeof sysbuf, sys, cur, m.usmblks, cur, cur);
  jw_format(buf, sizeof buf,
            "<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n"
            "<total type=\"fast\" count=\"0\" size=\"0\"/>\n<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n"
            "%s</heap>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
            "%s</malloc>\n",
            m.fordblks, sysbuf, m.fordblks, m.hblks, m.hblkhd, sysbuf);
  return fputs(buf, fp) == EOF ? -1 : 0;
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

static inline __attribute__((always_inline)) void cxx_delete(void *p) {
  if (JW_LIKELY(jw_fast_free(p))) return;
  jw_tls_state.caller = __builtin_return_address(0);
  jw_free_slow(p);
}

#define NOTHROW const void *nt __attribute__((unused))
/* Itanium C++ ABI names of the size_t forms: size_t is unsigned long (m) on
 * LP64 and unsigned int (j) on i386 (_Znwj, _ZdlPvj, ...). */
#if UINTPTR_MAX > 0xffffffffu
#define JW_SZ(a, b) a##m##b
#else
#define JW_SZ(a, b) a##j##b
#endif
JW_EXPORT void *JW_SZ(_Znw, )(size_t n) { return cxx_new(n, 0); }
JW_EXPORT void *JW_SZ(_Zna, )(size_t n) { return cxx_new(n, 0); }
JW_EXPORT void *JW_SZ(_Znw, RKSt9nothrow_t)(size_t n, NOTHROW) { return cxx_new(n, 1); }
JW_EXPORT void *JW_SZ(_Zna, RKSt9nothrow_t)(size_t n, NOTHROW) { return cxx_new(n, 1); }
JW_EXPORT void *JW_SZ(_Znw, St11align_val_t)(size_t n, size_t al) { return new_retry(n, al, 0); }
JW_EXPORT void *JW_SZ(_Zna, St11align_val_t)(size_t n, size_t al) { return new_retry(n, al, 0); }
JW_EXPORT void *JW_SZ(_Znw, St11align_val_tRKSt9nothrow_t)(size_t n, size_t al, NOTHROW) { return new_retry(n, al, 1); }
JW_EXPORT void *JW_SZ(_Zna, St11align_val_tRKSt9nothrow_t)(size_t n, size_t al, NOTHROW) { return new_retry(n, al, 1); }
/* Every delete form frees; the size and alignment arguments are not needed
 * (the pointer says where the block lives). */
#define JW_DELETE(name, ...)                \
  JW_EXPORT void name(void *p, ##__VA_ARGS__) { cxx_delete(p); }
#define UNUSED_SZ size_t n __attribute__((unused))
#define UNUSED_AL size_t al __attribute__((unused))
JW_DELETE(_ZdlPv)
JW_DELETE(_ZdaPv)
JW_DELETE(JW_SZ(_ZdlPv, ), UNUSED_SZ)
JW_DELETE(JW_SZ(_ZdaPv, ), UNUSED_SZ)
JW_DELETE(_ZdlPvRKSt9nothrow_t, NOTHROW)
JW_DELETE(_ZdaPvRKSt9nothrow_t, NOTHROW)
JW_DELETE(_ZdlPvSt11align_val_t, UNUSED_AL)
JW_DELETE(_ZdaPvSt11align_val_t, UNUSED_AL)
JW_DELETE(JW_SZ(_ZdlPv, St11align_val_t), UNUSED_SZ, UNUSED_AL)
JW_DELETE(JW_SZ(_ZdaPv, St11align_val_t), UNUSED_SZ, UNUSED_AL)
JW_DELETE(_ZdlPvSt11align_val_tRKSt9nothrow_t, UNUSED_AL, NOTHROW)
JW_DELETE(_ZdaPvSt11align_val_tRKSt9nothrow_t, UNUSED_AL, NOTHROW)
