/* Read-ahead state per region of an app (design note section 6, `adaptive`:
 * a window per region). The states live in the daemon's memory, in an array
 * per app; a span names its region's state by index (iosr_span.ra_state), so
 * the fault path finds it without a search, and the pieces of a region split
 * by munmap or mremap share it. Owned by the engine thread.
 */
#include <stdlib.h>

#include "engine/engine_int.h"

/* More regions than this share the last state: an app that registers
 * thousands of regions gets one window for the rest rather than unbounded
 * daemon memory. */
#define IOSR_RA_STATES_MAX 4096u

static void state_init(const iosr_app *a, iosr_ra_region *rs, uint32_t region) {
  *rs = (iosr_ra_region){.region = region, .probe_head = -1, .probe_tail = -1};
  iosr_ra_adaptive_init(&rs->ra, a->ra.window, a->ra.max);
}

/* 1 + index of the state of sp's region, created at first use; 0 only when
 * out of memory (the caller then has no per-region state: read-ahead goes
 * on with the app's settings). */
uint32_t iosr_ra_state_of(iosr_app *a, iosr_span *sp) {
  if (!sp) return 0;
  if (sp->ra_state && sp->ra_state <= a->n_ra_regions && a->ra_regions[sp->ra_state - 1].region == sp->region)
    return sp->ra_state;
  for (uint32_t i = 0; i < a->n_ra_regions; i++)
    if (a->ra_regions[i].region == sp->region) return sp->ra_state = i + 1;
  if (a->n_ra_regions >= IOSR_RA_STATES_MAX) return sp->ra_state = a->n_ra_regions;
  if (a->n_ra_regions == a->cap_ra_regions) {
    uint32_t nc = a->cap_ra_regions ? a->cap_ra_regions * 2 : 8;
    iosr_ra_region *nv = realloc(a->ra_regions, nc * sizeof *nv);
    if (!nv) return 0;
    a->ra_regions = nv;
    a->cap_ra_regions = nc;
  }
  state_init(a, &a->ra_regions[a->n_ra_regions], sp->region);
  return sp->ra_state = ++a->n_ra_regions;
}

iosr_ra_region *iosr_ra_state(iosr_app *a, uint32_t rstate) {
  return rstate && rstate <= a->n_ra_regions ? &a->ra_regions[rstate - 1] : NULL;
}

iosr_ra_region *iosr_ra_state_at(iosr_app *a, uint64_t vpn) {
  return iosr_ra_state(a, iosr_ra_state_of(a, iosr_pt_find(&a->pt, vpn)));
}

/* Every region's window back to the app's settings (ra_init/ra_max or the
 * policy changed); the counters stay. */
void iosr_ra_states_reset(iosr_app *a) {
  for (uint32_t i = 0; i < a->n_ra_regions; i++) {
    a->ra_regions[i].next_slot = 0;
    iosr_ra_adaptive_init(&a->ra_regions[i].ra, a->ra.window, a->ra.max);
  }
}

void iosr_ra_states_free(iosr_app *a) {
  free(a->ra_regions);
  a->ra_regions = NULL;
  a->n_ra_regions = a->cap_ra_regions = 0;
}
