/* Fault service (design note sections 3, 7, 9): reads an app's userfaultfd,
 * dispatches page faults by page state and events to events.c.
 *
 * Brief: "What the field has learned the hard way about userfaultfd
 * handlers": EEXIST means present (wake explicitly), EAGAIN means retry after
 * reading the pending events, ENOENT means the range went away.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/histo.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/pagemap.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

void iosr_fault_add_retry(iosr_engine *e, uint32_t app, int op, uint64_t vpn, uint64_t n, uint64_t flags) {
  iosr_retry *r = calloc(1, sizeof *r);
  if (!r) iosr_die("out of memory queuing a fault retry");
  r->app = app;
  r->op = op;
  r->vpn = vpn;
  r->n = n;
  r->flags = flags;
  r->next = e->retries;
  e->retries = r;
}

void iosr_fault_lat_start(iosr_engine *e, iosr_app *a, uint64_t vpn) {
  (void)e;
  for (uint32_t i = 0; i < a->nlat; i++)
    if (a->lat[i].vpn == vpn) return;
  if (a->nlat >= sizeof a->lat / sizeof a->lat[0]) return;
  uint64_t now = iosr_now_ns();
  if (a->nlat == 0) a->busy_since = now;
  a->lat[a->nlat].vpn = vpn;
  a->lat[a->nlat].t0 = now;
  a->nlat++;
}

void iosr_fault_lat_end(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t n) {
  (void)e;
  if (!a->nlat) return;
  uint64_t now = 0;
  for (uint32_t i = 0; i < a->nlat;) {
    if (a->lat[i].vpn >= vpn && a->lat[i].vpn < vpn + n) {
      if (!now) now = iosr_now_ns();
      uint64_t d = now - a->lat[i].t0;
      a->st.lat_hist[iosr_lat_bucket(d)]++;
      if (d > a->st.lat_max_ns) a->st.lat_max_ns = d;
      a->lat[i] = a->lat[--a->nlat];
      if (a->nlat == 0) a->st.swapin_busy_ns += now - a->busy_since;
    } else {
      i++;
    }
  }
}

/* The engine's own zero_window pages of zeros (several engines may run in
 * one process, each with its own zero_window: a shared buffer would be freed
 * under another engine's copy). Grown, never shrunk, on the engine thread
 * only: `iosr set zero_window` may raise it at run time. 0 or -1 (ENOMEM:
 * the fault falls back to the shared zero page). */
static int ensure_zero_buf(iosr_engine *e) {
  size_t want = (size_t)e->set.zero_window * 4096;
  if (e->zero_buf && e->zero_buf_bytes >= want) return 0;
  uint8_t *nb;
  if (posix_memalign((void **)&nb, 4096, want)) return -1;
  memset(nb, 0, want);
  free(e->zero_buf);
  e->zero_buf = nb;
  e->zero_buf_bytes = want;
  return 0;
}

static void poison_page(iosr_engine *e, iosr_app *a, uint64_t vpn, uint32_t tid) {
  if (a->uffd_features & UFFD_FEATURE_POISON) {
    int r = iosr_uffd_poison(a->uffd, vpn << 12, 4096);
    if (r == -EAGAIN) iosr_fault_add_retry(e, a->id, IOSR_RETRY_FAULT, vpn, 1, 0);
    else if (r && r != -EEXIST) iosr_warn("app %s: cannot poison %#llx: %s", a->name,
                                          (unsigned long long)(vpn << 12), strerror(-r));
  } else if (a->pid > 0) {
    /* no UFFDIO_POISON (Linux < 6.6): signal the faulting thread itself */
    if (tid) syscall(SYS_tgkill, a->pid, tid, SIGBUS);
    else kill(a->pid, SIGBUS);
  }
}

/* MISSING fault on a page we believe present: either the fault message is
 * older than our copy (the page is there: wake the waiter) or the kernel
 * lost the page without an event telling us (the dropper's madvise took it,
 * moved there after its check: design note section 3, "Moved out"). Its
 * bytes are nowhere else: the page is poisoned (SIGBUS), never zero.
 * UFFDIO_POISON itself tells which (EEXIST = present); without it, pagemap
 * does. */
/* 1 when the kernel's pagemap shows no page at vpn (0: there, or unknown). */
static int kernel_lost(const iosr_app *a, uint64_t vpn) {
  int pm = a->pid > 0 ? iosr_pagemap_open(a->pid) : -1;
  int lost = pm >= 0 && iosr_pagemap_present(pm, vpn) == 0;
  if (pm >= 0) close(pm);
  return lost;
}

static void present_missing(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p, uint32_t tid) {
  int r = a->uffd_features & UFFD_FEATURE_POISON ? iosr_uffd_poison(a->uffd, vpn << 12, 4096)
          : kernel_lost(a, vpn)                  ? 0
                                                 : -EEXIST;
  if (r == -EEXIST) {
    iosr_uffd_wake(a->uffd, vpn << 12, 4096);
  } else if (r == 0) {
    e->inconsistencies++;
    iosr_page_set_state(e, a, p, IOSR_PTE_POISONED);
    p->flags = 0;
    iosr_warn("app %s: page %#llx was lost by the kernel although resident in the table; poisoned (SIGBUS)",
              a->name, (unsigned long long)(vpn << 12));
    if (!(a->uffd_features & UFFD_FEATURE_POISON)) poison_page(e, a, vpn, tid);
  } else if (r == -EAGAIN) {
    iosr_fault_add_retry(e, a->id, IOSR_RETRY_FAULT, vpn, 1, 0);
  }
}

/* First touch: map zero pages for the run of ZERO pages around vpn inside an
 * aligned window of zero_window pages. Write faults get real zeroed pages
 * (UFFDIO_COPY, no second fault); read faults the shared zero page. */
static void zero_fill(iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn, int write) {
  uint64_t zw = e->set.zero_window;
  uint64_t lo = vpn - vpn % zw, hi = lo + zw;
  if (lo < sp->start) lo = sp->start;
  if (hi > sp->start + sp->n) hi = sp->start + sp->n;
  uint64_t a0 = vpn, b0 = vpn + 1;
  /* cut to the room under the budget, from the faulting page on (which
   * needs one page whatever the room) */
  uint64_t room = a->forked ? UINT64_MAX : iosr_budget_room(e);
  if (room < zw) {
    uint64_t n0 = room ? room : 1;
    if (hi - vpn > n0) {
      e->budget_ra_cut_pages += hi - vpn - n0;
      hi = vpn + n0;
    }
    lo = vpn; /* below the faulting page: none (cut) */
  }
  while (a0 > lo && iosr_pt_pte(&a->pt, sp, a0 - 1)->state == IOSR_PTE_ZERO) a0--;
  while (b0 < hi && iosr_pt_pte(&a->pt, sp, b0)->state == IOSR_PTE_ZERO) b0++;
  if (write && ensure_zero_buf(e)) write = 0;
  uint64_t v = a0;
  int mapped = 0; /* the faulting page */
  while (v < b0) {
    uint64_t done = 0;
    int r = write ? iosr_uffd_copy(a->uffd, v << 12, e->zero_buf, (b0 - v) << 12, 1, &done)
                  : iosr_uffd_zeropage(a->uffd, v << 12, (b0 - v) << 12, &done);
    uint64_t np = done >> 12;
    iosr_debug("zero fill %#llx+%llu pages: r=%d done=%llu", (unsigned long long)(v << 12),
               (unsigned long long)(b0 - v), r, (unsigned long long)np);
    for (uint64_t k = 0; k < np; k++) {
      iosr_pte *p = iosr_pt_pte(&a->pt, sp, v + k);
      iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
      p->age = (uint32_t)e->tick;
    }
    e->zero_fill_pages += np;
    mapped |= v <= vpn && vpn < v + np;
    v += np;
    if (r == 0) break;
    if (r == -EEXIST) {
      /* already there (a table inconsistency): take it as present */
      iosr_pte *p = iosr_pt_pte(&a->pt, sp, v);
      iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
      iosr_uffd_wake(a->uffd, v << 12, 4096);
      e->inconsistencies++;
      mapped |= v == vpn;
      v++;
      continue;
    }
    if (r == -EAGAIN) {
      if (v <= vpn) iosr_fault_add_retry(e, a->id, IOSR_RETRY_FAULT, vpn, 1, write);
      return;
    }
    iosr_debug("app %s: zero fill at %#llx: %s", a->name, (unsigned long long)(v << 12), strerror(-r));
    if (r != -ENOENT) break; /* ESRCH: the app is gone; ENOMEM: its memory is full */
    v++; /* in no registered VMA (an UNMAP or REMAP event follows or came): the rest goes on */
  }
  /* the faulting page not mapped: its thread retries rather than waits */
  if (!mapped) iosr_uffd_wake(a->uffd, vpn << 12, 4096);
}

/* A write to a WRITING page that mremap moved where another drop's pages
 * were: that drop's dropper may discard it (it is write-protected), so its
 * protection stays until that drop is confirmed, which settles it (design
 * note section 3); the write waits. 1 when so handed over. */
static int wait_for_drop(iosr_app *a, uint64_t vpn, const iosr_pte *p) {
  if (!(p->flags & IOSR_PTE_F_MOVED)) return 0;
  iosr_drop *d = iosr_drop_covering(a, vpn, NULL);
  return d && iosr_drop_adopt(d, vpn) == 0;
}

/* A fault on a CLEAN page (design note section 3, "Clean pages keep their
 * slot"). A write-protect fault is the app's first write since the page was
 * read back: the slot no longer holds what the page will hold, so it is
 * freed, and lifting the protection wakes the writer. A missing fault is
 * almost always older than the copy that mapped the page (two threads
 * faulted on it): the kernel's pagemap tells; a page that really went
 * without an event IOSR saw is read back from its slot, which still holds
 * it. */
static void clean_fault(iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn, iosr_pte *p, int wp) {
  if (wp) {
    a->st.wp_faults++;
    iosr_page_put_slot(e, p);
    iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
    p->flags = 0;
    int r = iosr_uffd_wp(a->uffd, vpn << 12, 4096, 0);
    if (r == -EAGAIN) iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, vpn, 1, 0);
    return;
  }
  if (!kernel_lost(a, vpn)) {
    iosr_uffd_wake(a->uffd, vpn << 12, 4096);
    return;
  }
  e->inconsistencies++;
  iosr_page_set_state(e, a, p, IOSR_PTE_SWAPPED);
  p->flags = 0;
  iosr_swapin_fault(e, a, sp, vpn, p);
}

void iosr_fault_adopt_present(iosr_engine *e, iosr_app *a, iosr_span *sp) {
  int fd = iosr_pagemap_open(a->pid);
  if (fd < 0) return;
  if (iosr_pagemap_present(fd, sp->start) == 1) {
    uint64_t ent[512];
    for (uint64_t v = sp->start; v < sp->start + sp->n; v += 512) {
      uint64_t k = sp->start + sp->n - v < 512 ? sp->start + sp->n - v : 512;
      if (pread(fd, ent, k * 8, (off_t)(v * 8)) != (ssize_t)(k * 8)) break;
      for (uint64_t i = 0; i < k; i++) {
        if (!(ent[i] >> 63 & 1)) continue; /* the kernel's own swap is not ours to hold */
        iosr_pte *p = iosr_pt_pte(&a->pt, sp, v + i);
        iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
        p->age = (uint32_t)e->tick;
      }
    }
  }
  close(fd);
}

void iosr_fault_handle(iosr_engine *e, iosr_app *a, uint64_t addr, uint64_t flags, uint32_t tid) {
  uint64_t vpn = addr >> 12;
  e->tick++;
  iosr_span *sp;
  iosr_pte *p = iosr_pt_lookup(&a->pt, vpn, &sp);
  iosr_debug("app %s: fault %#llx flags %#llx state %d", a->name, (unsigned long long)addr,
             (unsigned long long)flags, p ? p->state : -1);
  a->st.faults++;
  int wp = (flags & UFFD_PAGEFAULT_FLAG_WP) != 0;
  int write = (flags & UFFD_PAGEFAULT_FLAG_WRITE) != 0;
  if (!p && a->orphan && !wp) {
    poison_page(e, a, vpn, tid);
    return;
  }
  if (!p) {
    /* A registered page outside every span (mremap with MREMAP_DONTUNMAP
     * leaves such ranges): serve zero, as the kernel would. */
    uint64_t done;
    int r = wp ? iosr_uffd_wp(a->uffd, addr & ~4095ull, 4096, 0)
               : iosr_uffd_zeropage(a->uffd, addr & ~4095ull, 4096, &done);
    if (r == -EEXIST) iosr_uffd_wake(a->uffd, addr & ~4095ull, 4096);
    else if (r == -EAGAIN) iosr_fault_add_retry(e, a->id, IOSR_RETRY_FAULT, vpn, 1, flags);
    return;
  }
  if (p->state == IOSR_PTE_CLEAN) {
    clean_fault(e, a, sp, vpn, p, wp);
    return;
  }
  if (wp && p->state != IOSR_PTE_WRITING && p->state != IOSR_PTE_DROPPING) {
    /* A write-protect fault means the kernel holds a write-protected page
     * here that IOSR is not writing out: a page discarded with MADV_FREE
     * while it was being written (the kernel keeps it until it needs the
     * memory), a fork child's copy of one, or a stale message. Lifting the
     * protection lets the write go on (it also wakes the thread); the entry
     * keeps its state, which is right whether or not the page is still there
     * (design note section 3, "Transitions"). */
    int r = iosr_uffd_wp(a->uffd, vpn << 12, 4096, 0);
    if (r == -EAGAIN) iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, vpn, 1, 0);
    return;
  }
  /* a page that would enter the app waits for room under the budget */
  if ((p->state == IOSR_PTE_ZERO || p->state == IOSR_PTE_SWAPPED || p->state == IOSR_PTE_CACHED) &&
      iosr_budget_hold(e, a, vpn, flags))
    return;
  switch (p->state) {
    case IOSR_PTE_ZERO:
      a->st.zero_faults++;
      zero_fill(e, a, sp, vpn, write);
      break;
    case IOSR_PTE_PRESENT:
      present_missing(e, a, vpn, p, tid);
      break;
    case IOSR_PTE_WRITING:
      if (p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) {
        /* the dropper discarded it: the retried access reads it from its
         * slot once the write is done (woken then) */
        if (wp) a->st.wp_faults++;
      } else if (wp && wait_for_drop(a, vpn, p)) {
        a->st.wp_faults++;
      } else if (wp) {
        a->st.wp_faults++;
        iosr_swapout_cancel_page(e, a, vpn, p);
      } else if (kernel_lost(a, vpn)) {
        /* lost unseen while its bytes go to its slot (they have been
         * write-protected since they were copied): read back from there
         * once written, as a page the dropper discarded */
        p->flags |= IOSR_PTE_F_RM1;
      } else {
        iosr_uffd_wake(a->uffd, vpn << 12, 4096); /* an older message: it is there */
      }
      break;
    case IOSR_PTE_DROPPING:
      /* Still write-protected, or already discarded by the dropper; the drop
       * confirmation wakes the run and the retried access faults the page
       * back in from its slot. */
      if (wp) a->st.wp_faults++;
      break;
    case IOSR_PTE_SWAPPED:
      iosr_swapin_fault(e, a, sp, vpn, p);
      break;
    case IOSR_PTE_READING: {
      p->flags |= IOSR_PTE_F_FAULT;
      iosr_fault_lat_start(e, a, vpn);
      iosr_req *r = iosr_req_find_queued_read(e, p->slot);
      if (r) iosr_sched_promote(&e->sched, &r->s, a->id == e->fg_app ? IOSR_CLS_FG_FAULT : IOSR_CLS_BG_FAULT);
      break;
    }
    case IOSR_PTE_CACHED: {
      int copied = 0;
      iosr_probe_hit(e, a, vpn, p, &copied);
      if (!copied) iosr_fault_add_retry(e, a->id, IOSR_RETRY_FAULT, vpn, 1, flags);
      break;
    }
    case IOSR_PTE_POISONED:
      poison_page(e, a, vpn, tid);
      break;
  }
}

void iosr_fault_read_uffd(iosr_engine *e, iosr_app *a) {
  struct uffd_msg msg[64];
  /* the dropper moves pages now: nothing the app does may be read before its
   * answer (design note section 3, "Moved by the dropper") */
  if (a->hold_drop) {
    iosr_engine_unwatch(e, a->uffd);
    return;
  }
  for (int rounds = 0; rounds < 64 && a->state != IOSR_APP_FREE && a->uffd >= 0; rounds++) {
    ssize_t n = read(a->uffd, msg, sizeof msg);
    if (n < 0) {
      if (errno == EINTR) continue;
      return; /* EAGAIN: drained */
    }
    if (n == 0) return;
    for (ssize_t i = 0; i < n / (ssize_t)sizeof msg[0]; i++) {
      struct uffd_msg *m = &msg[i];
      switch (m->event) {
        case UFFD_EVENT_PAGEFAULT:
          iosr_fault_handle(e, a, m->arg.pagefault.address, m->arg.pagefault.flags,
                            m->arg.pagefault.feat.ptid);
          break;
        case UFFD_EVENT_REMOVE:
          iosr_event_remove(e, a, m->arg.remove.start, m->arg.remove.end);
          break;
        case UFFD_EVENT_UNMAP:
          iosr_event_unmap(e, a, m->arg.remove.start, m->arg.remove.end);
          break;
        case UFFD_EVENT_REMAP:
          iosr_event_remap(e, a, m->arg.remap.from, m->arg.remap.to, m->arg.remap.len);
          break;
        case UFFD_EVENT_FORK:
          iosr_event_fork(e, a, (int)m->arg.fork.ufd);
          break;
        default:
          iosr_warn("app %s: unknown userfaultfd event %u", a->name, m->event);
      }
      if (a->state == IOSR_APP_FREE) return;
    }
    /* a drop mark was among them: answered once all read with it are
     * applied (they all came before the dropper's move) */
    if (a->go_pending) iosr_moveout_send_go(e, a);
    if (a->hold_drop) return;
  }
}

static int protected_now(iosr_app *a, uint64_t vpn) {
  iosr_pte *p = iosr_pt_lookup(&a->pt, vpn, NULL);
  return p && (p->state == IOSR_PTE_WRITING || p->state == IOSR_PTE_DROPPING || p->state == IOSR_PTE_CLEAN);
}

/* An un-protect that met EAGAIN, run now. A page of the range that a
 * swap-out protected again meanwhile (WRITING or DROPPING: its bytes are
 * being copied out or are only in its slot) keeps that protection: lifting
 * it would let a write land unseen in a page the dropper then discards, and
 * the app would read the older version from the slot. A thread waiting on
 * such a page is woken instead; its write faults again and is served as that
 * state says (design note section 3, "Transitions"). */
static void unprotect_later(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t n) {
  for (uint64_t v = vpn, end = vpn + n; v < end;) {
    int prot = protected_now(a, v);
    uint64_t k = v + 1;
    while (k < end && protected_now(a, k) == prot) k++;
    if (prot) {
      iosr_uffd_wake(a->uffd, v << 12, (k - v) << 12);
      iosr_debug("app %s: deferred un-protect of %#llx+%llu skipped (protected again)", a->name,
                 (unsigned long long)(v << 12), (unsigned long long)(k - v));
    } else if (iosr_uffd_wp(a->uffd, v << 12, (k - v) << 12, 0) == -EAGAIN) {
      iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, v, k - v, 0);
    }
    v = k;
  }
}

void iosr_fault_again(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t flags) {
  iosr_pte *p = iosr_pt_lookup(&a->pt, vpn, NULL);
  /* re-handle as a fresh fault, unless the page got resolved meanwhile */
  if (p && p->state != IOSR_PTE_PRESENT && p->state != IOSR_PTE_CLEAN) iosr_fault_handle(e, a, vpn << 12, flags, 0);
  else iosr_uffd_wake(a->uffd, vpn << 12, 4096);
  a->st.faults--; /* counted once */
}

void iosr_fault_run_retries(iosr_engine *e) {
  if (e->hold_retries) return;
  iosr_retry *list = e->retries;
  e->retries = NULL;
  while (list) {
    iosr_retry *r = list;
    list = r->next;
    iosr_app *a = iosr_engine_app(e, r->app);
    if (a && a->uffd >= 0) {
      if (r->op == IOSR_RETRY_FAULT) {
        iosr_fault_again(e, a, r->vpn, r->flags);
      } else if (r->op == IOSR_RETRY_UNPROTECT) {
        unprotect_later(e, a, r->vpn, r->n);
      } else if (r->op == IOSR_RETRY_WAKE) {
        iosr_uffd_wake(a->uffd, r->vpn << 12, r->n << 12);
      }
    }
    free(r);
  }
}
