/* Process and thread life: global initialization on first use, the thread
 * cache of the calling thread, thread exit, fork, exit-time statistics, bad
 * input reports. Brief: "Frontend" (thread caches); docs/design/api.md
 * "Process life". Never allocates through malloc.
 */
#ifndef JW_API_RUNTIME_H
#define JW_API_RUNTIME_H

#include <stdbool.h>

#include "../frontend/thread_cache.h"

/* The calling thread's fast-path state (initial-exec TLS, zero at start). */
extern __thread jw_tls jw_tls_state __attribute__((tls_model("initial-exec")));

/* Runs global initialization once (options, keys, thread-exit key, fork
 * handlers). Returns true when it is complete; false while it is running on
 * this or another thread (the caller serves the request without a cache). */
bool jw_global_init(void);

/* The calling thread's cache, set up on first use; NULL when the thread
 * cannot have one right now (initialization running, thread exiting, no
 * memory). */
jw_tcache *jw_thread_cache(jw_tls *t);

/* Cross-thread frees by a thread without a cache are counted in its TLS
 * (n_free_uncached) and reach the shared counter in batches. Called by the
 * free path at the first free of a batch and when a batch is full: folds a
 * full batch, or the count of a thread past its exit hook (or setting up its
 * cache) at once; at the first free of a thread that never had a cache,
 * registers the thread-exit hook, which folds what is left (otherwise the
 * frees of a consumer thread that never allocates were never counted).
 * Calling thread only; never allocates (pthread_setspecific of one of the
 * first 32 keys). */
void jw_uncached_frees_step(jw_tls *t);

/* Folds the calling thread's uncounted frees into the shared counter now
 * (thread exit, statistics). */
void jw_uncached_frees_flush(jw_tls *t);

/* Bad input: "jwmalloc: <op>(): <problem> (<p>)" on stderr, then abort(),
 * or with JWMALLOC_ABORT_ON_ERROR=0 a warning (the caller ignores the call). */
void jw_report_bad(const char *op, const char *problem, const void *p);

#endif
