/* Resuming a client after its connection or its daemon was lost (design note
 * section 12). The client brings back its userfaultfd and its page-table
 * memfd. Same engine (the connection dropped): the app is re-attached. New
 * engine (the daemon died and was restarted): the page table is validated,
 * every slot claimed (a slot claimed twice poisons the page: SIGBUS, never
 * zero), interrupted transitions are finished from the kernel's view of which
 * pages are present, write protection is lifted and every waiter woken so that
 * blocked faults reach the new daemon.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/beacon.h"
#include "common/clock.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/pagemap.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

/* 1. Same engine: the app of h's token is still here, detached, and takes
 * connection c again. 0, or an errno with msg, when it is there; -1 when it
 * is not. */
static int reattach(iosr_engine *e, iosr_conn *c, const iosr_m_hello *h, int uffd, int ptfd, char *msg,
                    size_t cap) {
  for (uint32_t i = 1; i < IOSR_MAX_APPS; i++) {
    iosr_app *a = iosr_engine_app(e, i);
    if (!a || a->state != IOSR_APP_ACTIVE || a->forked || a->token != h->token) continue;
    if (a->conn || a->pid != c->pid) {
      snprintf(msg, cap, "app %s is attached to another connection", a->name);
      return EBUSY;
    }
    a->conn = c;
    c->app = a->id;
    close(uffd);
    close(ptfd);
    /* the client undid the drops it had not begun and names the one its
     * dropper is in; the rest ran, their confirmations lost with the
     * connection: every other drop ends by what the kernel holds */
    iosr_drop_settle_all(e, a, h->drop_id, h->drop_started);
    snprintf(msg, cap, "re-attached %s", a->name);
    iosr_info("app %s (pid %d) re-attached", a->name, (int)a->pid);
    return 0;
  }
  return -1;
}

/* 2. A new engine: the app's record, from hello h and its page table
 * (ptfd), attached to c, in *out. 0, or an errno with msg. */
static int new_app(iosr_engine *e, iosr_conn *c, const iosr_m_hello *h, int uffd, int ptfd, char *msg, size_t cap,
                   iosr_app **out) {
  if (iosr_engine_find_app(e, h->name)) {
    snprintf(msg, cap, "an app named %s is connected", h->name);
    return EEXIST;
  }
  uint32_t id = iosr_engine_new_app_id(e);
  iosr_app *a = id ? calloc(1, sizeof *a) : NULL;
  if (!a) {
    snprintf(msg, cap, "too many apps");
    return EAGAIN;
  }
  if (iosr_pt_attach(&a->pt, ptfd)) {
    free(a);
    snprintf(msg, cap, "page table does not validate");
    return EINVAL;
  }
  if (a->pt.hdr->token != h->token) {
    a->pt.fd = -1; /* the caller closes it */
    iosr_pt_destroy(&a->pt);
    free(a);
    snprintf(msg, cap, "page table belongs to another app");
    return EINVAL;
  }
  a->id = id;
  a->state = IOSR_APP_ACTIVE;
  snprintf(a->name, sizeof a->name, "%s", h->name);
  a->pid = c->pid;
  a->token = h->token;
  a->uffd = uffd;
  a->beacon = iosr_beacon_page(h->beacon);
  a->conn = c;
  a->probe_head = a->probe_tail = -1;
  a->bg_since_ns = iosr_now_ns();
  iosr_ra_adaptive_init(&a->ra, e->set.ra_init, e->set.ra_max);
  iosr_extmap_init(&a->ext);
  a->uffd_features = (h->features & ~IOSR_HELLO_TRIMS) | IOSR_UFFD_REQUIRED;
  a->trims = (h->features & IOSR_HELLO_TRIMS) != 0;
  a->uffd_features &= ~IOSR_HELLO_GRAVEYARD;
  if ((h->features & IOSR_HELLO_GRAVEYARD) && a->beacon && (a->uffd_features & UFFD_FEATURE_MOVE)) {
    a->grave = a->beacon + IOSR_BEACON_PAGES;
    a->grave_dirty = 1; /* the old daemon's moved pages may be there */
  }
  e->apps[id] = a;
  c->app = id;
  a->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
  if (a->pidfd >= 0) iosr_engine_watch(e, a->pidfd, iosr_tag(IOSR_TAG_PIDFD, id));
  *out = a;
  return 0;
}

/* Page v of a (entry p) as the dead daemon's table left it: its slot
 * claimed (a slot claimed twice poisons the page), its state settled from
 * what the kernel holds (pagemap pm). in_run: v is in the run of the drop
 * the dropper is in. */
static void restore_page(iosr_engine *e, iosr_app *a, iosr_pte *p, uint64_t v, int pm, int in_run,
                         uint64_t *claimed, uint64_t *conflicts) {
  int st = p->state;
  if (st > IOSR_PTE_CLEAN) st = IOSR_PTE_POISONED;
  int clean = st == IOSR_PTE_CLEAN;
  /* every protection is lifted below: a CLEAN page is PRESENT again, its
   * slot freed (design note section 3) */
  if (clean) st = IOSR_PTE_PRESENT;
  p->state = IOSR_PTE_ZERO; /* counters are rebuilt through set_state */
  int pres = iosr_pagemap_present(pm, v);
  int has = (clean || (st >= IOSR_PTE_WRITING && st <= IOSR_PTE_CACHED)) && !(p->flags & IOSR_PTE_F_ZEROPG) &&
            p->slot != IOSR_PTE_NO_SLOT;
  int in_drop = in_run && st == IOSR_PTE_DROPPING;
  if (has) {
    if (iosr_slot_claim(&e->slots, e->set.slot == IOSR_SLOT_PROCESS, p->slot, a->id, v)) {
      (*conflicts)++;
      iosr_page_set_state(e, a, p, pres == 1 ? IOSR_PTE_PRESENT : IOSR_PTE_POISONED);
      p->flags = 0;
      p->slot = IOSR_PTE_NO_SLOT; /* someone else's: never to be freed or read by this entry */
      if (pres != 1 && (a->uffd_features & UFFD_FEATURE_POISON)) iosr_uffd_poison(a->uffd, v << 12, 4096);
      return;
    }
    (*claimed)++;
  }
  int ns;
  if (in_drop) ns = IOSR_PTE_DROPPING; /* the dropper finishes it; its REMOVE events count */
  else if (st == IOSR_PTE_ZERO || st == IOSR_PTE_PRESENT) ns = pres == 0 ? IOSR_PTE_ZERO : pres == 1 ? IOSR_PTE_PRESENT : st;
  else if (st == IOSR_PTE_POISONED) ns = IOSR_PTE_POISONED;
  /* a WRITING page is mapped until the app discards it (a REMOVE the dead
   * daemon read but did not record); its write may not have completed */
  else if (st == IOSR_PTE_WRITING && pres == 0 && has && (p->flags & IOSR_PTE_F_RM1) &&
           !(p->flags & IOSR_PTE_F_RMX))
    ns = IOSR_PTE_SWAPPED; /* the dropper discarded it: its slot, if the write got there (checksum) */
  else if (st == IOSR_PTE_WRITING) ns = pres == 0 ? IOSR_PTE_ZERO : IOSR_PTE_PRESENT;
  else if (pres == 1) ns = IOSR_PTE_PRESENT;
  else if (st == IOSR_PTE_DROPPING && (p->flags & (IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP))) ns = IOSR_PTE_ZERO;
  else if (p->flags & IOSR_PTE_F_ZEROPG) ns = IOSR_PTE_ZERO;
  else ns = IOSR_PTE_SWAPPED;
  if (ns != IOSR_PTE_SWAPPED && ns != IOSR_PTE_DROPPING) {
    if (has) iosr_slot_put(&e->slots, p->slot);
    p->slot = IOSR_PTE_NO_SLOT;
  }
  iosr_page_set_state(e, a, p, ns);
  if (ns != IOSR_PTE_DROPPING) p->flags = 0;
}

/* Every page of a's table through restore_page; [dlo, dhi): the run of the
 * drop its dropper is in. */
static void restore_pages(iosr_engine *e, iosr_app *a, uint64_t dlo, uint64_t dhi, uint64_t *claimed,
                          uint64_t *conflicts) {
  int pm = iosr_pagemap_open(a->pid);
  for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
    iosr_span *sp = &a->pt.spans[i];
    sp->ra_hits = 0;
    sp->ra_state = 0;
    if (sp->region > a->next_region) a->next_region = sp->region;
    for (uint64_t v = sp->start; v < sp->start + sp->n; v++)
      restore_page(e, a, iosr_pt_pte(&a->pt, sp, v), v, pm, v >= dlo && v < dhi, claimed, conflicts);
  }
  if (pm >= 0) close(pm);
}

/* The drop h names, the one its dropper is in (pages [dlo, dhi)), if any. */
static void restore_drop(iosr_app *a, const iosr_m_hello *h, uint64_t dlo, uint64_t dhi) {
  int grave_drop = h->drop_id && a->grave && dlo >= a->grave && dhi <= a->grave + IOSR_GRAVE_PAGES && dhi > dlo;
  if (grave_drop) {
    /* a discard of moved-out pages (engine/moveout.c): nothing of the app's;
     * that range is not used again before it is confirmed */
    iosr_drop *d = iosr_drop_new(a, h->drop_id, dlo, dhi - dlo);
    if (d) {
      d->grave = 1;
      iosr_moveout_hold(a, dlo, dhi - dlo);
    }
    if (h->drop_id > a->drop_seq) a->drop_seq = h->drop_id;
  } else if (h->drop_id) {
    /* its pages are at the run's addresses: a DROPPING page moved away
     * before the old daemon died was settled above from what the kernel holds */
    iosr_drop *d = iosr_drop_new(a, h->drop_id, dlo, dhi - dlo);
    if (d && h->drop_id > a->drop_seq) a->drop_seq = h->drop_id;
    /* a dropper that moves has moved all it will (the hello waited for it)
     * and makes no REMOVE; one that discards is in it, maybe past its
     * marks: its window is open */
    uint64_t g = h->drop_grave >> 12;
    if (d && h->drop_grave && a->grave && g >= a->grave && g + (dhi - dlo) <= a->grave + IOSR_GRAVE_PAGES)
      d->move_to = g;
    else iosr_drop_resume_window(a, h->drop_id, dlo, dhi - dlo);
  }
}

/* Lifts write protection (except where the dropper still works, [dlo, dhi))
 * and wakes every waiter: faults read by the dead daemon are issued again. */
static void unprotect_all(iosr_app *a, uint64_t dlo, uint64_t dhi) {
  for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
    iosr_span *sp = &a->pt.spans[i];
    uint64_t lo = sp->start, hi = sp->start + sp->n;
    if (dhi > dlo && dlo < hi && dhi > lo) {
      if (dlo > lo) iosr_uffd_wp(a->uffd, lo << 12, (dlo - lo) << 12, 0);
      if (dhi < hi) iosr_uffd_wp(a->uffd, dhi << 12, (hi - dhi) << 12, 0);
    } else {
      iosr_uffd_wp(a->uffd, lo << 12, (hi - lo) << 12, 0);
    }
    iosr_uffd_wake(a->uffd, lo << 12, (hi - lo) << 12);
  }
}

int iosr_resume_app(iosr_engine *e, iosr_conn *c, const iosr_m_hello *h, int uffd, int ptfd, char *msg,
                    size_t cap) {
  if (iosr_field_str(h->name, sizeof h->name)) {
    snprintf(msg, cap, "unterminated name");
    return EPROTO;
  }
  int r = reattach(e, c, h, uffd, ptfd, msg, cap);
  if (r >= 0) return r;
  iosr_app *a;
  if ((r = new_app(e, c, h, uffd, ptfd, msg, cap, &a))) return r;
  uint64_t dlo = h->drop_id ? h->drop_start >> 12 : 0, dhi = h->drop_id ? (h->drop_start + h->drop_len) >> 12 : 0;
  uint64_t claimed = 0, conflicts = 0;
  restore_pages(e, a, dlo, dhi, &claimed, &conflicts);
  restore_drop(a, h, dlo, dhi);
  unprotect_all(a, dlo, dhi);
  iosr_engine_watch(e, uffd, iosr_tag(IOSR_TAG_UFFD, a->id));
  iosr_warn("app %s (pid %d) resumed: %llu swapped slots recovered%s", a->name, (int)a->pid,
            (unsigned long long)claimed, conflicts ? ", some pages lost (poisoned)" : "");
  snprintf(msg, cap, "resumed %s: %llu slots, %llu conflicts", a->name, (unsigned long long)claimed,
           (unsigned long long)conflicts);
  return 0;
}

/* A forked child of a resumed app: its page table died with the old daemon,
 * so which of its pages were swapped is unknown. Its present pages stay; any
 * page it faults on gets SIGBUS (poisoned) rather than zero: loud, never
 * silent. */
void iosr_resume_orphan(iosr_engine *e, uint32_t parent, int uffd) {
  iosr_app *p = iosr_engine_app(e, parent);
  iosr_app *c = p ? iosr_event_child_app(e, p, uffd, "orphan") : NULL;
  if (!p) close(uffd);
  if (!c) return;
  c->orphan = 1;
  iosr_warn("%s: a forked child of %s lost its page table with the old daemon; pages it faults on give SIGBUS",
            c->name, p->name);
}
