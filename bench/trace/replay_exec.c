/* See replay_exec.h. */
#include "replay_exec.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *wait_for(jwr_obj *objs, uint32_t id, uint64_t *waits) {
  void *p;
  unsigned spins = 0;
  /* acquire: the block's contents, written by its allocating thread, are visible */
  while (!(p = atomic_load_explicit(&objs[id].p, memory_order_acquire))) {
    if (++spins > 64) sched_yield();
    if (spins == 1 && waits) (*waits)++;
  }
  return p;
}

static void publish(jwr_obj *objs, uint32_t id, void *p, uint64_t size) {
  objs[id].size = size;
  /* release: contents and size before the pointer */
  atomic_store_explicit(&objs[id].p, p, memory_order_release);
}

/* One byte in every 64-byte line: the whole block resident and in the
 * cache, as Android's memory_replay makes every allocation resident. */
static void touch_lines(void *p, uint64_t n) {
  volatile unsigned char *c = p;
  for (uint64_t i = 0; i < n; i += 64) c[i] = (unsigned char)i;
}

/* The block an operation names, checked; NULL for NULL. */
static void *old_block(jwb_thread *t, jwr_obj *objs, uint32_t id, uint64_t *size, uint64_t *waits) {
  void *q = wait_for(objs, id, waits);
  *size = objs[id].size;
  if (q == JWR_NULL_BLOCK) return NULL;
  jwb_check(t, q, *size, jwb_tag(0, id), 0);
  return q;
}

static void *aligned_call(jwb_thread *t, const jwr_op *r) {
  uint64_t align = jwr_align(r);
  void *p;
  if (r->op == JWT_POSIX_MEMALIGN) JWB_TIMED(t, p = jwb_call_memalign(align, r->size));
  else if (r->op == JWT_ALIGNED_ALLOC) JWB_TIMED(t, p = jwb_call_aligned_alloc(align, r->size));
  else if (r->op == JWT_MEMALIGN) JWB_TIMED(t, p = jwb_call_memalign_legacy(align, r->size));
  else if (r->op == JWT_VALLOC) JWB_TIMED(t, p = jwb_call_valloc(r->size));
  else JWB_TIMED(t, p = jwb_call_pvalloc(r->size));
  t->ops++;
  t->allocs++;
  t->bytes += r->size;
  if (!p && r->size) jwb_oom(t, r->size);
  return p;
}

void jwr_exec(jwb_thread *t, const jwr_op *r, jwr_obj *objs, unsigned flags, jwr_times *times, uint64_t *waits) {
  void *p = NULL, *q = NULL;
  uint64_t old_size = 0, t0 = 0, t1 = 0;
  int timed = (flags & JWR_TIME) != 0;
  switch (r->op) {
    case JWT_FREE:
      if (r->id) q = old_block(t, objs, r->id, &old_size, waits);
      if (timed) t0 = jwb_now_ns();
      jwb_free(t, q);
      if (timed) times->call_ns = times->touch_ns = jwb_now_ns() - t0;
      if (r->id) atomic_store_explicit(&objs[r->id].p, JWR_FREED, memory_order_relaxed);
      return;
    case JWT_REALLOC:
      if (r->old) {
        q = old_block(t, objs, r->old, &old_size, waits);
        atomic_store_explicit(&objs[r->old].p, JWR_FREED, memory_order_relaxed);
      }
      if (timed) t0 = jwb_now_ns();
      p = jwb_realloc(t, q, r->size);
      break;
    case JWT_MALLOC:
      if (timed) t0 = jwb_now_ns();
      p = jwb_malloc(t, r->size);
      break;
    case JWT_CALLOC:
      if (timed) t0 = jwb_now_ns();
      p = jwb_calloc(t, r->old, r->old ? r->size / r->old : 0);
      break;
    case JWT_POSIX_MEMALIGN:
    case JWT_ALIGNED_ALLOC:
    case JWT_MEMALIGN:
    case JWT_VALLOC:
    case JWT_PVALLOC:
      if (timed) t0 = jwb_now_ns();
      p = aligned_call(t, r);
      break;
    default:
      fprintf(stderr, "replay: bad operation %u in the decoded trace\n", (unsigned)r->op);
      exit(2);
  }
  if (timed) t1 = jwb_now_ns();
  /* Checks of what the call returned, outside the timed window. */
  if (r->op == JWT_REALLOC && q && p) {
    uint64_t keep = old_size < r->size ? old_size : r->size, head, tag = jwb_tag(0, r->old);
    if (keep >= 8) {
      memcpy(&head, p, 8);
      if (jwb.check && head != tag) jwb_fail(t, "realloc did not keep the block's contents");
    }
  } else if (r->op == JWT_CALLOC && jwb.check && r->size && p) {
    const unsigned char *c = p;
    if (c[0] || c[r->size - 1] || c[r->size / 2]) jwb_fail(t, "calloc returned memory that is not zero");
  } else if (r->op >= JWT_POSIX_MEMALIGN && p) {
    uint64_t want = r->op == JWT_VALLOC || r->op == JWT_PVALLOC ? (uint64_t)sysconf(_SC_PAGESIZE) : jwr_align(r);
    if ((uintptr_t)p & (want - 1)) {
      char what[160];
      snprintf(what, sizeof what, "%s(%llu, %llu) returned %p, not aligned", jwt_op_name(r->op),
               (unsigned long long)want, (unsigned long long)r->size, p);
      jwb_fail(t, what);
    }
  }
  uint64_t t2 = 0;
  if (r->size && p) {
    if (timed) t2 = jwb_now_ns();
    if (flags & JWR_TOUCH_LINES) touch_lines(p, r->size);
    jwb_fill(p, r->size, jwb_tag(0, r->id));
    if (timed) t2 = jwb_now_ns() - t2;
  }
  if (timed) {
    times->call_ns = t1 - t0;
    times->touch_ns = t1 - t0 + t2;
  }
  publish(objs, r->id, p ? p : JWR_NULL_BLOCK, r->size);
}
