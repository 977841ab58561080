/* See os_meta.h. */
#include "os_meta.h"

#include <errno.h>
#include <stdint.h>

#include "os_mem.h"
#include "../common/atomic.h"

#define CHUNK ((size_t)64 << 10)

typedef struct chunk {
  jw_atomic_u64 used; /* bytes handed out, header included */
} chunk;

static jw_atomic_ptr current;

void *jw_os_meta_alloc(size_t size) {
  size = (size + 63) & ~(size_t)63;
  if (size > CHUNK - 64) {
    errno = ENOMEM;
    return NULL;
  }
  for (;;) {
    /* Acquire: the chunk header was initialized before it was published. */
    chunk *c = jw_load(&current, JW_ACQUIRE);
    if (c) {
      /* Relaxed: the counter only partitions the chunk among callers. */
      uint64_t off = jw_fetch_add(&c->used, size, JW_RELAXED);
      if (off + size <= CHUNK) return (char *)c + off;
    }
    chunk *fresh = jw_os_map(CHUNK, 4096);
    if (fresh == NULL) return NULL;
    jw_store(&fresh->used, 64 + size, JW_RELAXED); /* published by the CAS below */
    void *expected = c;
    /* Release: publishes the header; on failure someone else installed a
     * chunk: give ours back and retry there. */
    if (jw_cas(&current, &expected, fresh, JW_RELEASE, JW_RELAXED)) return (char *)fresh + 64;
    jw_os_unmap(fresh, CHUNK);
  }
}
