/* Probe pages (design note section 6): read-ahead pages kept unmapped in a
 * small cache so that using them shows up as a fault. A hit feeds the
 * policy's window (adaptive: its window record's hit rate; cluster/vma:
 * Linux's hit counter); a probe still untouched after the horizon, or when
 * its app is reclaimed, is a miss. Hits and misses also count, probe-weighted,
 * in the region's read-ahead state.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"

int iosr_probe_init(iosr_engine *e) {
  uint32_t cap = e->set.probe_cache > 65535 ? 65535 : e->set.probe_cache;
  e->probe_cap = cap;
  e->probe_free = -1;
  if (!cap) return 0;
  e->probes = calloc(cap, sizeof *e->probes);
  if (!e->probes) return -1;
  for (uint32_t i = cap; i-- > 0;) {
    e->probes[i].next = e->probe_free;
    e->probes[i].used = 0;
    e->probe_free = (int32_t)i;
  }
  return 0;
}

void iosr_probe_destroy(iosr_engine *e) {
  for (uint32_t i = 0; i < e->probe_cap; i++) free(e->probes[i].data);
  free(e->probes);
  e->probes = NULL;
  e->probe_cap = 0;
}

/* Out of its app's FIFO and its region's. */
static void unlink_app(iosr_engine *e, iosr_app *a, int32_t i) {
  iosr_probe *pr = &e->probes[i];
  iosr_ra_region *rs = iosr_ra_region_get(a, pr->rstate);
  if (rs) {
    if (pr->rprev >= 0) e->probes[pr->rprev].rnext = pr->rnext;
    else rs->probe_head = pr->rnext;
    if (pr->rnext >= 0) e->probes[pr->rnext].rprev = pr->rprev;
    else rs->probe_tail = pr->rprev;
  }
  pr->rstate = 0;
  if (pr->prev >= 0) e->probes[pr->prev].next = pr->next;
  else a->probe_head = pr->next;
  if (pr->next >= 0) e->probes[pr->next].prev = pr->prev;
  else a->probe_tail = pr->prev;
  a->nprobes--;
}

static void release(iosr_engine *e, int32_t i) {
  iosr_probe *pr = &e->probes[i];
  pr->used = 0;
  pr->next = e->probe_free;
  e->probe_free = i;
}

/* A record for a window of `probes` probes; its id (never 0) names it. */
uint32_t iosr_probe_window(iosr_engine *e, uint32_t app, unsigned probes, uint32_t rstate) {
  if (!probes) return 0;
  uint32_t id = ++e->next_window;
  if (!id) id = ++e->next_window;
  iosr_window *w = &e->windows[id % IOSR_WINDOWS];
  w->id = id;
  w->app = app;
  w->probes = (uint16_t)(probes > 65535 ? 65535 : probes);
  w->hits = w->resolved = 0;
  w->live = 1;
  w->rstate = rstate;
  return id;
}

/* One probe of window `win` resolved: hit, miss, or (hit < 0) no verdict
 * (evicted for room: not evidence either way). Under adaptive the window's
 * hit rate decides its region's next window as soon as the outcome is
 * certain: double, keep or halve (iosr_ra_rate_verdict). */
static void window_resolve(iosr_engine *e, iosr_app *a, uint32_t win, int hit) {
  if (!win) return;
  iosr_window *w = &e->windows[win % IOSR_WINDOWS];
  if (!w->live || w->id != win || w->app != a->id) return;
  if (hit < 0) {
    if (w->probes) w->probes--;
  } else {
    w->hits += hit != 0;
    w->resolved++;
  }
  if (e->set.readahead != IOSR_RA_ADAPTIVE) {
    if (w->resolved >= w->probes) w->live = 0;
    return;
  }
  unsigned grow = e->set.ra_grow_pct, shrink = e->set.ra_shrink_pct < grow ? e->set.ra_shrink_pct : grow;
  int v = iosr_ra_rate_verdict(w->probes, w->hits, w->resolved - w->hits, grow, shrink);
  if (v == 2) return;
  w->live = 0;
  iosr_ra_region *rs = iosr_ra_region_get(a, w->rstate);
  if (rs && v > 0) iosr_ra_adaptive_hit(&rs->ra);
  /* at most one halving per fault of the region: the misses a reclaim
   * resolves all at once are one piece of evidence, not one per window */
  if (rs && v < 0 && rs->shrunk_at != rs->majors + 1) {
    iosr_ra_adaptive_miss(&rs->ra);
    rs->shrunk_at = rs->majors + 1;
  }
}

static void feed(iosr_engine *e, iosr_app *a, uint64_t vpn, uint32_t weight, int hit) {
  iosr_ra_region *rs = iosr_ra_region_at(e, a, vpn);
  if (rs) {
    rs->hits += hit ? weight : 0;
    rs->needed_pages += hit ? weight : 0;
    rs->misses += hit ? 0 : weight;
  }
  if (hit) {
    a->st.ra_hits += weight;
    switch (e->set.readahead) {
      case IOSR_RA_CLUSTER: e->cluster_ra.hits += weight; break;
      case IOSR_RA_VMA: {
        /* as Linux's swap cache hit: count it and remember where it was */
        iosr_span *sp = iosr_pt_find(&a->pt, vpn);
        if (sp) {
          sp->ra_hits += weight;
          sp->ra_prev = vpn;
        }
        break;
      }
      default: break; /* adaptive: the window record decides (window_resolve) */
    }
  } else {
    a->st.ra_misses += weight;
  }
}

/* Maps a probe's page at vpn: write-protected, so that it keeps its slot
 * (CLEAN), unless a pending drop's dropper may discard it there (design
 * note section 3). *clean tells which. */
static int map_probe(iosr_engine *e, iosr_app *a, uint64_t vpn, const uint8_t *data, int *clean) {
  uint64_t done;
  *clean = iosr_swapin_may_clean(e, a, vpn, 1);
  return *clean ? iosr_uffd_copy_wp(a->uffd, vpn << 12, data, 4096, &done)
                : iosr_uffd_copy(a->uffd, vpn << 12, data, 4096, 1, &done);
}

/* The entry of a probe's page just mapped (r: the copy's result, 0 or
 * -EEXIST): CLEAN holding its slot, or PRESENT. */
static void mapped(iosr_engine *e, iosr_app *a, iosr_pte *p, int r, int clean) {
  clean = clean && r == 0;
  if (!clean) iosr_page_put_slot(e, p);
  iosr_page_set_state(e, a, p, clean ? IOSR_PTE_CLEAN : IOSR_PTE_PRESENT);
  p->flags = 0;
  p->age = (uint32_t)e->tick;
}

/* Maps probe i's page into the app (verdict: 0 miss, -1 none) and frees the
 * probe; the page stays SWAPPED if the copy cannot be made now. */
static void install(iosr_engine *e, iosr_app *a, iosr_pte *p, int32_t i, int verdict) {
  iosr_probe *pr = &e->probes[i];
  uint64_t vpn = pr->vpn;
  int clean = 0;
  /* mapped only if the budget has room for it and for the fault being
   * served (expiry runs first in a swap-in): else it stays in its slot
   * (design note section 9, "Memory budget") */
  int r = !a->forked && iosr_budget_room(e) <= 1 ? -ENOSPC : map_probe(e, a, vpn, pr->data, &clean);
  if (verdict == 0) feed(e, a, vpn, pr->weight, 0);
  window_resolve(e, a, pr->win, verdict);
  unlink_app(e, a, i);
  release(e, i);
  iosr_page_set_state(e, a, p, IOSR_PTE_SWAPPED);
  if (r == 0 || r == -EEXIST) mapped(e, a, p, r, clean);
}

int iosr_probe_add(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t slot, uint32_t weight, uint32_t win,
                   const uint8_t *data, int trigger, uint64_t next_slot) {
  if (e->probe_free < 0 && a->probe_head >= 0) {
    /* full: this app's oldest probe is mapped and leaves without a verdict */
    int32_t old = a->probe_head;
    iosr_pte *p = iosr_pt_lookup(&a->pt, e->probes[old].vpn, NULL);
    if (p && p->state == IOSR_PTE_CACHED && p->aux == (uint16_t)old) install(e, a, p, old, -1);
    else {
      unlink_app(e, a, old);
      release(e, old);
    }
  }
  if (e->probe_free < 0) return -1;
  int32_t i = e->probe_free;
  iosr_probe *pr = &e->probes[i];
  if (!pr->data && !(pr->data = malloc(4096))) return -1;
  e->probe_free = pr->next;
  memcpy(pr->data, data, 4096);
  pr->app = a->id;
  pr->vpn = vpn;
  pr->slot = slot;
  pr->weight = weight;
  pr->win = win;
  pr->rstate = iosr_ra_region_of(e, a, iosr_pt_find(&a->pt, vpn), vpn);
  iosr_ra_region *rs = iosr_ra_region_get(a, pr->rstate);
  pr->issued_major = rs ? rs->majors : 0;
  pr->rnext = -1;
  pr->rprev = rs ? rs->probe_tail : -1;
  if (rs && rs->probe_tail >= 0) e->probes[rs->probe_tail].rnext = i;
  else if (rs) rs->probe_head = i;
  if (rs) rs->probe_tail = i;
  pr->trigger = trigger;
  pr->next_slot = next_slot;
  pr->used = 1;
  pr->next = -1;
  pr->prev = a->probe_tail;
  if (a->probe_tail >= 0) e->probes[a->probe_tail].next = i;
  else a->probe_head = i;
  a->probe_tail = i;
  a->nprobes++;
  iosr_pte *p = iosr_pt_lookup(&a->pt, vpn, NULL);
  iosr_page_set_state(e, a, p, IOSR_PTE_CACHED);
  p->flags = 0;
  p->aux = (uint16_t)i;
  return 0;
}

void iosr_probe_drop(iosr_engine *e, iosr_app *a, iosr_pte *p, int miss) {
  int32_t i = p->aux;
  iosr_probe *pr = &e->probes[i];
  if (miss) {
    feed(e, a, pr->vpn, pr->weight, 0);
    window_resolve(e, a, pr->win, 0);
  }
  unlink_app(e, a, i);
  release(e, i);
  iosr_page_set_state(e, a, p, IOSR_PTE_SWAPPED);
}

/* A probe page that a thread was already waiting for when its read
 * completed: mapped at once, and a hit. */
void iosr_probe_used(iosr_engine *e, iosr_app *a, uint64_t vpn, uint32_t weight, uint32_t win, int trigger,
                     uint64_t next) {
  feed(e, a, vpn, weight, 1);
  window_resolve(e, a, win, 1);
  if (trigger) iosr_swapin_continue(e, a, vpn, next);
}

void iosr_probe_hit(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p, int *copied) {
  int32_t i = p->aux;
  iosr_probe *pr = &e->probes[i];
  *copied = 0;
  int clean;
  int r = map_probe(e, a, vpn, pr->data, &clean);
  if (r == -EAGAIN) return;
  *copied = 1;
  a->st.probe_faults++;
  uint32_t weight = pr->weight, win = pr->win;
  int trig = pr->trigger;
  uint64_t next = pr->next_slot;
  unlink_app(e, a, i);
  release(e, i);
  if (r == 0 || r == -EEXIST) {
    if (r == -EEXIST) iosr_uffd_wake(a->uffd, vpn << 12, 4096);
    mapped(e, a, p, r, clean);
    feed(e, a, vpn, weight, 1);
    window_resolve(e, a, win, 1);
    if (trig) iosr_swapin_continue(e, a, vpn, next);
  } else {
    /* ENOENT: unmapped meanwhile; keep the slot, the UNMAP event frees it */
    iosr_page_set_state(e, a, p, IOSR_PTE_SWAPPED);
  }
}

/* A probe untouched after H more major faults of its region is a miss, H =
 * max(ra_probe_horizon, swapped pages / 32), counting the swapped pages the
 * app had when its swap-in began: an app touching a large swapped
 * hot set in random order reaches a probe only after a good part of the set
 * came in, and must be given that long (design note section 6). The clock is
 * the region's own: faults elsewhere in the app say nothing about whether
 * this region's read-ahead is used. Called at a major fault of region rstate. */
void iosr_probe_expire(iosr_engine *e, iosr_app *a, uint32_t rstate) {
  iosr_ra_region *rs;
  uint64_t h = e->set.ra_probe_horizon, h2 = a->swapped_peak / 32;
  if (h2 > h) h = h2;
  /* looked up again each turn: mapping a probe may add a region's state */
  while ((rs = iosr_ra_region_get(a, rstate)) && rs->probe_head >= 0) {
    int32_t i = rs->probe_head;
    iosr_probe *pr = &e->probes[i];
    if (pr->issued_major + h > rs->majors) break;
    iosr_pte *p = iosr_pt_lookup(&a->pt, pr->vpn, NULL);
    if (p && p->state == IOSR_PTE_CACHED && p->aux == (uint16_t)i) {
      /* a miss for the window rule, but the data was read: map it rather
       * than read it again should the app want it after all (as Linux keeps
       * read-ahead pages in its swap cache) */
      install(e, a, p, i, 0);
    } else {
      unlink_app(e, a, i);
      release(e, i);
    }
  }
}

void iosr_probe_rekey(iosr_engine *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t n) {
  for (int32_t i = a->probe_head; i >= 0; i = e->probes[i].next) {
    iosr_probe *pr = &e->probes[i];
    if (pr->vpn >= from && pr->vpn < from + n) pr->vpn = to + (pr->vpn - from);
  }
}
