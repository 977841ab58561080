/* vrf: the client interface of jwmalloc's bounded model checker.
 *
 * Brief: jwmalloc, "Bounded verification under weak memory models". Design and
 * the memory model: docs/design/verification.md.
 *
 * A client is one C file that defines its threads and declares them with
 * VRF_CLIENT(...). The checker runs setup() once on thread T0, then explores
 * every execution of the threads' atomic operations (within the bounds) and
 * runs finish() on T0 after all threads finished, in each execution.
 *
 * All functions below are for client code running under the checker (setup,
 * threads, finish); they are not thread-safe in any other sense because the
 * checker runs one thread at a time.
 */
#ifndef VRF_H
#define VRF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define VRF_MAX_THREADS 8 /* model threads including T0 */

typedef void (*vrf_thread_fn)(void *arg);

typedef struct vrf_client {
  const char *name;
  const char *about;   /* one line: what the client checks */
  const char *bound;   /* the client's own bound in words, e.g. "2 threads x 3 pushes" */
  void (*setup)(void); /* T0, once, before any thread starts (may be NULL) */
  vrf_thread_fn threads[VRF_MAX_THREADS - 1]; /* started together; NULL-terminated */
  void *args[VRF_MAX_THREADS - 1];
  void (*finish)(void); /* T0 after every thread finished, in each execution */
  /* Litmus tests: the exact set of outcomes (vrf_outcome strings) the memory
   * model allows, NULL-terminated. The check fails if one is missing or
   * another one shows up. */
  const char *const *outcomes;
  /* Planted bugs: the failure kind the checker must report ("data race",
   * "assertion", "out of bounds", "no progress", "loop bound", "crash"). */
  const char *expect;
  unsigned max_events; /* per-thread bound on atomic operations; 0: 1000 */
  /* Spurious failures a jw_cas_weak may have, per thread (default none).
   * atomic.h allows weak CAS only in retry loops, where a spurious failure
   * is just another retry; clients of code that reacts to failures set it. */
  int spurious;
} vrf_client;

/* Declares the client (exactly one per program). */
#define VRF_CLIENT(...) const vrf_client vrf_client_def = {__VA_ARGS__}

/* 0 for the shortened bound of `make test`, 1 for the full bound of
 * `make verify` (command-line --level). Clients size their loops with it. */
int vrf_level(void);

/* A client-defined integer from --param (default 0), to select one of several
 * configurations of a client. */
int vrf_param(void);

/* The model thread running the caller: 0 is T0, client threads are 1..7. */
int vrf_self(void);

/* Records part of this execution's outcome (printf format, appended with a
 * space separator; at most 255 bytes per execution). */
void vrf_outcome(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Fails the execution: prints it and exits non-zero. */
void vrf_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
void vrf_assert_fail(const char *expr, const char *file, int line, const char *func)
    __attribute__((noreturn));
#define VRF_ASSERT(c) ((c) ? (void)0 : vrf_assert_fail(#c, __FILE__, __LINE__, __func__))

/* Threads created from inside a thread (up to 7 in all); a scheduling point.
 * Returns the model thread id. */
int vrf_thread_create(vrf_thread_fn fn, void *arg);
/* Waits for a thread created with vrf_thread_create to finish. */
void vrf_thread_join(int tid);

/* ---- Memory that is legal to access (see docs/design/verification.md) ----
 * Stacks, static TLS and static data are always legal. */

/* [p, p+n) is legal for client and allocator code until revoked. */
void vrf_mem_legal(const void *p, size_t n, const char *name);
void vrf_mem_revoke(const void *p);

/* [p, p+n) is a live block handed out by the allocator: legal for client
 * code, illegal for allocator code, until vrf_block_dead(p). */
void vrf_block_live(const void *p, size_t n);
void vrf_block_dead(const void *p);

/* [p, p+n) belongs to the allocator (its mmap calls do this automatically). */
void vrf_alloc_owned(const void *p, size_t n);
void vrf_alloc_disowned(const void *p, size_t n);

/* Marks the calling thread as running allocator code (nestable). */
void vrf_enter_allocator(void);
void vrf_leave_allocator(void);

#endif
