/* Read-ahead state per region of an app, and per zone of a large region
 * (design note section 6, `adaptive`: a window per region). The states live
 * in the daemon's memory, in an array per app found by (region id, zone)
 * through an open-addressing hash; a span remembers the state it used last
 * (iosr_span.ra_state), so the fault path usually finds it without a search.
 * The pieces of a region split by munmap or mremap share its states. Owned by
 * the engine thread.
 */
#include <stdlib.h>

#include "common/mix.h"
#include "engine/engine_int.h"

/* More zones than this share the last state: an app that faults in
 * thousands of zones gets one window for the rest rather than unbounded
 * daemon memory (16384 states: about 1.5 MiB). */
#define IOSR_RA_STATES_MAX 16384u

static void state_init(const iosr_app *a, iosr_ra_region *rs, uint32_t region, uint64_t zone) {
  *rs = (iosr_ra_region){.region = region, .zone = zone, .probe_head = -1, .probe_tail = -1};
  iosr_ra_adaptive_init(&rs->ra, a->ra.window, a->ra.max);
}

static uint32_t slot_of(uint32_t region, uint64_t zone, uint32_t mask) {
  return (uint32_t)iosr_mix(((uint64_t)region << 40) ^ zone) & mask;
}

static int rehash(iosr_app *a, uint32_t cap) {
  uint32_t *h = calloc(cap, sizeof *h);
  if (!h) return -1;
  for (uint32_t i = 0; i < a->n_ra_regions; i++) {
    uint32_t k = slot_of(a->ra_regions[i].region, a->ra_regions[i].zone, cap - 1);
    while (h[k]) k = (k + 1) & (cap - 1);
    h[k] = i + 1;
  }
  free(a->ra_hash);
  a->ra_hash = h;
  a->ra_hash_cap = cap;
  return 0;
}

static uint32_t add_state(iosr_app *a, uint32_t region, uint64_t zone) {
  if (a->n_ra_regions >= IOSR_RA_STATES_MAX) return a->n_ra_regions;
  if (a->n_ra_regions == a->cap_ra_regions) {
    uint32_t nc = a->cap_ra_regions ? a->cap_ra_regions * 2 : 8;
    iosr_ra_region *nv = realloc(a->ra_regions, nc * sizeof *nv);
    if (!nv) return 0;
    a->ra_regions = nv;
    a->cap_ra_regions = nc;
  }
  /* the hash stays at most half full */
  if (2 * (a->n_ra_regions + 1) > a->ra_hash_cap && rehash(a, a->ra_hash_cap ? a->ra_hash_cap * 2 : 16)) return 0;
  state_init(a, &a->ra_regions[a->n_ra_regions], region, zone);
  uint32_t k = slot_of(region, zone, a->ra_hash_cap - 1);
  while (a->ra_hash[k]) k = (k + 1) & (a->ra_hash_cap - 1);
  a->ra_hash[k] = ++a->n_ra_regions;
  return a->n_ra_regions;
}

uint64_t iosr_ra_region_zone(const iosr_engine *e, uint64_t vpn) {
  uint64_t pages = e->set.ra_zone >> 12;
  return pages ? vpn / pages : 0;
}

/* 1 + index of the state of vpn's zone of sp's region, created at first use;
 * 0 only when out of memory (read-ahead then goes on with the app's
 * settings, without a region's state). */
uint32_t iosr_ra_region_of(const iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn) {
  if (!sp) return 0;
  uint64_t zone = iosr_ra_region_zone(e, vpn);
  iosr_ra_region *last = iosr_ra_region_get(a, sp->ra_state);
  if (last && last->region == sp->region && last->zone == zone) return sp->ra_state;
  if (a->ra_hash_cap) {
    uint32_t k = slot_of(sp->region, zone, a->ra_hash_cap - 1);
    for (; a->ra_hash[k]; k = (k + 1) & (a->ra_hash_cap - 1)) {
      iosr_ra_region *rs = &a->ra_regions[a->ra_hash[k] - 1];
      if (rs->region == sp->region && rs->zone == zone) return sp->ra_state = a->ra_hash[k];
    }
  }
  return sp->ra_state = add_state(a, sp->region, zone);
}

iosr_ra_region *iosr_ra_region_get(iosr_app *a, uint32_t rstate) {
  return rstate && rstate <= a->n_ra_regions ? &a->ra_regions[rstate - 1] : NULL;
}

iosr_ra_region *iosr_ra_region_at(const iosr_engine *e, iosr_app *a, uint64_t vpn) {
  return iosr_ra_region_get(a, iosr_ra_region_of(e, a, iosr_pt_find(&a->pt, vpn), vpn));
}

/* Every window back to the app's settings (ra_init/ra_max or the policy
 * changed); the counters stay. */
void iosr_ra_region_reset_all(iosr_app *a) {
  for (uint32_t i = 0; i < a->n_ra_regions; i++) {
    a->ra_regions[i].next_slot = 0;
    iosr_ra_adaptive_init(&a->ra_regions[i].ra, a->ra.window, a->ra.max);
  }
}

void iosr_ra_region_free_all(iosr_app *a) {
  free(a->ra_regions);
  free(a->ra_hash);
  a->ra_regions = NULL;
  a->ra_hash = NULL;
  a->n_ra_regions = a->cap_ra_regions = a->ra_hash_cap = 0;
}
