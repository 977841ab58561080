/* Memory safety (planted bugs):
 *   -DMEM_OVERFLOW  a loop writes one byte past a live 64-byte block
 *   -DMEM_UAF       T1 frees a block it published; T2 may still read it */
#include <stdlib.h>

#include "common/atomic.h"
#include "vrf.h"

char *buf;
jw_atomic_ptr shared;

static void setup(void) {
  buf = malloc(64);
  VRF_ASSERT(buf != NULL);
  vrf_block_live(buf, 64); /* as the allocator wrappers will declare malloc's result */
}

#ifdef MEM_OVERFLOW
static void writer(void *a) {
  (void)a;
  for (int i = 0; i <= 64; i++) buf[i] = (char)i; /* BUG: <= */
}
VRF_CLIENT(.name = "mem_overflow", .about = "a write one byte past a live block (planted bug)",
           .bound = "1 thread, 65 writes", .setup = setup, .threads = {writer}, .expect = "out of bounds");
#else
static void owner(void *a) {
  (void)a;
  buf[0] = 1;
  jw_store(&shared, buf, JW_RELEASE);
  jw_store(&shared, NULL, JW_RELEASE);
  vrf_block_dead(buf); /* BUG: a reader may still hold the pointer */
}
static void reader(void *a) {
  (void)a;
  char *p = jw_load(&shared, JW_ACQUIRE);
  if (p) VRF_ASSERT(p[0] == 1);
}
/* The reader is T1, so in the canonical schedule it reads before the owner
 * frees: the free itself must see that the read is not ordered before it. */
VRF_CLIENT(.name = "mem_use_after_free", .about = "a block freed while another thread may still read it (planted bug)",
           .bound = "2 threads x 2 operations", .setup = setup, .threads = {reader, owner}, .expect = "out of bounds");
#endif
