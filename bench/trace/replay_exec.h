/* One replayed allocation call, shared by the replayers of the suite's own
 * traces (replay.c) and of Android's memory_replay traces
 * (android_replay.c): the decoded operation, the table of replayed objects,
 * and the call itself with its checks (docs/design/bench.md, "Traces").
 *
 * Every block is filled with its object's tag (jwb_fill) when it is
 * allocated and checked when it is freed or reallocated (a free that finds
 * other bytes, a realloc that lost the contents, a calloc that is not zero
 * or an aligned form that is not aligned is a check failure of the run).
 * Thread-safety: an object is touched by the thread that replays its
 * allocation, then by the one that replays its free; the hand-over is the
 * release/acquire of jwr_obj.p.
 */
#ifndef JWB_REPLAY_EXEC_H
#define JWB_REPLAY_EXEC_H

#include <stdatomic.h>
#include <stdint.h>

#include "format.h"
#include "harness.h"

/* One decoded operation, 16 bytes. The operations are format.h's (JWT_*). */
typedef struct jwr_op {
  uint64_t size : 48;     /* bytes requested (nmemb x size for calloc) */
  uint64_t op : 8;
  uint64_t align_log2 : 8;
  uint32_t id;            /* object created (allocating ops) or freed (free; 0: free(NULL)) */
  uint32_t old;           /* realloc: object replaced (0: NULL); calloc: nmemb */
} jwr_op;

/* objs[id].p: NULL until allocated, then the block, JWR_FREED after its
 * free, or JWR_NULL_BLOCK when the allocator returned NULL for a zero-byte
 * request. */
#define JWR_FREED ((void *)1)
#define JWR_NULL_BLOCK ((void *)2)

typedef struct jwr_obj {
  _Atomic(void *) p;
  uint64_t size;
} jwr_obj;

/* What jwr_exec does besides the call. */
enum {
  JWR_TOUCH_LINES = 1, /* write one byte in every 64-byte line of a new block (Android's replays) */
  JWR_TIME = 2,        /* time the call (and the touch) with the monotonic clock */
};

/* Times of one call when JWR_TIME is set, in nanoseconds: the allocator
 * call alone, and the call plus filling (touching) the new block. */
typedef struct jwr_times {
  uint64_t call_ns, touch_ns;
} jwr_times;

/* Replays r on thread t against objs: waits (spinning briefly, then
 * yielding) until the objects it names are allocated (a cross-thread free
 * or realloc in the suite's concurrent replay), checks the old block,
 * makes the call, checks and fills the new one, and publishes it. Counts a
 * wait in *waits (may be NULL). */
void jwr_exec(jwb_thread *t, const jwr_op *r, jwr_obj *objs, unsigned flags, jwr_times *times, uint64_t *waits);

/* The alignment of an aligned form (0 for the others). */
static inline uint64_t jwr_align(const jwr_op *r) {
  return r->op >= JWT_POSIX_MEMALIGN && r->op <= JWT_MEMALIGN ? (uint64_t)1 << r->align_log2 : 0;
}

#endif
