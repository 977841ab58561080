/* The one place where jwmalloc touches shared memory concurrently.
 *
 * Brief: "Non-blocking interface" and "Bounded verification under weak memory
 * models". Every atomic variable of the allocator has one of the jw_atomic_*
 * types below and is only ever accessed through the jw_* macros, each with an
 * explicit memory order. The call site justifies its order in a comment.
 *
 * Why wrapper structs: a plain assignment to an atomic field does not compile,
 * so no access can bypass these macros (and with them, the verifier).
 *
 * Why macros: in a normal build they are the GCC __atomic builtins and cost
 * nothing; in a verification build (JW_VERIFY defined) verify/ supplies the
 * same names as calls into the model checker, which turns each operation into
 * a scheduling point and lets loads read any store the C11 model allows.
 */
#ifndef JW_COMMON_ATOMIC_H
#define JW_COMMON_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

#define JW_RELAXED __ATOMIC_RELAXED
#define JW_ACQUIRE __ATOMIC_ACQUIRE
#define JW_RELEASE __ATOMIC_RELEASE
#define JW_ACQ_REL __ATOMIC_ACQ_REL
#define JW_SEQ_CST __ATOMIC_SEQ_CST

typedef struct { uint8_t v; } jw_atomic_u8;
typedef struct { uint32_t v; } jw_atomic_u32;
/* 8-aligned on every target: i386 aligns a uint64_t member to 4, and a
 * 64-bit atomic (cmpxchg8b) that straddles a cache line is a bus lock. */
typedef struct { _Alignas(8) uint64_t v; } jw_atomic_u64;
typedef struct { uintptr_t v; } jw_atomic_uptr;
typedef struct { void *v; } jw_atomic_ptr;
typedef struct { bool v; } jw_atomic_bool;

/* Initialization before the object is shared (no ordering needed). */
#define JW_ATOMIC_INIT(x) { (x) }

#ifdef JW_VERIFY
#include "vrf_atomic.h" /* provided by verify/: same names, model-checked */
#else

#define jw_load(a, mo) __atomic_load_n(&(a)->v, (mo))
#define jw_store(a, x, mo) __atomic_store_n(&(a)->v, (x), (mo))
#define jw_xchg(a, x, mo) __atomic_exchange_n(&(a)->v, (x), (mo))
/* Compare-and-swap. *expp holds the expected value and receives the value
 * seen on failure. Strong: fails only when the value differed. */
#define jw_cas(a, expp, x, mo_ok, mo_fail) \
  __atomic_compare_exchange_n(&(a)->v, (expp), (x), false, (mo_ok), (mo_fail))
/* Weak CAS: may fail spuriously; only inside retry loops. */
#define jw_cas_weak(a, expp, x, mo_ok, mo_fail) \
  __atomic_compare_exchange_n(&(a)->v, (expp), (x), true, (mo_ok), (mo_fail))
#define jw_fetch_add(a, x, mo) __atomic_fetch_add(&(a)->v, (x), (mo))
#define jw_fetch_sub(a, x, mo) __atomic_fetch_sub(&(a)->v, (x), (mo))
#define jw_fetch_or(a, x, mo) __atomic_fetch_or(&(a)->v, (x), (mo))
#define jw_fetch_and(a, x, mo) __atomic_fetch_and(&(a)->v, (x), (mo))
#define jw_fence(mo) __atomic_thread_fence(mo)

/* A busy-wait iteration; a scheduling point for the verifier. Call it once
 * per iteration of every loop that waits for another thread: the verifier
 * treats it as "wait until a location this iteration read changes value"
 * (docs/design/verification.md, "Busy-wait loops"). */
static inline void jw_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  __asm__ __volatile__("yield");
#endif
}

#endif /* JW_VERIFY */

#endif
