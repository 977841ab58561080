/* The gate of malloc_disable (Android's extension): while it is closed,
 * every thread that enters an allocation call waits at its start until
 * malloc_enable opens it again.
 *
 * Design: docs/design/api.md, "Android's extensions", and
 * docs/design/concurrency.md ("Locks", the disable lock). The gate costs the
 * fast paths no instruction of their own: the malloc fast path already
 * compares the size with the frontend's largest class, and the free fast path
 * already tests the pointer's low bits; both read their bound from here
 * instead of an immediate (one load each). Closing the gate sets the bound
 * to 0 and the mask to all ones, so every call takes its slow path, which
 * checks `closed` (a load and a branch) before anything else.
 *
 * Thread-safety: written only by malloc_disable and malloc_enable (and a
 * fork child), read by every call with relaxed loads: a call that loaded the
 * open gate just before it closed completes concurrently (api.md says what
 * malloc_disable waits for and what it does not). Never allocates.
 */
#ifndef JW_API_GATE_H
#define JW_API_GATE_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/atomic.h"
#include "../common/config.h"

typedef struct jw_gate {
  /* The malloc fast path serves n < fast_limit: JW_SMALL_MAX + 1 while the
   * gate is open, 0 while it is closed. */
  jw_atomic_uptr fast_limit;
  /* The free fast path sends a pointer with any bit of free_mask set to the
   * slow path: 15 (the 16-byte alignment check) open, all ones closed. */
  jw_atomic_uptr free_mask;
  /* 1 while closed: the futex word the paused threads sleep on. */
  jw_atomic_u32 closed;
  /* Threads now waiting at the gate (a figure: jw_malloc_paused). */
  jw_atomic_u32 waiters;
} __attribute__((aligned(64))) jw_gate;

/* One cache line of its own, read by every call and written only by
 * disable/enable: no false sharing with counters. Hidden in the declaration
 * too, so that the fast paths address it directly (one instruction: a
 * default-visibility declaration costs a GOT load before it). */
extern jw_gate jw_gate_state __attribute__((visibility("hidden")));

#define JW_GATE_OPEN_LIMIT ((uintptr_t)JW_SMALL_MAX + 1)
#define JW_GATE_OPEN_MASK ((uintptr_t)15)

/* The fast paths' two gate checks: true when the call takes its slow path.
 * On x86-64 the relaxed load is folded into the compare (cmp/test with a
 * memory operand: an aligned 8-byte load is atomic there), so the gate adds
 * no instruction over an immediate, as said above; GCC never folds an
 * __atomic load into an operand itself. Elsewhere, and in verification and
 * ThreadSanitizer builds (which must see the load), a jw_load and the
 * compare. Thread-safety: as the fields' reads above. */
#if defined(__x86_64__) && !defined(JW_VERIFY) && !defined(__SANITIZE_THREAD__)
static inline bool jw_gate_malloc_slow(uintptr_t n) {
  bool ge;
  __asm__("cmpq %1, %2" : "=@ccae"(ge) : "m"(jw_gate_state.fast_limit.v), "r"(n));
  return ge;
}
static inline bool jw_gate_free_slow(uintptr_t a) {
  bool nz;
  __asm__("testq %2, %1" : "=@ccnz"(nz) : "m"(jw_gate_state.free_mask.v), "r"(a));
  return nz;
}
#else
static inline bool jw_gate_malloc_slow(uintptr_t n) { return n >= jw_load(&jw_gate_state.fast_limit, JW_RELAXED); }
static inline bool jw_gate_free_slow(uintptr_t a) { return (a & jw_load(&jw_gate_state.free_mask, JW_RELAXED)) != 0; }
#endif

/* Waits (futex) while the gate is closed. Called at the start of a public
 * call's slow path, holding no lock. */
void jw_gate_wait(void);

/* The check every slow path makes first: one relaxed load and a branch. A
 * closed gate seen late only lets one call through (it completes as a call
 * in flight would). */
static inline void jw_gate_pass(void) {
  if (JW_UNLIKELY(jw_load(&jw_gate_state.closed, JW_RELAXED) != 0)) jw_gate_wait();
}

/* fork: prepare waits while malloc is disabled (it takes the disable lock,
 * held from malloc_disable to malloc_enable), so a fork from a disabled
 * process waits for malloc_enable, as Scudo's does; parent and child give
 * the lock back. */
void jw_gate_atfork_prepare(void);
void jw_gate_atfork_parent(void);
void jw_gate_atfork_child(void);

#endif
