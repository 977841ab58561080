/* Swap-in (brief: "Swap-in"; design note sections 6 and 7): page fault ->
 * slot lookup -> read-ahead window (cluster / vma / adaptive) -> contiguous
 * slots merged into reads of at most max_io -> on completion the faulting
 * page is mapped first, then the rest in virtual-contiguous runs, many pages
 * per UFFDIO_COPY; probe pages go to the probe cache.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/histo.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"

typedef struct pick {
  uint64_t slot;
  uint32_t app;
  uint32_t weight;
  uint64_t vpn;
  int fault;
  uint32_t win;
} pick;

typedef struct picks {
  pick *v;
  uint32_t n, cap;
} picks;

static void picks_add(picks *ps, uint64_t slot, uint32_t app, uint64_t vpn, int fault) {
  if (ps->n == ps->cap) {
    uint32_t nc = ps->cap ? ps->cap * 2 : 64;
    pick *nv = realloc(ps->v, nc * sizeof *nv);
    if (!nv) return; /* read-ahead is optional; the faulting page was added first */
    ps->v = nv;
    ps->cap = nc;
  }
  ps->v[ps->n++] = (pick){slot, app, 0, vpn, fault, 0};
}

/* A page may join a read when it is swapped (not already in flight or cached)
 * and its entry still owns this slot. */
static iosr_pte *readable(iosr_engine *e, uint32_t app, uint64_t vpn, uint64_t slot) {
  iosr_app *a = iosr_engine_app(e, app);
  if (!a) return NULL;
  iosr_pte *p = iosr_pt_lookup(&a->pt, vpn, NULL);
  return p && p->state == IOSR_PTE_SWAPPED && p->slot == slot ? p : NULL;
}

/* The primary owner of a slot, if its page can be read. */
static int owner_readable(iosr_engine *e, uint64_t s, uint32_t *app, uint64_t *vpn) {
  if (s >= e->slots.nslots || !iosr_slot_refs(&e->slots, s) || !e->slots.rev[s]) return 0;
  *app = iosr_rev_app(e->slots.rev[s]);
  *vpn = iosr_rev_vpn(e->slots.rev[s]);
  return readable(e, *app, *vpn, s) != NULL;
}

static int cmp_pick(const void *x, const void *y) {
  const pick *a = x, *b = y;
  return a->slot < b->slot ? -1 : a->slot > b->slot;
}

/* ---- window selection per policy ---- */

static void pick_cluster(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t slot, picks *ps) {
  iosr_ra_linux *st = &e->cluster_ra;
  unsigned win = iosr_ra_linux_pages(st->prev_off, slot, st->hits, 1u << e->set.page_cluster, st->prev_win);
  st->hits = 0;
  st->prev_off = slot;
  st->prev_win = win;
  a->ra_last_window = win;
  picks_add(ps, slot, a->id, vpn, 1);
  if (win <= 1) return;
  uint64_t lo, hi;
  iosr_ra_cluster_block(slot, win, &lo, &hi);
  for (uint64_t s = lo; s < hi && s < e->slots.nslots; s++) {
    uint32_t app;
    uint64_t v;
    if (s != slot && owner_readable(e, s, &app, &v)) picks_add(ps, s, app, v, 0);
  }
}

static void pick_vma(iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn, uint64_t slot, picks *ps) {
  unsigned win = iosr_ra_linux_pages(sp->ra_prev, vpn, sp->ra_hits, 1u << e->set.page_cluster, sp->ra_win);
  uint64_t prev = sp->ra_prev;
  sp->ra_hits = 0;
  sp->ra_prev = vpn;
  sp->ra_win = win;
  a->ra_last_window = win;
  picks_add(ps, slot, a->id, vpn, 1);
  if (win <= 1) return;
  uint64_t lo, hi;
  iosr_ra_vma_range(vpn, prev, win, sp->start, sp->start + sp->n, &lo, &hi);
  for (uint64_t v = lo; v < hi; v++) {
    if (v == vpn) continue;
    iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
    if (p->state == IOSR_PTE_SWAPPED) picks_add(ps, p->slot, a->id, v, 0);
  }
}

/* adaptive: the app's own slot run from `from`, forward then backward, up to
 * `want` pages, skipping free slots, this app's unswapped pages and its pages
 * of other regions or zones (each has its own window), stopping at another
 * app's slot; scans at most 2 * want slots each way. */
static void collect_run(iosr_engine *e, iosr_app *a, uint64_t from, int dir, uint32_t want, uint32_t region,
                        uint64_t zone, picks *ps, uint32_t *got) {
  uint64_t s = from;
  for (uint32_t scanned = 0; *got < want && scanned < 2 * want; scanned++) {
    if (dir < 0 && s == 0) break;
    s = dir > 0 ? s + 1 : s - 1;
    if (s >= e->slots.nslots) break;
    if (!iosr_slot_refs(&e->slots, s) || !e->slots.rev[s]) continue;
    uint64_t r = e->slots.rev[s];
    /* a forked child follows its parent's runs: it shares those slots */
    if (iosr_rev_app(r) != a->id && !(a->forked && iosr_rev_app(r) == a->parent)) break;
    iosr_span *sp;
    iosr_pte *p = iosr_pt_lookup(&a->pt, iosr_rev_vpn(r), &sp);
    if (p && p->state == IOSR_PTE_SWAPPED && p->slot == s && sp->region == region &&
        iosr_ra_region_zone(e, iosr_rev_vpn(r)) == zone) {
      picks_add(ps, s, a->id, iosr_rev_vpn(r), 0);
      (*got)++;
    }
  }
}

static void pick_adaptive(iosr_engine *e, iosr_app *a, iosr_span *sp, uint32_t rstate, uint64_t vpn,
                          uint64_t slot, picks *ps) {
  iosr_ra_region *rs = iosr_ra_region_get(a, rstate);
  iosr_ra_adaptive *ra = rs ? &rs->ra : &a->ra;
  /* a fault right after the region's last window is the app streaming
   * through its slot run: the window was used, like a probe hit */
  if (rs && rs->next_slot && slot == rs->next_slot) iosr_ra_adaptive_hit(ra);
  uint32_t want = ra->window, got = 1;
  a->ra_last_window = want;
  picks_add(ps, slot, a->id, vpn, 1);
  collect_run(e, a, slot, +1, want, sp->region, iosr_ra_region_zone(e, vpn), ps, &got);
  collect_run(e, a, slot, -1, want, sp->region, iosr_ra_region_zone(e, vpn), ps, &got);
}

/* The region's accounting of a window just picked (sorted by slot). */
static void region_window(iosr_app *a, uint32_t rstate, const picks *ps) {
  iosr_ra_region *rs = iosr_ra_region_get(a, rstate);
  if (!rs || !ps->n) return;
  rs->read_pages += ps->n;
  rs->next_slot = ps->v[ps->n - 1].slot + 1;
}

/* Turns picks (sorted by slot) into reads: runs of contiguous slots of at most
 * max_io. Marks every page READING. trigger_idx: index in ps of the adaptive
 * trigger probe, or UINT32_MAX. */
static void issue(iosr_engine *e, iosr_app *a, picks *ps, int fault_cls) {
  uint32_t maxp = (uint32_t)(e->set.max_io / 4096);
  uint64_t window_end = ps->n ? ps->v[ps->n - 1].slot + 1 : 0;
  uint64_t now = iosr_now_ns();
  for (uint32_t i = 0; i < ps->n;) {
    uint32_t j = i + 1;
    while (j < ps->n && j - i < maxp && ps->v[j].slot == ps->v[j - 1].slot + 1) j++;
    uint32_t n = j - i;
    iosr_req *r = calloc(1, sizeof *r + n * sizeof(iosr_target));
    if (!r) iosr_die("out of memory building a read request");
    r->kind = IOSR_REQ_READ;
    r->s.slot = ps->v[i].slot;
    r->s.npages = n;
    r->s.app = a->id;
    r->s.cls = IOSR_CLS_READAHEAD;
    r->fault_idx = UINT32_MAX;
    r->trigger_idx = UINT32_MAX;
    r->t_submit = now;
    iosr_debug("queue read slot %llu n %u", (unsigned long long)ps->v[i].slot, n);
    for (uint32_t k = 0; k < n; k++) {
      pick *pk = &ps->v[i + k];
      r->tgt[k].app = pk->app;
      r->tgt[k].vpn = pk->vpn;
      r->tgt[k].weight = pk->weight;
      r->tgt[k].win = pk->win;
      if (pk->fault) {
        r->fault_idx = k;
        r->s.cls = (uint8_t)fault_cls;
      }
      if (pk->weight & 0x80000000u) {
        r->trigger_idx = k;
        r->trigger_next = window_end;
        r->tgt[k].weight &= 0x7fffffffu;
      }
      iosr_app *o = iosr_engine_app(e, pk->app);
      iosr_pte *p = o ? iosr_pt_lookup(&o->pt, pk->vpn, NULL) : NULL;
      if (o) o->inflight++;
      if (p) {
        iosr_page_set_state(e, o, p, IOSR_PTE_READING);
        p->flags = pk->fault ? IOSR_PTE_F_FAULT : 0;
        if (!pk->fault) o->st.ra_pages++;
      }
      iosr_slot_io_begin(&e->slots, pk->slot);
    }
    a->inflight++;
    iosr_req_link(e, r);
    iosr_sched_push(&e->sched, &r->s, now);
    i = j;
  }
}

/* Marks probes among the read-ahead picks (everything but the faulting page),
 * in slot order: every stride-th, the last, and for adaptive the trigger at
 * three quarters of the window. Weights say how many pages each stands for. */
static void place_probes(iosr_engine *e, iosr_app *a, picks *ps, int with_trigger, uint32_t rstate) {
  if (!e->probe_cap) return;
  uint32_t n = 0;
  for (uint32_t i = 0; i < ps->n; i++) n += !ps->v[i].fault;
  if (!n) return;
  /* at least ra_probe_stride pages per probe, and at most ra_probes probes
   * per window: every probe costs the app a fault. An adaptive window at its
   * largest cannot grow: its probes only tell a used window from an unused
   * one (shrink) and start the next window (trigger), so it takes fewer
   * (ra_probes_full; docs/design/iosr-eval.md measured the faults). */
  iosr_ra_region *rs = iosr_ra_region_get(a, rstate);
  const iosr_ra_adaptive *ra = rs ? &rs->ra : &a->ra;
  uint32_t maxprobes = with_trigger && ra->window >= ra->max ? e->set.ra_probes_full : e->set.ra_probes;
  uint32_t per = n / maxprobes;
  uint32_t stride = e->set.ra_probe_stride > per ? e->set.ra_probe_stride : per;
  uint32_t trig = with_trigger && n >= 4 ? n - n / 4 - 1 : UINT32_MAX;
  uint32_t idx = 0, last = 0, nprobes = 0;
  for (uint32_t i = 0; i < ps->n; i++) {
    if (ps->v[i].fault) continue;
    int probe = (idx + 1) % stride == 0 || idx + 1 == n || idx == trig;
    if (probe) {
      ps->v[i].weight = idx + 1 - last;
      if (idx == trig) ps->v[i].weight |= 0x80000000u;
      last = idx + 1;
      nprobes++;
    }
    idx++;
  }
  uint32_t win = iosr_probe_window(e, a->id, nprobes, rstate);
  for (uint32_t i = 0; i < ps->n; i++)
    if (ps->v[i].weight) ps->v[i].win = win;
}

/* Cuts a read-ahead window (picks sorted by slot) to the room under the
 * budget: the faulting page (which needs one page whatever the room) and
 * the picks nearest it in slot order, forward first (design note section 9,
 * "Memory budget"). Every pick is charged: pages of a forked child's window
 * are its parent's too. */
static void cut_to_room(iosr_engine *e, picks *ps) {
  uint64_t room = iosr_budget_room(e);
  if (room >= ps->n) return;
  uint32_t keep = room ? (uint32_t)room : 1, fi = 0;
  while (fi < ps->n && !ps->v[fi].fault) fi++;
  if (fi == ps->n) fi = 0;
  uint32_t lo = fi, hi = fi + 1; /* [lo, hi) kept */
  while (hi - lo < keep) {
    if (hi < ps->n) hi++;
    if (hi - lo < keep && lo > 0) lo--;
  }
  e->budget_ra_cut_pages += ps->n - keep;
  memmove(ps->v, ps->v + lo, (hi - lo) * sizeof *ps->v);
  ps->n = hi - lo;
}

void iosr_swapin_fault(iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn, iosr_pte *p) {
  a->majors++;
  a->st.major_faults++;
  uint32_t rstate = iosr_ra_region_of(e, a, sp, vpn);
  iosr_ra_region *rs = iosr_ra_region_get(a, rstate);
  if (rs) {
    rs->majors++;
    rs->needed_pages++;
  }
  iosr_probe_expire(e, a, rstate);
  picks ps = {0};
  switch (e->set.readahead) {
    case IOSR_RA_CLUSTER: pick_cluster(e, a, vpn, p->slot, &ps); break;
    case IOSR_RA_VMA: pick_vma(e, a, sp, vpn, p->slot, &ps); break;
    default: pick_adaptive(e, a, sp, rstate, vpn, p->slot, &ps); break;
  }
  if (!ps.n) iosr_die("out of memory picking a read-ahead window");
  qsort(ps.v, ps.n, sizeof *ps.v, cmp_pick);
  region_window(a, rstate, &ps);
  cut_to_room(e, &ps);
  place_probes(e, a, &ps, e->set.readahead == IOSR_RA_ADAPTIVE, rstate);
  iosr_fault_lat_start(e, a, vpn);
  issue(e, a, &ps, a->id == e->fg_app ? IOSR_CLS_FG_FAULT : IOSR_CLS_BG_FAULT);
  free(ps.v);
}

/* Asynchronous read-ahead after a hit on the trigger probe at vpn: the next
 * window of its region's slot run from next_slot on. */
void iosr_swapin_continue(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t next_slot) {
  if (e->set.readahead != IOSR_RA_ADAPTIVE || !next_slot) return;
  iosr_span *sp = iosr_pt_find(&a->pt, vpn);
  if (!sp) return;
  uint32_t rstate = iosr_ra_region_of(e, a, sp, vpn);
  iosr_ra_region *rs = iosr_ra_region_get(a, rstate);
  picks ps = {0};
  uint32_t got = 0, want = rs ? rs->ra.window : a->ra.window;
  uint64_t room = a->forked ? UINT64_MAX : iosr_budget_room(e);
  if (room < want) {
    e->budget_ra_cut_pages += want - room;
    want = (uint32_t)room;
  }
  if (!want) return;
  collect_run(e, a, next_slot - 1, +1, want, sp->region, iosr_ra_region_zone(e, vpn), &ps, &got);
  if (ps.n) {
    qsort(ps.v, ps.n, sizeof *ps.v, cmp_pick);
    region_window(a, rstate, &ps);
    place_probes(e, a, &ps, 1, rstate);
    issue(e, a, &ps, IOSR_CLS_READAHEAD);
    }
  free(ps.v);
}

/* ---- completion ---- */

static void page_lost(iosr_engine *e, iosr_app *o, uint64_t vpn, iosr_pte *p) {
  iosr_page_put_slot(e, p);
  iosr_page_set_state(e, o, p, IOSR_PTE_POISONED);
  p->flags = 0;
  uint64_t done;
  (void)done;
  if (o->uffd_features & UFFD_FEATURE_POISON) {
    int r = iosr_uffd_poison(o->uffd, vpn << 12, 4096);
    if (r == -EAGAIN) iosr_fault_add_retry(e, o->id, IOSR_RETRY_FAULT, vpn, 1, 0);
  } else {
    iosr_fault_handle(e, o, vpn << 12, 0, 0);
  }
  iosr_fault_lat_end(e, o, vpn, 1);
}

static void read_failed(iosr_engine *e, iosr_req *r, int err) {
  iosr_app *fa = iosr_engine_app(e, r->s.app);
  if (fa) fa->st.read_errors++;
  e->io_errors++;
  iosr_warn("read of %u slots at %llu failed: %s", r->s.npages, (unsigned long long)r->s.slot, strerror(err));
  for (uint32_t i = 0; i < r->s.npages; i++) {
    iosr_app *o = iosr_engine_app(e, r->tgt[i].app);
    iosr_pte *p = o ? iosr_pt_lookup(&o->pt, r->tgt[i].vpn, NULL) : NULL;
    if (!p || p->state != IOSR_PTE_READING || p->slot != r->s.slot + i) continue;
    if (p->flags & IOSR_PTE_F_FAULT) {
      /* a thread waits on it: the data is unreadable, it gets SIGBUS */
      page_lost(e, o, r->tgt[i].vpn, p);
    } else {
      iosr_page_set_state(e, o, p, IOSR_PTE_SWAPPED); /* read-ahead only: retried when faulted */
      p->flags = 0;
    }
  }
}

/* Maps pages [i, j) of r (one app, consecutive pages and buffer positions).
 * Returns 0, or -EAGAIN when the rest must be retried later. */
int iosr_swapin_may_clean(const iosr_engine *e, const iosr_app *a, uint64_t vpn, uint64_t n) {
  return e->set.clean_pages && !e->draining && !iosr_drop_overlaps(a, vpn, n);
}

static int map_run(iosr_engine *e, iosr_req *r, iosr_app *o, uint32_t i, uint32_t j) {
  while (i < j) {
    uint64_t done = 0;
    /* mapped write-protected, the page keeps its slot (CLEAN) unless a
     * pending drop's dropper may discard it there (design note section 3) */
    int clean = iosr_swapin_may_clean(e, o, r->tgt[i].vpn, j - i);
    const uint8_t *src = r->buf + (size_t)i * 4096;
    uint64_t len = (uint64_t)(j - i) << 12;
    int rc = clean ? iosr_uffd_copy_wp(o->uffd, r->tgt[i].vpn << 12, src, len, &done)
                   : iosr_uffd_copy(o->uffd, r->tgt[i].vpn << 12, src, len, 1, &done);
    uint32_t np = (uint32_t)(done >> 12);
    for (uint32_t k = i; k < i + np; k++) {
      iosr_pte *p = iosr_pt_lookup(&o->pt, r->tgt[k].vpn, NULL);
      if (!clean) iosr_page_put_slot(e, p);
      iosr_page_set_state(e, o, p, clean ? IOSR_PTE_CLEAN : IOSR_PTE_PRESENT);
      p->flags = 0;
      p->age = (uint32_t)e->tick;
      r->done[k] |= IOSR_DONE_FINISHED;
    }
    if (np) {
      o->st.swapin_bytes += (uint64_t)np * 4096;
      iosr_fault_lat_end(e, o, r->tgt[i].vpn, np);
    }
    i += np;
    if (rc == 0) return 0;
    if (rc == -EEXIST) {
      /* present already (cannot normally happen: the page was READING): keep
       * what is there, free the slot, and wake explicitly */
      iosr_pte *p = iosr_pt_lookup(&o->pt, r->tgt[i].vpn, NULL);
      iosr_page_put_slot(e, p);
      iosr_page_set_state(e, o, p, IOSR_PTE_PRESENT);
      p->flags = 0;
      iosr_uffd_wake(o->uffd, r->tgt[i].vpn << 12, 4096);
      iosr_fault_lat_end(e, o, r->tgt[i].vpn, 1);
      e->inconsistencies++;
      r->done[i++] |= IOSR_DONE_FINISHED;
      continue;
    }
    if (rc == -EAGAIN) return -EAGAIN;
    /* Page i cannot be mapped: ENOENT, it is in no registered VMA (an
     * UNMAP or REMAP event follows or came); ESRCH, the app is gone; ENOMEM,
     * the app's memory is full. It keeps its slot (a READING page always has
     * a read under way: left READING, a later fault would wait forever), and
     * a thread waiting on it retries. */
    if (rc != -ENOENT && rc != -ESRCH)
      iosr_warn("app %s: cannot map %#llx: %s; it stays swapped", o->name, (unsigned long long)(r->tgt[i].vpn << 12),
                strerror(-rc));
    iosr_pte *p = iosr_pt_lookup(&o->pt, r->tgt[i].vpn, NULL);
    iosr_page_set_state(e, o, p, IOSR_PTE_SWAPPED);
    p->flags = 0;
    iosr_uffd_wake(o->uffd, r->tgt[i].vpn << 12, 4096);
    iosr_fault_lat_end(e, o, r->tgt[i].vpn, 1);
    r->done[i++] |= IOSR_DONE_FINISHED;
  }
  return 0;
}

static int valid_target(iosr_engine *e, iosr_req *r, uint32_t k, iosr_app **o, iosr_pte **p) {
  *o = iosr_engine_app(e, r->tgt[k].app);
  *p = *o && (*o)->uffd >= 0 ? iosr_pt_lookup(&(*o)->pt, r->tgt[k].vpn, NULL) : NULL;
  return *p && (*p)->state == IOSR_PTE_READING && (*p)->slot == r->s.slot + k;
}

/* A READING page whose slot cannot give it back: a waiting thread gets
 * SIGBUS now, anyone else when touching it; poisoned until discarded. */
static void page_unreadable(iosr_engine *e, iosr_app *o, uint64_t vpn, iosr_pte *p) {
  if (p->flags & IOSR_PTE_F_FAULT) {
    page_lost(e, o, vpn, p);
  } else {
    iosr_page_put_slot(e, p);
    iosr_page_set_state(e, o, p, IOSR_PTE_POISONED);
    p->flags = 0;
  }
}

/* A page whose slot did not hold what was written there (design note
 * section 4): never mapped. */
static void page_bad(iosr_engine *e, iosr_req *r, uint32_t k, iosr_app *o, iosr_pte *p) {
  if (!r->bad_pages++) r->bad_vpn = r->tgt[k].vpn;
  e->checksum_errors++;
  o->st.checksum_errors++;
  page_unreadable(e, o, r->tgt[k].vpn, p);
  r->done[k] |= IOSR_DONE_FINISHED;
}

/* Page k of r may be mapped: its entry still waits for this slot and the
 * bytes read match the slot's checksum (computed once per page). 0 when not
 * (the page is then finished: given up, or poisoned). */
static int target_ready(iosr_engine *e, iosr_req *r, uint32_t k, iosr_app **o, iosr_pte **p) {
  if (!valid_target(e, r, k, o, p)) {
    r->done[k] |= IOSR_DONE_FINISHED;
    return 0;
  }
  if (r->done[k] & IOSR_DONE_VERIFIED) return 1;
  if (iosr_slot_crc(iosr_crc32c_page(r->buf + (size_t)k * 4096), r->s.slot + k) != (*p)->crc) {
    page_bad(e, r, k, *o, *p);
    return 0;
  }
  r->done[k] |= IOSR_DONE_VERIFIED;
  return 1;
}

/* The read stopped after `whole` pages (the area ends there: truncated):
 * the pages past it were not read; each gives SIGBUS, the pages before it
 * are installed as usual. */
static void short_read(iosr_engine *e, iosr_req *r, uint32_t whole) {
  iosr_app *fa = iosr_engine_app(e, r->s.app);
  if (fa) fa->st.read_errors++;
  e->io_errors++;
  iosr_warn("read of %u slots at %llu stopped after %u (the swap area ends there); the pages past it give SIGBUS",
            r->s.npages, (unsigned long long)r->s.slot, whole);
  for (uint32_t k = whole; k < r->s.npages; k++) {
    iosr_app *o;
    iosr_pte *p;
    if (valid_target(e, r, k, &o, &p)) page_unreadable(e, o, r->tgt[k].vpn, p);
    r->done[k] |= IOSR_DONE_FINISHED;
  }
}

/* Installs what is left of r; returns -EAGAIN when it must be retried. */
static int install(iosr_engine *e, iosr_req *r) {
  uint32_t n = r->s.npages;
  iosr_app *o;
  iosr_pte *p;
  /* 1. the faulting page first: its thread wakes before the rest is copied */
  uint32_t f = r->fault_idx;
  if (f != UINT32_MAX && !(r->done[f] & IOSR_DONE_FINISHED) && target_ready(e, r, f, &o, &p) &&
      map_run(e, r, o, f, f + 1))
    return -EAGAIN;
  /* 2. probes to the cache, the rest in runs of consecutive virtual pages */
  for (uint32_t i = 0; i < n;) {
    if ((r->done[i] & IOSR_DONE_FINISHED) || !target_ready(e, r, i, &o, &p)) {
      i++;
      continue;
    }
    if (r->tgt[i].weight && (p->flags & IOSR_PTE_F_FAULT)) {
      /* a thread already waits on this probe: it was used; map it now */
      uint32_t w = r->tgt[i].weight;
      int trig = i == r->trigger_idx;
      r->tgt[i].weight = 0;
      if (map_run(e, r, o, i, i + 1)) {
        r->tgt[i].weight = w;
        return -EAGAIN;
      }
      iosr_probe_used(e, o, r->tgt[i].vpn, w, r->tgt[i].win, trig, trig ? r->trigger_next : 0);
      i++;
      continue;
    }
    if (r->tgt[i].weight) {
      int trig = i == r->trigger_idx;
      uint64_t next = trig ? r->trigger_next : 0;
      if (iosr_probe_add(e, o, r->tgt[i].vpn, r->s.slot + i, r->tgt[i].weight, r->tgt[i].win,
                         r->buf + (size_t)i * 4096, trig, next) == 0) {
        o->st.swapin_bytes += 4096;
        r->done[i++] |= IOSR_DONE_FINISHED;
        continue;
      }
      /* cache full: map it like the rest */
    }
    uint32_t j = i + 1;
    while (j < n && !(r->done[j] & IOSR_DONE_FINISHED) && !r->tgt[j].weight && r->tgt[j].app == r->tgt[i].app &&
           r->tgt[j].vpn == r->tgt[j - 1].vpn + 1) {
      iosr_app *o2;
      iosr_pte *p2;
      if (!target_ready(e, r, j, &o2, &p2)) break;
      j++;
    }
    if (map_run(e, r, o, i, j)) return -EAGAIN;
    i = j;
  }
  return 0;
}

static void finish(iosr_engine *e, iosr_req *r) {
  iosr_app *fa = iosr_engine_app(e, r->s.app);
  if (r->bad_pages)
    iosr_warn("read of %u slots at %llu: %u pages failed their checksum (the first at %#llx); they give SIGBUS "
              "until discarded", r->s.npages, (unsigned long long)r->s.slot, r->bad_pages,
              (unsigned long long)(r->bad_vpn << 12));
  for (uint32_t i = 0; i < r->s.npages; i++) {
    iosr_app *o = iosr_engine_app(e, r->tgt[i].app);
    if (o && o->inflight) o->inflight--;
  }
  if (fa && fa->inflight) fa->inflight--;
  uint32_t apps[8];
  unsigned na = 0;
  for (uint32_t i = 0; i < r->s.npages && na < 8; i++) {
    unsigned k = 0;
    while (k < na && apps[k] != r->tgt[i].app) k++;
    if (k == na) apps[na++] = r->tgt[i].app;
  }
  iosr_req_free(e, r);
  if (fa) iosr_engine_maybe_finish_app(e, fa);
  for (unsigned k = 0; k < na; k++) {
    iosr_app *o = iosr_engine_app(e, apps[k]);
    if (o && o != fa) iosr_engine_maybe_finish_app(e, o);
  }
}

void iosr_swapin_complete(iosr_engine *e, iosr_req *r) {
  iosr_debug("read done slot %llu n %u res %d", (unsigned long long)r->s.slot, r->s.npages, r->cb.res);
  iosr_sched_done(&e->sched, &r->s);
  for (uint32_t i = 0; i < r->s.npages; i++) iosr_slot_io_end(&e->slots, r->s.slot + i);
  int res = r->cb.res;
  if (res >= 0 && e->fail_reads) {
    e->fail_reads--;
    res = -EIO;
  }
  iosr_app *fa = iosr_engine_app(e, r->s.app);
  if (fa) {
    fa->st.read_reqs++;
    fa->st.read_bytes += (uint64_t)r->s.npages * 4096;
    fa->st.read_hist[iosr_size_bucket((uint64_t)r->s.npages * 4096)]++;
  }
  e->reads++;
  e->read_bytes += (uint64_t)r->s.npages * 4096;
  if (res < 0) {
    read_failed(e, r, -res);
    finish(e, r);
    return;
  }
  r->done = calloc(r->s.npages, 1);
  if (!r->done) iosr_die("out of memory installing a read");
  if ((uint32_t)res < r->s.npages * 4096u) short_read(e, r, (uint32_t)res / 4096);
  r->installing = 1;
  if (install(e, r) == -EAGAIN) {
    r->next_retry = e->install_retry;
    e->install_retry = r;
    return;
  }
  finish(e, r);
}

void iosr_swapin_run_install_retries(iosr_engine *e) {
  iosr_req *list = e->install_retry;
  e->install_retry = NULL;
  while (list) {
    iosr_req *r = list;
    list = r->next_retry;
    if (install(e, r) == -EAGAIN) {
      r->next_retry = e->install_retry;
      e->install_retry = r;
    } else {
      finish(e, r);
    }
  }
}

/* Reads every swapped page of the app back (orderly daemon shutdown). */
void iosr_swapin_all(iosr_engine *e, iosr_app *a) {
  picks ps = {0};
  for (uint32_t i = 0; i < a->pt.hdr->nspans; i++) {
    iosr_span *sp = &a->pt.spans[i];
    for (uint64_t v = sp->start; v < sp->start + sp->n; v++) {
      iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
      if (p->state == IOSR_PTE_CACHED) {
        int copied;
        iosr_probe_hit(e, a, v, p, &copied);
      }
      if (p->state == IOSR_PTE_CLEAN) {
        /* writable again: nothing serves its write-protect fault after the stop */
        iosr_page_put_slot(e, p);
        iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
        if (iosr_uffd_wp(a->uffd, v << 12, 4096, 0) == -EAGAIN)
          iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, v, 1, 0);
      }
      if (p->state == IOSR_PTE_SWAPPED) picks_add(&ps, p->slot, a->id, v, 0);
    }
  }
  if (ps.n) {
    qsort(ps.v, ps.n, sizeof *ps.v, cmp_pick);
    issue(e, a, &ps, IOSR_CLS_READAHEAD);
    }
  free(ps.v);
}
