/* The only functions through which workloads reach the allocator under test.
 *
 * Each is noinline and does nothing but the call, in its own translation unit,
 * so under callgrind the inclusive cost of the call arcs leaving jwb_call_* is
 * exactly the allocator's instructions for the workload's requests, whatever
 * the allocator names its own symbols (docs/design/bench.md, "Allocator
 * instructions"). Thread-safe as the allocator is.
 */
#include <malloc.h>
#include <stdlib.h>

#include "harness.h"

#define JWB_CALL __attribute__((noinline, used))

JWB_CALL void *jwb_call_malloc(size_t n) { return malloc(n); }
JWB_CALL void *jwb_call_calloc(size_t n, size_t size) { return calloc(n, size); }
JWB_CALL void *jwb_call_realloc(void *p, size_t n) { return realloc(p, n); }
JWB_CALL void *jwb_call_memalign(size_t align, size_t n) {
  void *p = NULL;
  return posix_memalign(&p, align, n) == 0 ? p : NULL;
}
JWB_CALL void *jwb_call_aligned_alloc(size_t align, size_t n) { return aligned_alloc(align, n); }
JWB_CALL void *jwb_call_memalign_legacy(size_t align, size_t n) { return memalign(align, n); }
JWB_CALL void *jwb_call_valloc(size_t n) { return valloc(n); }
JWB_CALL void *jwb_call_pvalloc(size_t n) { return pvalloc(n); }
JWB_CALL void jwb_call_free(void *p) { free(p); }
/* Nothing but the call and the return: the asm keeps the compiler from
 * dropping it. */
JWB_CALL void jwb_null_call(void) { __asm__ volatile(""); }
