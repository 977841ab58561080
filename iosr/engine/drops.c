/* The drops (design note sections 3 and 9): the records of what the client's
 * dropper is asked to discard, where each of their pages is now (mremap moves
 * them), and what the dropper's marks (common/beacon.h) say it discards, so
 * that each REMOVE is told to be the dropper's or the app's; and how each
 * page of a drop is settled when the dropper answers. A page moved to the
 * addresses of another drop still pending is handed over to it: that drop's
 * dropper may discard it there.
 *
 * Owned by the engine thread (no locks).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/pagemap.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

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
void iosr_drop_rekey(iosr_app *a, uint64_t from, uint64_t to, uint64_t n) {
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
int iosr_drop_may_be_dropper(iosr_app *a, uint64_t vpn, const iosr_pte *p) {
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

void iosr_drop_mark(iosr_app *a, int kind, uint64_t x, uint64_t n) {
  a->win_id = 0; /* a mark ends the run before (one left open: a daemon died in it) */
  if (kind == IOSR_MARK_DROP) {
    a->mark_drop = 0;
    const iosr_drop *m = NULL;
    for (iosr_drop *d = a->drops; d; d = d->next)
      if ((uint16_t)d->id == (uint16_t)x && (!a->mark_drop || d->id < a->mark_drop)) {
        a->mark_drop = d->id;
        a->mark_base = d->start_vpn;
        a->mark_n = d->n;
        m = d;
      }
    /* a dropper that moves waits for the answer; one that discards, for
     * nothing (an unknown drop is answered: its dropper may wait) */
    if (!m || m->move_to) {
      a->go_pending = 1;
      a->go_drop = m ? m->id : 0;
      a->go_id16 = (uint16_t)x;
      if (m) a->mark_drop = 0; /* no run marks follow: no REMOVE of it is the dropper's */
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
uint64_t iosr_drop_window_repeat(iosr_app *a, uint64_t lo, uint64_t hi,
                                    int (*vma_starts)(const iosr_app *, uint64_t)) {
  /* the dropper's REMOVEs lie inside the run: one reaching out of it is the app's */
  if (!a->win_id || lo < a->win_lo || hi > a->win_hi) return lo;
  int repeat = a->rep_hi && lo > a->rep_lo && lo < a->rep_hi && vma_starts(a, lo);
  uint64_t from = repeat ? (hi < a->rep_hi ? hi : a->rep_hi) : lo;
  a->rep_lo = lo;
  if (hi > a->rep_hi) a->rep_hi = hi;
  return from;
}

void iosr_drop_resume_window(iosr_app *a, uint64_t id, uint64_t lo, uint64_t n) {
  a->mark_drop = id;
  a->mark_base = lo;
  a->mark_n = n;
  window_open(a, id, lo, n);
}

/* ---- settling a drop the dropper answered (design note section 3) ---- */

void iosr_drop_end(iosr_engine *e, iosr_app *a, iosr_drop *d) {
  iosr_batch *b = d->batch;
  if (a->win_id == d->id) a->win_id = 0;
  if (a->mark_drop == d->id) a->mark_drop = 0;
  /* threads that faulted on these pages meanwhile retry now */
  if (a->uffd >= 0) {
    iosr_uffd_wake(a->uffd, d->start_vpn << 12, d->n << 12);
    for (uint64_t k = 0; k < d->n + d->nadopted; k++) {
      uint64_t v = k < d->n ? d->vpn[k] : d->adopted[k - d->n];
      if (k >= d->n || v != d->start_vpn + k) iosr_uffd_wake(a->uffd, v << 12, 4096);
    }
  }
  iosr_drop_free(d);
  if (b && --b->drops_pending == 0) iosr_swapout_batch_release(e, b);
}

/* A page of drop d that is still in the app (the kernel's pagemap) is
 * resident again, unless the run of another pending drop covers where it is
 * now: that drop's dropper may have taken it for one of its own pages (it
 * is write-protected) and discard it, so it is handed over, protected and
 * in its slot, and that drop's confirmation settles it. Returns 1 when
 * kept resident. */
static int still_there(iosr_engine *e, iosr_app *a, iosr_drop *d, uint64_t v, iosr_pte *p) {
  /* only a moved page can be where another drop's pages were */
  iosr_drop *o = p->flags & IOSR_PTE_F_MOVED ? iosr_drop_covering(a, v, d) : NULL;
  if (o && iosr_drop_adopt(o, v) == 0) {
    p->aux = (uint16_t)o->id;
    p->flags = (uint8_t)((p->flags & ~(IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) | IOSR_PTE_F_MOVED);
    return 0;
  }
  iosr_swapout_cancel_page(e, a, v, p);
  return 1;
}

/* Settles page p (at v) of drop d: 0 swapped or zero, 1 resident, -1 handed
 * over or not d's. */
static int settle(iosr_engine *e, iosr_app *a, iosr_drop *d, uint64_t v, iosr_pte *p, int err, int *pm) {
  int window = (p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) != 0;
  if (p->state == IOSR_PTE_WRITING) {
    /* handed over when a write wanted it back: it stays out if a run of
     * this drop discarded it (its write makes it SWAPPED), else it is
     * resident again */
    if (window) return -1;
    return still_there(e, a, d, v, p) ? 1 : -1;
  }
  if (err || (p->flags & IOSR_PTE_F_MOVED) || !window) {
    if (*pm < 0) *pm = iosr_pagemap_open(a->pid);
    int pres = iosr_pagemap_present(*pm, v);
    if (pres == 1 || (pres < 0 && !window && !(p->flags & IOSR_PTE_F_RMAPP)))
      return still_there(e, a, d, v, p) ? 1 : -1;
    if (!err && !window && !(p->flags & IOSR_PTE_F_MOVED)) e->inconsistencies++;
  }
  /* a drop that never ran made no REMOVE: without the dropper's marks, any
   * that came was the app's (with them, one in a window is another drop's,
   * whose run the page was moved into) */
  if (!a->beacon && (err == ECANCELED || err == ENOENT) && window) p->flags |= IOSR_PTE_F_RMAPP;
  if (p->flags & (IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP | IOSR_PTE_F_ZEROPG)) {
    /* discarded by the app as well, or all-zero: reads zero from now on */
    iosr_page_put_slot(e, p);
    iosr_page_set_state(e, a, p, IOSR_PTE_ZERO);
  } else {
    iosr_page_set_state(e, a, p, IOSR_PTE_SWAPPED);
  }
  return 0;
}

/* Ends drop d (design note sections 3 and 9). err 0: the dropper
 * discarded the run; err != 0: its madvise stopped part-way (a locked VMA:
 * EINVAL), skipped holes (a munmap or mremap: ENOMEM), found nothing of the
 * run to discard (ENOENT: it did not run), was refused (EAGAIN: the
 * client's queue was full, or no mark could be made), or never ran
 * (ECANCELED: the client came back after a lost connection without having
 * started it).
 *
 * Each page: still there (the kernel's pagemap; asked after an error, for a
 * page mremap moved since the drop was asked for, and for one no REMOVE of
 * the dropper's window covered) -> resident again (or handed over); else
 * discarded: only in its slot, or zero where the app discarded it (a REMOVE
 * of the app's, two in the window) or it was all zero. Taking an error as
 * "nothing dropped" would map zero over the pages it did discard. */
static void drop_finish(iosr_engine *e, iosr_app *a, iosr_drop *d, int err) {
  iosr_batch *b = d->batch;
  if (d->grave) {
    iosr_moveout_discarded(e, a, d, err);
    iosr_drop_free(d);
    if (b && --b->drops_pending == 0) iosr_swapout_batch_release(e, b);
    return;
  }
  iosr_job *j = b ? b->job : NULL;
  int pm = -1;
  uint64_t kept = 0;
  for (uint64_t k = 0; k < d->n + d->nadopted; k++) {
    uint64_t v = k < d->n ? d->vpn[k] : d->adopted[k - d->n];
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    if (!p) continue;
    if (k < d->n ? p->state != IOSR_PTE_DROPPING || p->aux != (uint16_t)d->id
                 : !(p->state == IOSR_PTE_WRITING || (p->state == IOSR_PTE_DROPPING && p->aux == (uint16_t)d->id)))
      continue;
    int zero = (p->flags & IOSR_PTE_F_ZEROPG) != 0;
    int r = settle(e, a, d, v, p, err, &pm);
    if (r == 1) {
      kept++;
      if (j) j->kept_pages++;
    } else if (r == 0) {
      iosr_swapout_count_out(a, j, p, zero);
    }
  }
  if (pm >= 0) close(pm);
  if (err && err != ECANCELED && err != ENOTCONN)
    iosr_warn("app %s: drop of %llu pages at %#llx failed (%s): %llu pages stay resident", a->name,
              (unsigned long long)d->n, (unsigned long long)(d->start_vpn << 12), strerror(err),
              (unsigned long long)kept);
  iosr_drop_end(e, a, d);
}

void iosr_drop_confirmed(iosr_engine *e, iosr_app *a, uint64_t id, int err) {
  iosr_debug("dropped %llu err %d", (unsigned long long)id, err);
  iosr_drop **pp = &a->drops;
  while (*pp && (*pp)->id != id) pp = &(*pp)->next;
  if (!*pp) {
    iosr_warn("app %s: confirmation of unknown drop %llu ignored", a->name, (unsigned long long)id);
    return;
  }
  iosr_drop *d = *pp;
  *pp = d->next;
  /* a drop that moves, answered as one that failed (the dropper stopped, or
   * the daemon before went away) */
  if (d->move_to) iosr_moveout_release(a, d->move_to, d->n, err == ENOTCONN);
  if (d->move_to && d->go_sent) {
    /* answered without the move this daemon named (the dropper stopped):
     * nothing moved, and the kernel's pagemap is not to be asked while the
     * app's events may wait unread */
    int held = a->hold_drop == id;
    iosr_moveout_finish(e, a, d);
    if (held) iosr_moveout_hold_end(e, a);
    return;
  }
  drop_finish(e, a, d, err);
}

void iosr_drop_settle_all(iosr_engine *e, iosr_app *a, uint64_t running, uint64_t started) {
  iosr_drop **pp = &a->drops;
  while (*pp) {
    iosr_drop *d = *pp;
    if (d->id == running) {
      pp = &d->next;
      continue;
    }
    *pp = d->next;
    /* the client starts drops in id order: above `started`, it never ran */
    drop_finish(e, a, d, d->id > started ? ECANCELED : ENOTCONN); /* ran; its confirmation was lost */
  }
}
