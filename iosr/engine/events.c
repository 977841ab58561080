/* userfaultfd events (design note section 10; brief: "The faulting process
 * can unmap or remap the range ... discard pages itself (madvise DONTNEED,
 * munmap, mremap, fork): ask for the corresponding userfaultfd events and keep
 * the page table of the swap system consistent with them").
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/beacon.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

typedef struct rm_ctx {
  iosr_engine *e;
  iosr_app *a;
  uint64_t wake_lo, wake_hi; /* READING pages whose waiters must retry */
  uint64_t wp_lo, wp_hi;     /* a run of WRITING pages to un-protect */
  uint64_t lost, lost_first; /* pages the dropper took (lost_to_dropper) */
} rm_ctx;

/* Un-protects the pending run of formerly WRITING pages. */
static void flush_unprotect(rm_ctx *c) {
  if (c->wp_hi <= c->wp_lo) return;
  int r = iosr_uffd_wp(c->a->uffd, c->wp_lo << 12, (c->wp_hi - c->wp_lo) << 12, 0);
  if (r == -EAGAIN) iosr_fault_add_retry(c->e, c->a->id, IOSR_RETRY_UNPROTECT, c->wp_lo, c->wp_hi - c->wp_lo, 0);
  c->wp_lo = c->wp_hi = 0;
}

static void note_unprotect(rm_ctx *c, uint64_t vpn) {
  if (c->wp_hi != vpn) {
    flush_unprotect(c);
    c->wp_lo = vpn;
  }
  c->wp_hi = vpn + 1;
}

static void note_wake(rm_ctx *c, uint64_t vpn) {
  if (c->wake_hi == 0) {
    c->wake_lo = vpn;
    c->wake_hi = vpn + 1;
  } else {
    if (vpn < c->wake_lo) c->wake_lo = vpn;
    if (vpn + 1 > c->wake_hi) c->wake_hi = vpn + 1;
  }
}

/* A page the dropper's madvise took: the REMOVE fell in its window (the
 * run it announced) over a page that is not one of its drops', so the app
 * moved it there after the dropper chose what to discard (design note
 * section 3, "What the dropper discards"). Its bytes are gone (a swapped
 * one's slot may still hold them, but the app's own discard in that window
 * would look the same): SIGBUS from now on, never zero or older bytes. */
static void lost_to_dropper(rm_ctx *c, uint64_t vpn, iosr_pte *p) {
  if (p->state == IOSR_PTE_READING) {
    note_wake(c, vpn);
    iosr_fault_lat_end(c->e, c->a, vpn, 1);
  }
  iosr_page_release(c->e, c->a, p);
  iosr_page_set_state(c->e, c->a, p, IOSR_PTE_POISONED);
  c->e->inconsistencies++;
  if (!c->lost++) c->lost_first = vpn;
}

static void remove_cb(void *arg, uint64_t vpn, iosr_pte *p) {
  rm_ctx *c = arg;
  if (p->state != IOSR_PTE_ZERO && p->state != IOSR_PTE_DROPPING && p->state != IOSR_PTE_WRITING &&
      c->a->beacon && iosr_drop_may_be_dropper(c->a, vpn, p)) {
    lost_to_dropper(c, vpn, p);
    return;
  }
  switch (p->state) {
    case IOSR_PTE_ZERO: break;
    case IOSR_PTE_DROPPING:
      /* The dropper's discard of the page, or the app's (design note
       * section 9): only a REMOVE between the dropper's marks, over the
       * pages its running drop discards, may be the dropper's; one such
       * means discarded by the dropper, a second one the app's too. */
      if (!iosr_drop_may_be_dropper(c->a, vpn, p)) p->flags |= IOSR_PTE_F_RMAPP;
      else if (p->flags & IOSR_PTE_F_RM1) p->flags |= IOSR_PTE_F_RMX;
      else p->flags |= IOSR_PTE_F_RM1;
      break;
    case IOSR_PTE_READING:
      note_wake(c, vpn);
      iosr_fault_lat_end(c->e, c->a, vpn, 1);
      iosr_page_release(c->e, c->a, p);
      break;
    case IOSR_PTE_POISONED:
      /* the discard removes the poison marker as well */
      iosr_page_release(c->e, c->a, p);
      break;
    case IOSR_PTE_WRITING:
      /* mremap moved it into the pages a running drop discards: the dropper
       * discards it (it is write-protected), its bytes are on their way to
       * its slot, and it waits for its write (design note section 3) */
      if (c->a->beacon && iosr_drop_may_be_dropper(c->a, vpn, p)) {
        p->flags |= p->flags & IOSR_PTE_F_RM1 ? IOSR_PTE_F_RMX : IOSR_PTE_F_RM1;
        break;
      }
      /* The app's: its write completes into nothing. MADV_FREE leaves the
       * page mapped (until the kernel needs the memory) and still
       * write-protected: the protection goes, or the app's next write would
       * wait forever. */
      note_unprotect(c, vpn);
      iosr_page_release(c->e, c->a, p);
      break;
    case IOSR_PTE_CLEAN:
      /* the app's (no pending drop's run covers a CLEAN page): MADV_FREE
       * leaves it mapped and write-protected, so the protection goes */
      note_unprotect(c, vpn);
      iosr_page_release(c->e, c->a, p);
      break;
    default: /* PRESENT, SWAPPED, CACHED */
      iosr_page_release(c->e, c->a, p);
      break;
  }
}

/* A CLEAN page that mremap moved to vpn, where a pending drop's run is: that
 * drop's dropper discards write-protected pages there, so the page is handed
 * over to it (DROPPING, its slot holding it) and its confirmation settles it
 * (design note section 3). Left CLEAN, a discard there would be taken for the
 * app's and read zero. */
static void clean_moved(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p) {
  iosr_drop *d = iosr_drop_covering(a, vpn, NULL);
  if (!d) return;
  if (iosr_drop_adopt(d, vpn) == 0) {
    iosr_page_set_state(e, a, p, IOSR_PTE_DROPPING);
    p->aux = (uint16_t)d->id;
    p->flags = IOSR_PTE_F_MOVED | IOSR_PTE_F_CLEAN;
    return;
  }
  /* no memory to hand it over: resident and writable, its slot freed */
  iosr_page_put_slot(e, p);
  iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
  p->flags = 0;
  if (iosr_uffd_wp(a->uffd, vpn << 12, 4096, 0) == -EAGAIN)
    iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, vpn, 1, 0);
}

static void for_range(iosr_app *a, uint64_t lo, uint64_t hi, void (*cb)(void *, uint64_t, iosr_pte *), void *arg) {
  for (iosr_span *sp = iosr_pt_first_from(&a->pt, lo); sp && sp->start < hi;) {
    uint64_t s = sp->start > lo ? sp->start : lo, t = sp->start + sp->n < hi ? sp->start + sp->n : hi;
    uint64_t next = sp->start + sp->n;
    for (uint64_t v = s; v < t; v++) cb(arg, v, iosr_pt_pte(&a->pt, sp, v));
    sp = iosr_pt_first_from(&a->pt, next);
  }
}

/* A REMOVE inside the beacon area is one of the dropper's marks
 * (common/beacon.h); one in the graveyard after it is the dropper's discard
 * of pages moved out (or the kernel's, of pages an mlockall put there). */
static int beacon_mark(iosr_app *a, uint64_t start, uint64_t end) {
  uint64_t lo = start >> 12, hi = (end + 4095) >> 12;
  uint64_t area = IOSR_BEACON_PAGES + (a->grave ? IOSR_GRAVE_PAGES : 0);
  if (!a->beacon || lo < a->beacon || hi > a->beacon + area) return 0;
  uint64_t x = 0, n = 0;
  int kind = iosr_beacon_read(lo - a->beacon, hi - lo, &x, &n);
  if (kind) iosr_drop_mark(a, kind, x, n);
  return 1; /* no mark: nothing of ours is there either */
}

/* The kernel's continuation of a REMOVE starts where a VMA starts (design
 * note section 3, "Whose discard"); unknown counts as one. */
static int vma_boundary(const iosr_app *a, uint64_t vpn) { return iosr_vmas_starts_at(a->pid, vpn) != 0; }

void iosr_event_remove(iosr_engine *e, iosr_app *a, uint64_t start, uint64_t end) {
  iosr_debug("remove %#llx-%#llx", (unsigned long long)start, (unsigned long long)end);
  if (beacon_mark(a, start, end)) return;
  uint64_t lo = start >> 12, hi = (end + 4095) >> 12;
  /* the kernel repeats what is left of the dropper's REMOVE when a VMA was
   * split meanwhile: those pages were counted already */
  if (a->beacon) lo = iosr_drop_window_repeat(a, lo, hi, vma_boundary);
  rm_ctx c = {.e = e, .a = a};
  for_range(a, lo, hi, remove_cb, &c);
  if (c.lost)
    iosr_warn("app %s: %llu pages from %#llx, moved into a drop's pages after its dropper chose them, were discarded "
              "with them; poisoned (SIGBUS)", a->name, (unsigned long long)c.lost, (unsigned long long)(c.lost_first << 12));
  flush_unprotect(&c);
  if (c.wake_hi) iosr_uffd_wake(a->uffd, c.wake_lo << 12, (c.wake_hi - c.wake_lo) << 12);
}

static void unmap_cb(void *arg, uint64_t vpn, iosr_pte *p) {
  rm_ctx *c = arg;
  if (p->state == IOSR_PTE_READING) iosr_fault_lat_end(c->e, c->a, vpn, 1);
  iosr_page_release(c->e, c->a, p);
}

void iosr_event_unmap(iosr_engine *e, iosr_app *a, uint64_t start, uint64_t end) {
  rm_ctx c = {.e = e, .a = a};
  uint64_t lo = start >> 12, hi = (end + 4095) >> 12;
  if (iosr_pt_cut(&a->pt, lo, hi - lo, unmap_cb, &c))
    iosr_warn("app %s: page table directory full after munmap", a->name);
  /* threads that waited on pages of the range retry, and find it unmapped */
  iosr_uffd_wake(a->uffd, lo << 12, (hi - lo) << 12);
}

/* mremap moved [from, from+len) to [to, to+len). */
void iosr_event_remap(iosr_engine *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t len) {
  uint64_t f = from >> 12, t = to >> 12, n = (len + 4095) >> 12;
  rm_ctx c = {.e = e, .a = a};
  if (iosr_pt_move(&a->pt, f, t, n, unmap_cb, &c)) {
    iosr_warn("app %s: page table directory full after mremap", a->name);
    return;
  }
  /* the reverse map, in-flight requests, batches and probes follow the pages */
  for (iosr_span *sp = iosr_pt_first_from(&a->pt, t); sp && sp->start < t + n;) {
    uint64_t s0 = sp->start > t ? sp->start : t, s1 = sp->start + sp->n < t + n ? sp->start + sp->n : t + n;
    uint64_t next = sp->start + sp->n;
    for (uint64_t v = s0; v < s1; v++) {
      iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
      uint64_t old = f + (v - t);
      if (iosr_pte_has_slot(p) && e->slots.rev[p->slot] == iosr_rev_pack(a->id, old))
        e->slots.rev[p->slot] = iosr_rev_pack(a->id, v);
      /* The dropper discards at the old addresses, where the app may move
       * the page back before it runs: the page stays DROPPING (still
       * write-protected, its slot holds it) and its drop follows it. */
      if (p->state == IOSR_PTE_DROPPING || p->state == IOSR_PTE_WRITING) p->flags |= IOSR_PTE_F_MOVED;
      if (p->state == IOSR_PTE_CLEAN && a->drops) clean_moved(e, a, v, p);
    }
    sp = iosr_pt_first_from(&a->pt, next);
  }
  for (iosr_req *r = e->reqs; r; r = r->next_all)
    for (uint32_t i = 0; i < r->s.npages; i++)
      if (r->tgt[i].app == a->id && r->tgt[i].vpn >= f && r->tgt[i].vpn < f + n) r->tgt[i].vpn = t + (r->tgt[i].vpn - f);
  for (iosr_batch *b = e->batches; b; b = b->next)
    if (b->app == a->id)
      for (uint32_t i = 0; i < b->n; i++)
        if (b->vpn[i] >= f && b->vpn[i] < f + n) b->vpn[i] = t + (b->vpn[i] - f);
  for (uint32_t i = 0; i < a->nlat; i++)
    if (a->lat[i].vpn >= f && a->lat[i].vpn < f + n) a->lat[i].vpn = t + (a->lat[i].vpn - f);
  iosr_probe_rekey(e, a, f, t, n);
  iosr_drop_rekey(a, f, t, n);
}

/* A forked child of app `parent` served through `uffd`: registered with the
 * engine, with an empty page table. kind names it ("fork", "orphan"). NULL
 * (descriptor closed) when it cannot be tracked. */
iosr_app *iosr_event_child_app(iosr_engine *e, iosr_app *parent, int uffd, const char *kind) {
  uint32_t id = iosr_engine_new_app_id(e);
  iosr_app *c = id ? calloc(1, sizeof *c) : NULL;
  if (!c || iosr_pt_create(&c->pt, 0, parent->name)) {
    iosr_err("app %s forked but the child cannot be tracked (out of memory or apps); its swapped pages "
             "are unreachable", parent->name);
    free(c);
    close(uffd);
    return NULL;
  }
  c->id = id;
  c->state = IOSR_APP_ACTIVE;
  c->forked = 1;
  c->parent = parent->id;
  c->pid = -1;
  c->pidfd = -1;
  c->uffd = uffd;
  c->uffd_features = parent->uffd_features;
  c->next_region = parent->next_region; /* its spans keep the parent's region ids */
  c->probe_head = c->probe_tail = -1;
  snprintf(c->name, sizeof c->name, "%.30s/%.6s%u", parent->name, kind, id % 100000u);
  iosr_ra_adaptive_init(&c->ra, e->set.ra_init, e->set.ra_max);
  iosr_extmap_init(&c->ext);
  e->apps[id] = c;
  e->nforked++;
  iosr_engine_watch(e, uffd, iosr_tag(IOSR_TAG_UFFD, id));
  return c;
}

/* The child's entry for a parent page at the FORK event (design note
 * section 3, "Transitions"). A DROPPING page may or may not have been in the
 * parent when the kernel copied its page tables: the dropper's madvise zaps
 * after its REMOVE was read, and an mremap between the two can bring the page
 * into the zapped range unseen, so neither the REMOVE count nor the position
 * tells. Its bytes have been write-protected since they were copied to its
 * slot, so the child shares the slot: if the child got the page, it never
 * faults on it (a write lifts the protection, the state stays); if not, its
 * fault reads the slot. Only a page the app discarded (a REMOVE of the
 * app's, or two between the dropper's marks) or an all-zero one is ZERO. */
static void fork_entry(iosr_engine *e, iosr_app *c, const iosr_pte *pp, iosr_pte *cp) {
  int share = 0;
  switch (pp->state) {
    case IOSR_PTE_SWAPPED:
    case IOSR_PTE_READING:
    case IOSR_PTE_CACHED:
      share = 1; /* not mapped in the parent at the fork: not in the child either */
      break;
    case IOSR_PTE_DROPPING:
      share = !(pp->flags & (IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP)) && iosr_pte_has_slot(pp);
      break;
    case IOSR_PTE_POISONED:
      iosr_page_set_state(e, c, cp, IOSR_PTE_POISONED);
      break;
    case IOSR_PTE_ZERO: break;
    case IOSR_PTE_WRITING:
      /* discarded by the dropper (moved into a drop's pages): the slot being
       * written, whose checksum guards a read before the write is done */
      if (pp->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) share = !(pp->flags & IOSR_PTE_F_RMX) && iosr_pte_has_slot(pp);
      else iosr_page_set_state(e, c, cp, IOSR_PTE_PRESENT);
      break;
    default: /* PRESENT: the child got a copy of the page */
      iosr_page_set_state(e, c, cp, IOSR_PTE_PRESENT);
      break;
  }
  if (!share) return;
  if (iosr_slot_ref(&e->slots, pp->slot) == 0) {
    cp->slot = pp->slot;
    cp->crc = pp->crc;
    iosr_page_set_state(e, c, cp, IOSR_PTE_SWAPPED);
  } else {
    iosr_page_set_state(e, c, cp, IOSR_PTE_POISONED); /* 65535 sharers: loud rather than wrong */
  }
}

/* fork: the child's descriptor arrives in the event. The child shares every
 * swapped slot of the parent (a reference each); its faults are served like
 * any app's; it has no agent, so it is never reclaimed. Ranges the child
 * did not get the parent's pages in (MADV_WIPEONFORK: zeros; MADV_DONTFORK:
 * not mapped) are read from the parent's smaps: userfaultfd does not say. */
void iosr_event_fork(iosr_engine *e, iosr_app *a, int child_uffd) {
  iosr_app *c = iosr_event_child_app(e, a, child_uffd, "fork");
  if (!c) return;
  iosr_vma *wiped = NULL;
  long nw = a->pid > 0 ? iosr_vmas_flagged(a->pid, 0, UINT64_MAX, IOSR_VMA_WIPEONFORK | IOSR_VMA_DONTCOPY, &wiped)
                       : 0;
  if (nw < 0) {
    iosr_warn("app %s forked: cannot read its VMA flags (%s); MADV_WIPEONFORK ranges are served as copies",
              a->name, strerror(errno));
    nw = 0;
  }
  long hint = 0;
  for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
    iosr_span *ps = &a->pt.spans[i];
    iosr_span *cs = iosr_pt_add(&c->pt, ps->start, ps->n, ps->region);
    if (!cs) break;
    for (uint64_t v = ps->start; v < ps->start + ps->n; v++)
      if (!iosr_vmas_at(wiped, nw, v, &hint))
        fork_entry(e, c, iosr_pt_pte(&a->pt, ps, v), iosr_pt_pte(&c->pt, cs, v));
  }
  free(wiped);
  /* the parent client keeps a copy so that the child's regions stay
   * registered (faults block, never read zero) even if this daemon dies */
  if (a->conn) {
    iosr_m_child m = {c->id};
    iosr_conn_send(e, a->conn, IOSR_M_CHILD_UFFD, 0, 0, &m, sizeof m, &child_uffd, 1);
  }
  iosr_info("app %s forked: child tracked as %s", a->name, c->name);
}
