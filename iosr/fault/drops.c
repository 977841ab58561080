/* The drops (design note sections 3 and 9): the records of what the client's
 * dropper is asked to discard, where each of their pages is now (mremap moves
 * them), and what the dropper's marks (common/beacon.h) say it discards, so
 * that each REMOVE is told to be the dropper's or the app's. A page moved to
 * the addresses of another drop still pending is handed over to it: that
 * drop's dropper may discard it there.
 *
 * Owned by the engine thread (no locks).
 */
#include <stdlib.h>
#include <string.h>

#include "engine/engine_int.h"

/* A drop of the n pages at start_vpn, linked into the app's drops; its
 * pages' entries carry the low bits of its id (aux), so a page that mremap
 * moved into another drop's run is finished by its own drop only. */
iosr_drop *iosr_drop_new(iosr_app *a, uint64_t id, uint64_t start_vpn, uint64_t n) {
  iosr_drop *d = calloc(1, sizeof *d + n * sizeof d->vpn[0]);
  if (!d) return NULL;
  d->id = id;
  d->start_vpn = start_vpn;
  d->n = n;
  for (uint64_t k = 0; k < n; k++) {
    d->vpn[k] = start_vpn + k;
    iosr_pte *p = iosr_pt_lookup(&a->pt, start_vpn + k, NULL);
    if (p && p->state == IOSR_PTE_DROPPING) p->aux = (uint16_t)id, p->flags &= (uint8_t)~IOSR_PTE_F_MOVED;
  }
  d->next = a->drops;
  a->drops = d;
  return d;
}

/* mremap moved [from, from+n) to [to, ...): the drops follow their pages
 * (design note section 3, "Transitions": a DROPPING page that moves stays
 * DROPPING, write-protected at its new place, and its slot holds it). */
void iosr_swapout_drops_moved(iosr_app *a, uint64_t from, uint64_t to, uint64_t n) {
  for (iosr_drop *d = a->drops; d; d = d->next) {
    for (uint64_t k = 0; k < d->n; k++)
      if (d->vpn[k] >= from && d->vpn[k] < from + n) d->vpn[k] = to + (d->vpn[k] - from);
    for (uint32_t k = 0; k < d->nadopted; k++)
      if (d->adopted[k] >= from && d->adopted[k] < from + n) d->adopted[k] = to + (d->adopted[k] - from);
  }
}

void iosr_drop_free(iosr_drop *d) {
  free(d->adopted);
  free(d);
}

iosr_drop *iosr_drop_covering(iosr_app *a, uint64_t vpn, const iosr_drop *except) {
  for (iosr_drop *d = a->drops; d; d = d->next)
    if (d != except && vpn >= d->start_vpn && vpn < d->start_vpn + d->n) return d;
  return NULL;
}

int iosr_drop_overlaps(const iosr_app *a, uint64_t vpn, uint64_t n) {
  for (const iosr_drop *d = a->drops; d; d = d->next)
    if (vpn < d->start_vpn + d->n && d->start_vpn < vpn + n) return 1;
  return 0;
}

int iosr_drop_adopt(iosr_drop *d, uint64_t vpn) {
  if (d->nadopted == d->capadopted) {
    uint32_t nc = d->capadopted ? d->capadopted * 2 : 8;
    uint64_t *v = realloc(d->adopted, nc * sizeof *v);
    if (!v) return -1;
    d->adopted = v;
    d->capadopted = nc;
  }
  d->adopted[d->nadopted++] = vpn;
  return 0;
}

/* 1 when the moved DROPPING page at vpn is at the address its drop
 * discards, so a REMOVE there may be the dropper's; 0 when it is elsewhere
 * (a REMOVE there is the app's own). */
static int at_drop_address(iosr_app *a, uint64_t vpn, const iosr_pte *p) {
  for (iosr_drop *d = a->drops; d; d = d->next)
    if ((uint16_t)d->id == p->aux)
      for (uint64_t k = 0; k < d->n; k++)
        if (d->vpn[k] == vpn) return vpn == d->start_vpn + k;
  return 0;
}

/* (engine_int.h) A REMOVE over the pages of the run the dropper announced
 * last, read before its next mark, may be the dropper's. */
int iosr_swapout_may_be_dropper(iosr_app *a, uint64_t vpn, const iosr_pte *p) {
  if (a->beacon) return a->win_id && vpn >= a->win_lo && vpn < a->win_hi;
  /* no marks (a client without a beacon area): any REMOVE may be the
   * dropper's, except over a moved page away from its drop's address */
  return !(p->flags & IOSR_PTE_F_MOVED) || at_drop_address(a, vpn, p);
}

/* Opens the window over pages [lo, lo + n) of drop id. */
static void window_open(iosr_app *a, uint64_t id, uint64_t lo, uint64_t n) {
  a->win_id = id;
  a->win_lo = lo;
  a->win_hi = lo + n;
  a->rep_lo = a->rep_hi = 0;
}

void iosr_swapout_mark(iosr_app *a, int kind, uint64_t x, uint64_t n) {
  a->win_id = 0; /* a mark ends the run before (one left open: a daemon died in it) */
  if (kind == IOSR_MARK_DROP) {
    a->mark_drop = 0;
    for (iosr_drop *d = a->drops; d; d = d->next)
      if ((uint16_t)d->id == (uint16_t)x && (!a->mark_drop || d->id < a->mark_drop)) {
        a->mark_drop = d->id;
        a->mark_base = d->start_vpn;
        a->mark_n = d->n;
      }
  } else if (kind == IOSR_MARK_RUN && a->mark_drop && x + n <= a->mark_n) {
    window_open(a, a->mark_drop, a->mark_base + x, n);
  }
}

/* (engine_int.h) The kernel's madvise walks the run's VMAs in address
 * order; each REMOVE drops the mmap lock, and when a VMA was split
 * meanwhile the zap stops at the new VMA end and the walk goes on from
 * there with a new REMOVE: every REMOVE of the dropper's starts after the
 * one before began, at or before the end of what they covered. One that
 * starts inside what they covered repeats those pages (one split: the
 * tail of the last; several: one REMOVE per part, each ending where its
 * VMA ends). */
uint64_t iosr_swapout_window_repeat(iosr_app *a, uint64_t lo, uint64_t hi,
                                    int (*vma_starts)(const iosr_app *, uint64_t)) {
  /* the dropper's REMOVEs lie inside the run: one reaching out of it is the app's */
  if (!a->win_id || lo < a->win_lo || hi > a->win_hi) return lo;
  int repeat = a->rep_hi && lo > a->rep_lo && lo < a->rep_hi && vma_starts(a, lo);
  uint64_t from = repeat ? (hi < a->rep_hi ? hi : a->rep_hi) : lo;
  a->rep_lo = lo;
  if (hi > a->rep_hi) a->rep_hi = hi;
  return from;
}

void iosr_swapout_resume_window(iosr_app *a, uint64_t id, uint64_t lo, uint64_t n) {
  a->mark_drop = id;
  a->mark_base = lo;
  a->mark_n = n;
  window_open(a, id, lo, n);
}

