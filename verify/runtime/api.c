/* Entry points called by instrumented code: jw_* atomics (vrf_atomic.h), the
 * __tsan_* callbacks the compiler emits, and the client interface (vrf.h). */
#include <stdio.h>
#include <string.h>

#include "rt.h"

static bool modelled(void) { return rt_self != NULL && rt.started; }

/* Outside the model (constructors before main): a real atomic operation. */
static uint64_t direct(op_t *o, bool *ok) {
  uint64_t r = 0;
#define DIRECT(T)                                                                                       \
  do {                                                                                                  \
    T *p = o->addr, v = (T)o->val, e = (T)o->expected;                                                  \
    switch (o->kind) {                                                                                  \
      case OP_LOAD: r = __atomic_load_n(p, __ATOMIC_SEQ_CST); break;                                   \
      case OP_STORE: __atomic_store_n(p, v, __ATOMIC_SEQ_CST); break;                                  \
      case OP_CAS:                                                                                      \
        *ok = __atomic_compare_exchange_n(p, &e, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);          \
        r = e;                                                                                          \
        break;                                                                                          \
      case OP_RMW:                                                                                      \
        switch (o->rmw) {                                                                               \
          case VRF_RMW_ADD: r = __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); break;                      \
          case VRF_RMW_SUB: r = __atomic_fetch_sub(p, v, __ATOMIC_SEQ_CST); break;                      \
          case VRF_RMW_OR: r = __atomic_fetch_or(p, v, __ATOMIC_SEQ_CST); break;                        \
          case VRF_RMW_AND: r = __atomic_fetch_and(p, v, __ATOMIC_SEQ_CST); break;                      \
          case VRF_RMW_XOR: r = __atomic_fetch_xor(p, v, __ATOMIC_SEQ_CST); break;                      \
          case VRF_RMW_NAND: r = __atomic_fetch_nand(p, v, __ATOMIC_SEQ_CST); break;                    \
          default: r = __atomic_exchange_n(p, v, __ATOMIC_SEQ_CST); break;                              \
        }                                                                                               \
        break;                                                                                          \
    }                                                                                                   \
  } while (0)
  switch (o->size) {
    case 1: DIRECT(uint8_t); break;
    case 2: DIRECT(uint16_t); break;
    case 4: DIRECT(uint32_t); break;
    default: DIRECT(uint64_t); break;
  }
  if (o->kind == OP_FENCE) __atomic_thread_fence(__ATOMIC_SEQ_CST);
  return r;
}

/* Mutation testing (--weaken FUNC:ORDER): every atomic of FUNC with that
 * order runs as relaxed, as if the source had been edited. */
static void maybe_weaken(op_t *o) {
  if (!rt.weaken_func || !o->site || strcmp(o->site->func, rt.weaken_func) != 0) return;
  bool hit = false;
  if (o->mo != __ATOMIC_RELAXED && (rt.weaken_mo < 0 || o->mo == rt.weaken_mo)) o->mo = __ATOMIC_RELAXED, hit = true;
  if (o->kind == OP_CAS && o->mo_fail != __ATOMIC_RELAXED && (rt.weaken_mo < 0 || o->mo_fail == rt.weaken_mo))
    o->mo_fail = __ATOMIC_RELAXED, hit = true;
  if (hit && tracing()) {
    char site[300];
    fmt_site(site, sizeof site, o->site, 0);
    trace_printf("      (mutation --weaken: the next operation, %s, runs relaxed)\n", site);
  }
}

uint64_t atomic_op(op_t *o, bool *ok) {
  if (!modelled()) return direct(o, ok);
  maybe_weaken(o);
  vthread_t *t = rt_self;
  sched_point(t, o);
  exec_begin_event(t);
  uint64_t r = 0;
  model_exec(t, &t->pending, &r, ok);
  return r;
}

uint64_t vrf_atomic_load(void *p, unsigned size, int mo, const vrf_site *s) {
  op_t o = {.kind = OP_LOAD, .addr = p, .size = size, .mo = mo, .site = s};
  bool ok;
  if (mo == __ATOMIC_RELEASE || mo == __ATOMIC_ACQ_REL) fail("assertion", (uintptr_t)p, size, "load with %s order", mo_name(mo));
  return atomic_op(&o, &ok);
}

void vrf_atomic_store(void *p, unsigned size, uint64_t v, int mo, const vrf_site *s) {
  op_t o = {.kind = OP_STORE, .addr = p, .size = size, .mo = mo, .val = v, .site = s};
  bool ok;
  if (mo == __ATOMIC_ACQUIRE || mo == __ATOMIC_ACQ_REL || mo == __ATOMIC_CONSUME)
    fail("assertion", (uintptr_t)p, size, "store with %s order", mo_name(mo));
  atomic_op(&o, &ok);
}

uint64_t vrf_atomic_rmw(void *p, unsigned size, int op, uint64_t v, int mo, const vrf_site *s) {
  op_t o = {.kind = OP_RMW, .addr = p, .size = size, .mo = mo, .rmw = op, .val = v, .site = s};
  bool ok;
  return atomic_op(&o, &ok);
}

bool vrf_atomic_cas(void *p, unsigned size, uint64_t *expected, uint64_t desired, bool weak, int mo_ok, int mo_fail,
                    const vrf_site *s) {
  op_t o = {.kind = OP_CAS, .addr = p, .size = size, .mo = mo_ok, .mo_fail = mo_fail, .val = desired,
            .expected = *expected, .weak = weak, .site = s};
  bool ok = false;
  uint64_t seen = atomic_op(&o, &ok);
  if (!ok) *expected = seen;
  return ok;
}

void vrf_atomic_fence(int mo, const vrf_site *s) {
  op_t o = {.kind = OP_FENCE, .mo = mo, .site = s};
  bool ok;
  if (mo != __ATOMIC_RELAXED) atomic_op(&o, &ok);
}

/* The allocator's one validated racy read (jw_fast_tag; concurrency.md, "The
 * one validated racy read"): the first word of the page of a pointer being
 * freed, a slab tag or the program's data in a live block, acted on only when
 * it equals the caller's secret key. Read as it is in memory (the mo-latest
 * value, always a value the model allows), not a scheduling point, exempt
 * from the race check; it must still lie in memory the process may touch. */
uint64_t vrf_validated_load(const void *p, unsigned size, const vrf_site *s) {
  uint64_t v = 0;
  if (modelled() && !regions_any((uintptr_t)p, size))
    fail("out of bounds", (uintptr_t)p, size, "validated read at %p (%s:%d) outside any legal memory", p,
         s ? s->file : "?", s ? s->line : 0);
  memcpy(&v, p, size);
  return v;
}

void vrf_spin_relax(const vrf_site *s) {
  vthread_t *t = rt_self;
  if (!modelled() || !rt.in_child) return;
  op_t o = {.kind = OP_RELAX, .site = s};
  sched_point(t, &o);
  exec_begin_event(t);
  footprint_t f = op_footprint(t, &t->pending);
  model_relax_exec(t);
  exec_end_event(t, &f, 0, 1);
}

/* ---- client interface ---- */

int vrf_level(void) { return rt.level; }
int vrf_param(void) { return rt.param; }
int vrf_self(void) { return rt_self ? rt_self->id : -1; }

void vrf_outcome(const char *fmt, ...) {
  if (!rt.in_child) return;
  shm_t *s = rt.shm;
  if (s->outcome_len && s->outcome_len < sizeof s->outcome - 1) s->outcome[s->outcome_len++] = ' ';
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(s->outcome + s->outcome_len, sizeof s->outcome - s->outcome_len, fmt, ap);
  va_end(ap);
  if (n > 0) s->outcome_len += (uint32_t)n;
  if (s->outcome_len >= sizeof s->outcome) s->outcome_len = sizeof s->outcome - 1;
}

int vrf_thread_create(vrf_thread_fn fn, void *arg) { return thread_create(fn, arg); }
void vrf_thread_join(int tid) { thread_join(tid); }

/* ---- ThreadSanitizer instrumentation callbacks ---- */

#define RA ((uintptr_t)__builtin_return_address(0))

static inline void plain(void *a, unsigned n, bool w, uintptr_t pc) {
  vthread_t *t = rt_self;
  if (t && rt.started) shadow_access(t, (uintptr_t)a, n, w, pc);
}

void __tsan_init(void) {}
void __tsan_func_entry(void *pc) {
  vthread_t *t = rt_self;
  if (t) {
    if (t->csp < 64) t->cstack[t->csp] = (uintptr_t)pc;
    t->csp++;
  }
}
void __tsan_func_exit(void) {
  vthread_t *t = rt_self;
  if (t && t->csp > 0) t->csp--;
}

#define PLAIN_CB(n)                                                                   \
  void __tsan_read##n(void *a) { plain(a, n, false, RA); }                            \
  void __tsan_write##n(void *a) { plain(a, n, true, RA); }                            \
  void __tsan_unaligned_read##n(void *a) { plain(a, n, false, RA); }                  \
  void __tsan_unaligned_write##n(void *a) { plain(a, n, true, RA); }                  \
  void __tsan_volatile_read##n(void *a) { plain(a, n, false, RA); }                   \
  void __tsan_volatile_write##n(void *a) { plain(a, n, true, RA); }                   \
  void __tsan_unaligned_volatile_read##n(void *a) { plain(a, n, false, RA); }         \
  void __tsan_unaligned_volatile_write##n(void *a) { plain(a, n, true, RA); }         \
  void __tsan_read##n##_pc(void *a, void *pc) { plain(a, n, false, (uintptr_t)pc); }  \
  void __tsan_write##n##_pc(void *a, void *pc) { plain(a, n, true, (uintptr_t)pc); }
PLAIN_CB(1)
PLAIN_CB(2)
PLAIN_CB(4)
PLAIN_CB(8)
PLAIN_CB(16)

void __tsan_read_range(void *a, unsigned long n) {
  if (n) plain(a, (unsigned)n, false, RA);
}
void __tsan_write_range(void *a, unsigned long n) {
  if (n) plain(a, (unsigned)n, true, RA);
}
void __tsan_vptr_update(void **a, void *v) {
  (void)v;
  plain(a, sizeof(void *), true, RA);
}
void __tsan_vptr_read(void **a) { plain(a, sizeof(void *), false, RA); }

/* Atomic builtins in instrumented code (not through atomic.h): modelled too. */
#define TSAN_ATOMIC(bits, T)                                                                               \
  T __tsan_atomic##bits##_load(const volatile T *a, int mo) {                                              \
    op_t o = {.kind = OP_LOAD, .addr = (void *)a, .size = sizeof(T), .mo = mo, .pc = RA};                  \
    bool ok;                                                                                               \
    return (T)atomic_op(&o, &ok);                                                                          \
  }                                                                                                        \
  void __tsan_atomic##bits##_store(volatile T *a, T v, int mo) {                                           \
    op_t o = {.kind = OP_STORE, .addr = (void *)a, .size = sizeof(T), .mo = mo, .val = (uint64_t)v,       \
              .pc = RA};                                                                                   \
    bool ok;                                                                                               \
    atomic_op(&o, &ok);                                                                                    \
  }                                                                                                        \
  static T rmw##bits(volatile T *a, T v, int mo, int op, uintptr_t pc) {                                   \
    op_t o = {.kind = OP_RMW, .addr = (void *)a, .size = sizeof(T), .mo = mo, .rmw = op,                   \
              .val = (uint64_t)v, .pc = pc};                                                               \
    bool ok;                                                                                               \
    return (T)atomic_op(&o, &ok);                                                                          \
  }                                                                                                        \
  T __tsan_atomic##bits##_exchange(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_XCHG, RA); } \
  T __tsan_atomic##bits##_fetch_add(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_ADD, RA); } \
  T __tsan_atomic##bits##_fetch_sub(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_SUB, RA); } \
  T __tsan_atomic##bits##_fetch_and(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_AND, RA); } \
  T __tsan_atomic##bits##_fetch_or(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_OR, RA); }   \
  T __tsan_atomic##bits##_fetch_xor(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_XOR, RA); } \
  T __tsan_atomic##bits##_fetch_nand(volatile T *a, T v, int mo) { return rmw##bits(a, v, mo, VRF_RMW_NAND, RA); } \
  static int cas##bits(volatile T *a, T *c, T v, int mo, int fmo, bool weak, uintptr_t pc) {               \
    op_t o = {.kind = OP_CAS, .addr = (void *)a, .size = sizeof(T), .mo = mo, .mo_fail = fmo,              \
              .val = (uint64_t)v, .expected = (uint64_t)*c, .weak = weak, .pc = pc};                       \
    bool ok = false;                                                                                       \
    T seen = (T)atomic_op(&o, &ok);                                                                        \
    if (!ok) *c = seen;                                                                                    \
    return ok;                                                                                             \
  }                                                                                                        \
  int __tsan_atomic##bits##_compare_exchange_strong(volatile T *a, T *c, T v, int mo, int fmo) {           \
    return cas##bits(a, c, v, mo, fmo, false, RA);                                                         \
  }                                                                                                        \
  int __tsan_atomic##bits##_compare_exchange_weak(volatile T *a, T *c, T v, int mo, int fmo) {             \
    return cas##bits(a, c, v, mo, fmo, true, RA);                                                          \
  }                                                                                                        \
  T __tsan_atomic##bits##_compare_exchange_val(volatile T *a, T c, T v, int mo, int fmo) {                 \
    cas##bits(a, &c, v, mo, fmo, false, RA);                                                               \
    return c;                                                                                              \
  }
TSAN_ATOMIC(8, uint8_t)
TSAN_ATOMIC(16, uint16_t)
TSAN_ATOMIC(32, uint32_t)
TSAN_ATOMIC(64, uint64_t)

void __tsan_atomic_thread_fence(int mo) {
  op_t o = {.kind = OP_FENCE, .mo = mo, .pc = RA};
  bool ok;
  if (mo != __ATOMIC_RELAXED) atomic_op(&o, &ok);
}
void __tsan_atomic_signal_fence(int mo) { (void)mo; }
