/* Move-out (design note section 3, "Moved out", "Moved by the dropper"):
 * once a batch's pages are written, each run of them moves out of the app
 * into the app's graveyard with UFFDIO_MOVE, which the kernel refuses while
 * an event the engine has not read is pending: the move takes exactly the
 * page the table says is there, and no REMOVE over the app's memory is
 * made. An engine in the app's process moves the pages itself; iosrd cannot
 * (the kernel moves only within the caller's address space), so the app's
 * dropper moves them while iosrd reads none of that app's events. The
 * dropper then discards the graveyard range; until it confirms, those pages
 * are charged to the budget and their range is not used again. An event
 * pending or no room: tried again in a later turn (swapout.c).
 *
 * Graveyard pages are allocated first fit in a bitmap of IOSR_GRAVE_PAGES
 * bits. Owned by the engine thread (no locks).
 */
#include <errno.h>
#include <stdint.h>
#include <sys/mman.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/pagemap.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

#define CHUNK 256u /* most pages moved into one graveyard range: several batches fit at once */

static void grave_mark(iosr_app *a, uint64_t k, uint64_t n, int used) {
  for (uint64_t i = k; i < k + n; i++) {
    if (used) a->grave_used[i / 64] |= 1ull << (i % 64);
    else a->grave_used[i / 64] &= ~(1ull << (i % 64));
  }
}

/* The first of n free graveyard pages, now used; -1 when there is no room. */
static int64_t grave_alloc(iosr_app *a, uint64_t n) {
  /* first fit, a word at a time where a word is all used or all free */
  uint64_t run = 0, start = 0;
  for (uint64_t w = 0; w < IOSR_GRAVE_PAGES / 64; w++) {
    uint64_t x = a->grave_used[w];
    if (x == ~0ull) {
      run = 0;
      continue;
    }
    for (uint64_t b = 0; b < 64; b++) {
      if (x == 0 && run + (64 - b) < n) { /* a free rest of the word that does not finish the run */
        if (!run) start = w * 64 + b;
        run += 64 - b;
        break;
      }
      if ((x >> b) & 1) {
        run = 0;
        continue;
      }
      if (!run) start = w * 64 + b;
      if (++run == n) {
        grave_mark(a, start, n, 1);
        return (int64_t)start;
      }
    }
  }
  return -1;
}

/* Asks the dropper to discard graveyard pages [k, k + n), `charged` of them
 * counted against the budget until then; batch b (or none) waits for it. */
static void grave_drop(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t k, uint64_t n, uint64_t charged) {
  iosr_drop *d = iosr_drop_new(a, ++a->drop_seq, a->grave + k, n);
  if (!d) iosr_die("out of memory discarding graveyard pages");
  d->grave = 1;
  d->charged = charged;
  d->batch = b;
  if (b) b->drops_pending++;
  a->grave_pages += charged;
  e->grave_total += charged;
  iosr_swapout_send_drop(e, a, d);
}

/* The n pages from vpn left the app: only in their slots now (all-zero
 * ones hold no slot and read zero). Threads waiting on them retry. */
static void moved_out(iosr_engine *e, iosr_app *a, iosr_job *j, uint64_t vpn, uint64_t n) {
  for (uint64_t v = vpn; v < vpn + n; v++) {
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    if (!p) continue;
    int zero = (p->flags & IOSR_PTE_F_ZEROPG) != 0;
    if (zero) iosr_page_put_slot(e, p);
    iosr_page_set_state(e, a, p, zero ? IOSR_PTE_ZERO : IOSR_PTE_SWAPPED);
    iosr_swapout_count_out(a, j, p, zero);
  }
  e->moveout_pages += n;
  iosr_uffd_wake(a->uffd, vpn << 12, n << 12);
}

int iosr_moveout_usable(const iosr_engine *e, const iosr_app *a) {
  /* the kernel moves only within the caller's own address space
   * (UFFDIO_MOVE: EINVAL across processes): an engine inside the app's
   * process, never iosrd */
  return e->set.moveout && a->grave && a->uffd >= 0 && (a->uffd_features & UFFD_FEATURE_MOVE) && a->pid == getpid() &&
         !e->dropper_moves;
}

int iosr_moveout_by_dropper(const iosr_engine *e, const iosr_app *a) {
  return e->set.moveout && a->grave && a->beacon && a->uffd >= 0 && (a->uffd_features & UFFD_FEATURE_MOVE) &&
         (a->pid != getpid() || e->dropper_moves);
}

/* A graveyard that may hold pages (a daemon that died, a discard undone)
 * is discarded whole before it is used: 0 when it is clean. */
static int grave_clean(iosr_engine *e, iosr_app *a) {
  if (!a->grave_dirty) return 0;
  int64_t k = grave_alloc(a, IOSR_GRAVE_PAGES);
  if (k < 0) return -1; /* ranges still awaiting their discard: later */
  a->grave_dirty = 0;
  grave_drop(e, a, NULL, 0, IOSR_GRAVE_PAGES, 0);
  e->moveout_no_room++;
  return -1;
}

int64_t iosr_moveout_reserve(iosr_engine *e, iosr_app *a, uint64_t n) {
  if (grave_clean(e, a)) return -1;
  int64_t k = grave_alloc(a, n);
  if (k < 0) e->moveout_no_room++;
  return k;
}

/* The dropper moved the pages of bits (page k to graveyard page first + k,
 * k < n) out of a: their graveyard range joins batch b's drops, the rest of
 * the reservation is free again. */
static void dropper_moved(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t first, const uint64_t *bits,
                          uint64_t n, int err) {
  if (first >= IOSR_GRAVE_PAGES || n > IOSR_GRAVE_PAGES - first) return;
  for (uint64_t k = 0; k < n;) {
    int on = iosr_drop_bit(bits, k);
    uint64_t t = k + 1;
    while (t < n && iosr_drop_bit(bits, t) == on) t++;
    if (on) grave_drop(e, a, b, first + k, t - k, t - k);
    else grave_mark(a, first + k, t - k, 0);
    k = t;
  }
  /* a graveyard page found occupied: discarded whole before it is used again */
  if (err == EEXIST) a->grave_dirty = 1;
}

uint64_t iosr_moveout_run(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n, int *why) {
  *why = -EOPNOTSUPP;
  if (!iosr_moveout_usable(e, a)) return 0;
  *why = -ENOSPC;
  if (grave_clean(e, a)) return 0; /* this run waits for it */
  iosr_job *j = b ? b->job : NULL;
  uint64_t out = 0;
  int unlocked = 0;
  *why = 0;
  while (out < n) {
    uint64_t want = n - out < CHUNK ? n - out : CHUNK;
    int64_t k = grave_alloc(a, want);
    if (k < 0) {
      e->moveout_no_room++;
      *why = -ENOSPC;
      break;
    }
    uint64_t done = 0;
    int r = iosr_uffd_move(a->uffd, (a->grave + (uint64_t)k) << 12, (vpn + out) << 12, want << 12, &done);
    uint64_t m = done >> 12;
    if (m) {
      moved_out(e, a, j, vpn + out, m);
      grave_drop(e, a, b, (uint64_t)k, m, m);
      out += m;
    }
    grave_mark(a, (uint64_t)k + m, want - m, 0);
    /* the engine is in the app's process: a graveyard an mlockall locked is
     * unlocked (a page moves only between VMAs both locked or both not) */
    if (r == -EINVAL && !unlocked++ && !munlock((void *)(uintptr_t)(a->grave << 12), (size_t)IOSR_GRAVE_PAGES * 4096))
      continue;
    /* a graveyard page in use (an mlockall populated it, a discard was
     * undone): the whole graveyard is discarded before it is used again */
    if (r == -EEXIST) a->grave_dirty = 1;
    if (r) {
      iosr_debug("app %s: move-out of %#llx+%llu stopped after %llu pages: %d", a->name,
                 (unsigned long long)((vpn + out - m) << 12), (unsigned long long)want, (unsigned long long)m, r);
      e->moveout_refused++;
      *why = r;
      break;
    }
  }
  return out;
}

/* Marks the graveyard's pages [vpn, vpn + n) (virtual pages) used or free;
 * a range not inside it is left alone. */
static void grave_range(iosr_app *a, uint64_t vpn, uint64_t n, int used) {
  if (a->grave && vpn >= a->grave && vpn - a->grave < IOSR_GRAVE_PAGES && n <= IOSR_GRAVE_PAGES - (vpn - a->grave))
    grave_mark(a, vpn - a->grave, n, used);
}

void iosr_moveout_discarded(iosr_engine *e, iosr_app *a, const iosr_drop *d, int err) {
  grave_range(a, d->start_vpn, d->n, 0);
  a->grave_pages -= d->charged;
  e->grave_total -= d->charged;
  /* not discarded (never ran, or refused): whatever is left there is
   * discarded before the graveyard is used again */
  if (err && err != ENOTCONN) a->grave_dirty = 1;
}

void iosr_moveout_hold(iosr_app *a, uint64_t vpn, uint64_t n) { grave_range(a, vpn, n, 1); }

void iosr_moveout_release(iosr_app *a, uint64_t vpn, uint64_t n, int maybe_moved) {
  grave_range(a, vpn, n, 0);
  /* the dropper may have moved pages there before its answer was lost */
  if (maybe_moved) a->grave_dirty = 1;
}

void iosr_moveout_forget(iosr_engine *e, iosr_app *a) {
  e->grave_total -= a->grave_pages;
  a->grave_pages = 0;
}

/* ---- moved by the dropper (design note section 3, "Moved by the dropper") ---- */

static iosr_drop *drop_find(iosr_app *a, uint64_t id) {
  for (iosr_drop *d = a->drops; d; d = d->next)
    if (d->id == id) return d;
  return NULL;
}

/* The app's events are read again. */
void iosr_moveout_hold_end(iosr_engine *e, iosr_app *a) {
  a->hold_drop = 0;
  if (a->uffd >= 0 && !e->events_held) iosr_engine_watch(e, a->uffd, iosr_tag(IOSR_TAG_UFFD, a->id));
}

void iosr_moveout_send_go(iosr_engine *e, iosr_app *a) {
  a->go_pending = 0;
  iosr_m_drop_go g = {.id = a->go_id16};
  iosr_drop *d = a->go_drop ? drop_find(a, a->go_drop) : NULL;
  int any = 0;
  if (d && d->move_to) {
    d->go_sent = 1;
    g.id = d->id;
    g.npages = (uint32_t)d->n;
    memset(d->go, 0, sizeof d->go);
    for (uint64_t k = 0; k < d->n; k++) {
      uint64_t v = d->start_vpn + k;
      iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
      /* still the drop's, at its address, and not discarded by the app */
      if (!p || p->state != IOSR_PTE_DROPPING || p->aux != (uint16_t)d->id || d->vpn[k] != v ||
          (p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP)))
        continue;
      d->go[k / 64] |= 1ull << (k % 64);
      any = 1;
    }
    memcpy(g.bits, d->go, sizeof g.bits);
  }
  iosr_debug("app %s: go %llu: %s", a->name, (unsigned long long)g.id, any ? "pages named" : "none");
  if (!a->conn || iosr_conn_send(e, a->conn, IOSR_M_DROP_GO, 0, 0, &g, sizeof g, NULL, 0)) return;
  if (any) {
    a->hold_drop = d->id;
    iosr_engine_unwatch(e, a->uffd);
  }
}

/* The rest of a dropper's move: a page it did not move (not named, refused,
 * an event first) is still the app's, wherever an event not yet read may
 * have taken it (the kernel's pagemap cannot tell while they wait):
 * resident again, its protection lifted once the events are read; one the
 * app discarded before the mark reads zero. Threads that faulted on the
 * run retry. */
void iosr_moveout_finish(iosr_engine *e, iosr_app *a, iosr_drop *d) {
  iosr_batch *b = d->batch;
  iosr_job *j = b ? b->job : NULL;
  for (uint64_t k = 0; k < d->n + d->nadopted; k++) {
    uint64_t v = k < d->n ? d->vpn[k] : d->adopted[k - d->n];
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    if (!p || !((p->state == IOSR_PTE_DROPPING && p->aux == (uint16_t)d->id) ||
                (k >= d->n && p->state == IOSR_PTE_WRITING)))
      continue;
    if (p->state == IOSR_PTE_DROPPING && (p->flags & (IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP))) {
      iosr_page_put_slot(e, p);
      iosr_page_set_state(e, a, p, IOSR_PTE_ZERO);
      p->flags = 0;
      continue;
    }
    iosr_swapout_cancel_page(e, a, v, p);
    if (j) j->kept_pages++;
  }
  iosr_drop_end(e, a, d);
}

void iosr_moveout_dropper_answered(iosr_engine *e, iosr_app *a, const iosr_m_drop_moved *m) {
  iosr_drop **pp = &a->drops;
  while (*pp && (*pp)->id != m->id) pp = &(*pp)->next;
  iosr_drop *d = *pp;
  if (!d || !d->move_to) {
    iosr_warn("app %s: move confirmation of unknown drop %llu ignored", a->name, (unsigned long long)m->id);
    if (a->hold_drop == m->id) iosr_moveout_hold_end(e, a);
    return;
  }
  if (a->hold_drop != d->id && !d->go_sent) {
    /* named by a daemon that died: the dropper may have moved what that one
     * named, so the kernel's pagemap settles it, as a drop whose answer was
     * lost (this daemon named nothing, and moved nothing: the dropper moves
     * only what the answer to its mark names) */
    iosr_drop_confirmed(e, a, m->id, ENOTCONN);
    return;
  }
  *pp = d->next;
  iosr_batch *b = d->batch;
  iosr_job *j = b ? b->job : NULL;
  uint64_t moved[IOSR_DROP_BITS_WORDS] = {0}, n = d->n < m->npages ? d->n : m->npages, nmoved = 0;
  int pm = a->hold_drop == d->id ? iosr_pagemap_open(a->pid) : -1;
  for (uint64_t k = 0; k < n; k++) {
    uint64_t v = d->start_vpn + k;
    /* only a page the daemon named, and (while nothing the app does is
     * read) gone from the app indeed: a dropper's word alone moves nothing */
    if (!iosr_drop_bit(m->bits, k) || !iosr_drop_bit(d->go, k) || a->hold_drop != d->id || pm < 0 || iosr_pagemap_present(pm, v) != 0)
      continue;
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    if (!p || p->state != IOSR_PTE_DROPPING || p->aux != (uint16_t)d->id) continue;
    int zero = (p->flags & IOSR_PTE_F_ZEROPG) != 0;
    if (zero) iosr_page_put_slot(e, p);
    iosr_page_set_state(e, a, p, zero ? IOSR_PTE_ZERO : IOSR_PTE_SWAPPED);
    iosr_swapout_count_out(a, j, p, zero);
    moved[k / 64] |= 1ull << (k % 64);
    nmoved++;
  }
  if (pm >= 0) close(pm);
  iosr_debug("app %s: moved %llu: %llu pages, err %d", a->name, (unsigned long long)m->id, (unsigned long long)nmoved,
             m->err);
  e->moveout_pages += nmoved;
  if (m->err) e->moveout_refused++;
  dropper_moved(e, a, b, d->move_to - a->grave, moved, d->n, m->err);
  iosr_moveout_finish(e, a, d);
  if (a->hold_drop == m->id) iosr_moveout_hold_end(e, a);
}
