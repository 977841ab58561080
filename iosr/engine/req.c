/* Requests alive (engine_int.h, "req.c"): every read and write the engine
 * has queued or in flight is on one list, so that a stop, an app's death or
 * a read that would duplicate a queued one can find them.
 */
#include <stdlib.h>

#include "engine/engine_int.h"

void iosr_req_link(iosr_engine *e, iosr_req *r) {
  r->prev_all = NULL;
  r->next_all = e->reqs;
  if (e->reqs) e->reqs->prev_all = r;
  e->reqs = r;
}

void iosr_req_free(iosr_engine *e, iosr_req *r) {
  if (r->prev_all) r->prev_all->next_all = r->next_all;
  else if (e->reqs == r) e->reqs = r->next_all;
  if (r->next_all) r->next_all->prev_all = r->prev_all;
  if (r->kind == IOSR_REQ_READ && r->buf) iosr_bufpool_free(&e->bufs, r->buf, r->buf_bytes);
  free(r->done);
  free(r);
}

iosr_req *iosr_req_find_queued_read(iosr_engine *e, uint64_t slot) {
  for (iosr_req *r = e->reqs; r; r = r->next_all)
    if (r->kind == IOSR_REQ_READ && !r->dispatched && slot >= r->s.slot && slot < r->s.slot + r->s.npages)
      return r;
  return NULL;
}
