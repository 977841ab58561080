/* Swap-out (brief: "Reclaim"; design note section 9): per step, up to one
 * batch of least recently used pages: write-protect, copy out with
 * process_vm_readv, leave all-zero pages unwritten, allocate slots (global:
 * in reclaim order; process: by virtual address into the app's extents),
 * write contiguous slot runs, then move the pages out of the app
 * (engine/moveout.c) or, where the kernel refuses, have the client's dropper
 * discard them. A write fault on a page being written cancels that page; faults on a
 * page being dropped wait for the drop and then read it back from its slot.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/crc32c.h"
#include "common/histo.h"
#include "common/log.h"
#include "engine/engine_int.h"
#include "uffd/uffd.h"
#include "uffd/vmas.h"

#define IOSR_STEP_APPS 64u

static int cmp_u64(const void *x, const void *y) {
  uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
  return a < b ? -1 : a > b;
}

static int all_zero(const uint8_t *p) {
  const uint64_t *q = (const uint64_t *)p;
  for (int i = 0; i < 512; i += 4)
    if (q[i] | q[i + 1] | q[i + 2] | q[i + 3]) return 0;
  return 1;
}

/* Un-protects a page that stays resident (retried after EAGAIN). */
static void unprotect(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t n) {
  if (a->uffd < 0) return;
  int r = e->hold_retries ? -EAGAIN : iosr_uffd_wp(a->uffd, vpn << 12, n << 12, 0);
  if (r == -EAGAIN) iosr_fault_add_retry(e, a->id, IOSR_RETRY_UNPROTECT, vpn, n, 0);
}

/* A page leaving WRITING without being swapped: resident again. The entry
 * owns its slot reference, so the slot is released here (after the write
 * completes if it is in flight). */
static void keep_resident(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p) {
  iosr_page_put_slot(e, p);
  iosr_page_set_state(e, a, p, IOSR_PTE_PRESENT);
  p->flags = 0;
  unprotect(e, a, vpn, 1);
}

void iosr_swapout_cancel_page(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p) {
  keep_resident(e, a, vpn, p);
}

static void batch_free(iosr_engine *e, iosr_batch *b) {
  iosr_batch **pp = &e->batches;
  while (*pp && *pp != b) pp = &(*pp)->next;
  if (*pp) *pp = b->next;
  if (b->buf) iosr_bufpool_free(&e->bufs, b->buf, (size_t)b->n * 4096);
  free(b);
}

/* The batch's drops were all confirmed (or there was nothing to drop). */
static void batch_done(iosr_engine *e, iosr_batch *b) {
  iosr_job *j = b->job;
  iosr_app *a = iosr_engine_app(e, b->app);
  if (a && a->inflight) a->inflight--;
  if (b->set_aside && a && a->batches_set_aside) a->batches_set_aside--;
  batch_free(e, b);
  if (j) {
    j->batches_inflight--;
    iosr_reclaim_job_done_maybe(e, j);
  }
  if (a) iosr_engine_maybe_finish_app(e, a);
}

/* ---- drops (the records, the dropper's marks: engine/drops.c) ---- */

typedef struct iosr_batch_drops {
  iosr_batch *b;
  uint32_t pending;
} iosr_batch_drops;

void iosr_swapout_send_drop(iosr_engine *e, iosr_app *a, iosr_drop *d) {
  iosr_debug("drop %llu: %#llx +%llu pages", (unsigned long long)d->id, (unsigned long long)(d->start_vpn << 12),
             (unsigned long long)d->n);
  if (d->batch) d->batch->drop_since_ns = iosr_now_ns(); /* its stall is counted from the last ask */
  if (!a->conn) return; /* detached: sent again when the client resumes */
  iosr_m_drop m = {d->id, d->start_vpn << 12, d->n << 12, d->move_to << 12};
  if (iosr_conn_send(e, a->conn, IOSR_M_DROP, 0, 0, &m, sizeof m, NULL, 0))
    iosr_warn("app %s: cannot send a drop request", a->name);
}

/* A WRITING page that a running drop's dropper discarded (mremap moved it
 * into that drop's pages), once its write is done: only in its slot (zero
 * when it was all zero, or when a second REMOVE was the app's); threads
 * that faulted on it meanwhile retry now. */
static void written_discarded(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p, iosr_job *j) {
  int allz = (p->flags & IOSR_PTE_F_ZEROPG) != 0, zero = allz || (p->flags & IOSR_PTE_F_RMX);
  if (zero) iosr_page_put_slot(e, p);
  iosr_page_set_state(e, a, p, zero ? IOSR_PTE_ZERO : IOSR_PTE_SWAPPED);
  iosr_swapout_count_out(a, j, p, allz);
  iosr_uffd_wake(a->uffd, vpn << 12, 4096);
}

/* A batch ends when its writes are done, its move-outs tried and every
 * discard it asked for (of the graveyard or of the app) confirmed. */
void iosr_swapout_batch_release(iosr_engine *e, iosr_batch *b) {
  if (!b->writes_pending && !b->move_wait && !b->drops_pending) batch_done(e, b);
}

static void move_wait(iosr_engine *e, iosr_batch *b, int wait) {
  if (wait == b->move_wait) return;
  b->move_wait = (uint8_t)wait;
  if (wait) e->moveout_waiting++;
  else e->moveout_waiting--;
}

/* The dropper takes run [vpn, vpn + n), DROPPING from now on: it moves the
 * pages to graveyard page `to` (design note section 3, "Moved by the
 * dropper"), or, `to` 0, discards them ("Whose discard"). */
static void drop_run(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n, uint64_t to) {
  for (uint64_t v = vpn; v < vpn + n; v++) {
    iosr_pte *p = iosr_pt_lookup(&a->pt, v, NULL);
    iosr_page_set_state(e, a, p, IOSR_PTE_DROPPING);
    p->flags &= (uint8_t)~(IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX | IOSR_PTE_F_RMAPP);
  }
  iosr_drop *d = iosr_drop_new(a, ++a->drop_seq, vpn, n);
  if (!d) iosr_die("out of memory dropping a batch");
  d->batch = b;
  d->move_to = to;
  b->drops_pending++;
  iosr_swapout_send_drop(e, a, d);
}

/* Run [vpn, vpn + n), written, stays resident: its slots are freed. */
static void keep_run(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n) {
  for (uint64_t v = vpn; v < vpn + n; v++) keep_resident(e, a, v, iosr_pt_lookup(&a->pt, v, NULL));
  if (b->job) b->job->kept_pages += n;
}

/* Most pages one dropper's move takes: several fit in the graveyard at once. */
#define DROPPER_MOVE_MAX 256u

/* Most tries of a batch's move-out after refusals that pass: each waits for
 * one engine turn (the events read, the graveyard's discards confirmed),
 * at least a millisecond; past it the pages stay resident (iosrd) or the
 * dropper discards them (the in-process engine). */
#define MOVE_TRIES 5000

/* Once every write of the batch completed: each run of its pages still
 * WRITING (and still this batch's) is moved out of the app (design note
 * section 3, "Moved out"): by the engine itself when it runs in the app's
 * process, else by the app's dropper ("Moved by the dropper"), which then
 * keeps what the kernel will not move. What cannot be moved for now (an
 * event unread, no graveyard room) waits, WRITING, for a later turn. The
 * dropper's discard by address, with its limits, takes only what the
 * kernel will not move under the in-process engine, and every run where
 * neither can move (IOSR_MOVEOUT=0, no UFFDIO_MOVE, no graveyard). */
static void move_out(iosr_engine *e, iosr_batch *b) {
  iosr_app *a = iosr_engine_app(e, b->app);
  if (!a || a->uffd < 0 || a->state == IOSR_APP_DEAD) {
    move_wait(e, b, 0);
    iosr_swapout_batch_release(e, b);
    return;
  }
  uint64_t *v = malloc(sizeof(uint64_t) * b->n);
  if (!v) iosr_die("out of memory dropping a batch");
  uint32_t nv = 0;
  int usable = iosr_moveout_usable(e, a), by_dropper = !usable && iosr_moveout_by_dropper(e, a), wait = 0;
  for (uint32_t i = 0; i < b->n; i++) {
    iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[i], NULL);
    if (!p || p->state != IOSR_PTE_WRITING) continue;
    /* tried again: a page a write took back meanwhile and a later batch
     * picked again (it may hold this batch's freed slot) is that batch's */
    if (b->move_tries && p->aux != b->seq && !(p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX))) continue;
    if (b->zero[i] == IOSR_BATCH_ZERO ? !(p->flags & IOSR_PTE_F_ZEROPG) : p->slot != b->slot[i]) continue;
    if (!b->zero[i] && b->slot[i] == IOSR_NO_SLOT) continue;
    if (p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) {
      written_discarded(e, a, b->vpn[i], p, b->job);
      continue;
    }
    v[nv++] = b->vpn[i];
  }
  qsort(v, nv, sizeof *v, cmp_u64);
  for (uint32_t i = 0; i < nv;) {
    uint32_t k = i + 1;
    while (k < nv && v[k] == v[k - 1] + 1) k++;
    if (by_dropper && k - i > DROPPER_MOVE_MAX) k = i + DROPPER_MOVE_MAX;
    int why = 0;
    uint64_t moved = iosr_moveout_run(e, a, b, v[i], k - i, &why);
    uint64_t rest = v[i] + moved, nrest = k - i - moved;
    i = k;
    if (!nrest) continue;
    if (by_dropper) {
      /* never the dropper's madvise: after the tries the pages stay, and at
       * once when the app does not answer its drops (design note section 9):
       * only its answers make graveyard room */
      int64_t g = iosr_moveout_reserve(e, a, nrest);
      if (g >= 0) drop_run(e, a, b, rest, nrest, a->grave + (uint64_t)g);
      else if (b->move_tries < MOVE_TRIES && !a->batches_set_aside) wait = 1;
      else keep_run(e, a, b, rest, nrest);
      continue;
    }
    if (usable && (why == -EAGAIN || why == -ENOSPC || why == -EEXIST) && b->move_tries < MOVE_TRIES)
      wait = 1; /* WRITING still: a write cancels it, a discard of the app's releases it */
    else
      drop_run(e, a, b, rest, nrest, 0);
  }
  free(v);
  if (wait) b->move_tries++;
  move_wait(e, b, wait);
  iosr_swapout_batch_release(e, b);
}

static void batch_written(iosr_engine *e, iosr_batch *b) {
  if (b->buf) {
    iosr_bufpool_free(&e->bufs, b->buf, b->n * 4096);
    b->buf = NULL;
  }
  move_out(e, b);
}

void iosr_swapout_run_move_retries(iosr_engine *e) {
  if (!e->moveout_waiting) return;
  /* a batch may end (and be freed) in move_out: the next is taken first */
  for (iosr_batch *b = e->batches, *nx; b; b = nx) {
    nx = b->next;
    if (b->move_wait) move_out(e, b);
  }
}

static uint32_t batch_outgoing(const iosr_batch *b);

void iosr_swapout_set_aside_stalled(iosr_engine *e, uint64_t now) {
  uint64_t stall = (uint64_t)e->set.drop_stall_ms * 1000000u;
  e->stall_due_ns = 0;
  for (iosr_batch *b = e->batches; b; b = b->next) {
    if (b->set_aside || !b->drops_pending || b->writes_pending || b->move_wait) continue;
    if (now < b->drop_since_ns + stall) {
      if (!e->stall_due_ns || b->drop_since_ns + stall < e->stall_due_ns) e->stall_due_ns = b->drop_since_ns + stall;
      continue;
    }
    b->set_aside = 1;
    iosr_app *a = iosr_engine_app(e, b->app);
    uint32_t n = batch_outgoing(b);
    if (a && !a->batches_set_aside++)
      iosr_warn("app %s has not answered a drop for %u ms: reclaim passes it by until it does", a->name,
                e->set.drop_stall_ms);
    iosr_job *j = b->job;
    if (!j) continue;
    b->job = NULL; /* the job may end here: the batch no longer points at it */
    j->waiting_pages += n;
    j->batches_inflight--;
    iosr_reclaim_job_done_maybe(e, j);
  }
}

uint32_t iosr_swapout_inflight(const iosr_engine *e) {
  uint32_t n = 0;
  for (const iosr_batch *b = e->batches; b; b = b->next) n += !b->set_aside;
  return n;
}

void iosr_swapout_count_out(iosr_app *a, iosr_job *j, iosr_pte *p, int zero) {
  if (p->state == IOSR_PTE_SWAPPED) {
    if (p->flags & IOSR_PTE_F_CLEAN) a->st.clean_drops++;
    a->st.swapout_pages++;
    if (j) j->swapped_pages++;
  } else if (zero) {
    a->st.zero_pages++;
    if (j) j->zero_pages++;
  }
  p->flags = 0;
}

/* ---- writes ---- */

void iosr_swapout_write_done(iosr_engine *e, iosr_req *r) {
  iosr_debug("write done slot %llu n %u res %d", (unsigned long long)r->s.slot, r->s.npages, r->cb.res);
  iosr_sched_done(&e->sched, &r->s);
  for (uint32_t i = 0; i < r->s.npages; i++) iosr_slot_io_end(&e->slots, r->s.slot + i);
  iosr_batch *b = r->batch;
  int res = r->cb.res;
  if (res >= 0 && e->fail_writes) {
    e->fail_writes--;
    res = -EIO;
  }
  iosr_app *a = iosr_engine_app(e, b->app);
  e->writes++;
  e->write_bytes += (uint64_t)r->s.npages * 4096;
  if (a) {
    a->st.write_reqs++;
    a->st.write_bytes += (uint64_t)r->s.npages * 4096;
    a->st.write_hist[iosr_size_bucket((uint64_t)r->s.npages * 4096)]++;
  }
  if (res < 0) {
    e->io_errors++;
    if (a) a->st.write_errors++;
    b->write_err = -res;
    if (b->job && !b->job->err) b->job->err = EIO;
    iosr_warn("write of %u slots at %llu failed: %s; the pages stay resident", r->s.npages,
              (unsigned long long)r->s.slot, strerror(-res));
    for (uint32_t i = 0; i < r->s.npages; i++) {
      uint64_t s = r->s.slot + i;
      iosr_slot_mark_bad(&e->slots, s);
      uint64_t vpn = r->tgt[i].vpn;
      iosr_pte *p = a ? iosr_pt_lookup(&a->pt, vpn, NULL) : NULL;
      if (p && p->state == IOSR_PTE_WRITING && p->slot == s) {
        if (p->flags & (IOSR_PTE_F_RM1 | IOSR_PTE_F_RMX)) {
          /* the dropper discarded it (moved into a drop's pages) and its
           * slot holds nothing: lost, and loud (SIGBUS), never zero */
          iosr_page_put_slot(e, p);
          iosr_page_set_state(e, a, p, IOSR_PTE_POISONED);
          p->flags = 0;
          if (a->uffd >= 0 && (a->uffd_features & UFFD_FEATURE_POISON)) iosr_uffd_poison(a->uffd, vpn << 12, 4096);
          if (a->uffd >= 0) iosr_uffd_wake(a->uffd, vpn << 12, 4096);
          continue;
        }
        keep_resident(e, a, vpn, p);
        if (b->job) b->job->kept_pages++;
      }
    }
  }
  iosr_req_free(e, r);
  if (--b->writes_pending == 0) batch_written(e, b);
}

static int cmp_vpn_idx(const void *x, const void *y) {
  const uint64_t *a = x, *b = y;
  return a[0] < b[0] ? -1 : a[0] > b[0];
}

/* Builds one app's batch from the step's pages (in candidate order): marks
 * WRITING, write-protects, copies out. Returns NULL when nothing could be
 * started (pages stay resident). */
static void retry_later(iosr_job *j, iosr_app *a, const uint64_t *vpns, uint32_t n) {
  if (j->again_pos == j->nagain) j->again_pos = j->nagain = 0;
  if (j->nagain + n > j->capagain) {
    size_t nc = (j->nagain + n) * 2;
    iosr_cand *v = realloc(j->again, nc * sizeof *v);
    if (!v) return; /* they stay resident */
    j->again = v;
    j->capagain = nc;
  }
  for (uint32_t i = 0; i < n; i++) j->again[j->nagain++] = (iosr_cand){0, 0, a->id, 0, vpns[i]};
}

/* Moves the batch's CLEAN pages (nothing to write) after the others, each
 * group in its order: the pages written stay adjacent in the buffer, so
 * consecutive slots make one write request. */
static void clean_last(iosr_app *a, iosr_batch *b) {
  uint64_t clean[IOSR_MAX_BATCH];
  uint32_t nd = 0, nc = 0;
  for (uint32_t i = 0; i < b->n; i++) {
    if (iosr_pt_lookup(&a->pt, b->vpn[i], NULL)->state == IOSR_PTE_CLEAN) clean[nc++] = b->vpn[i];
    else b->vpn[nd++] = b->vpn[i];
  }
  memcpy(b->vpn + nd, clean, nc * sizeof clean[0]);
}

static iosr_batch *start_batch(iosr_engine *e, iosr_job *j, iosr_app *a, const uint64_t *vpns, uint32_t n) {
  iosr_batch *b = calloc(1, sizeof *b);
  if (!b) iosr_die("out of memory starting a swap-out batch");
  b->job = j;
  b->app = a->id;
  b->seq = ++e->batch_seq;
  memcpy(b->vpn, vpns, n * sizeof *vpns);
  b->n = n;
  if (e->set.slot == IOSR_SLOT_PROCESS) {
    /* SIOR: the buffer (and so the slots) in virtual-address order */
    qsort(b->vpn, n, sizeof b->vpn[0], cmp_u64);
  }
  clean_last(a, b);
  b->buf = iosr_bufpool_alloc(&e->bufs, (size_t)n * 4096);
  if (!b->buf) {
    /* the arena is busy with reads: try these pages after completions */
    retry_later(j, a, vpns, n);
    free(b);
    return NULL;
  }
  /* 1. WRITING + write-protect, per run of consecutive pages */
  uint64_t (*sorted)[2] = malloc(sizeof *sorted * n);
  if (!sorted) iosr_die("out of memory starting a swap-out batch");
  uint32_t ns = 0;
  for (uint32_t i = 0; i < n; i++) {
    /* a CLEAN page is write-protected already (and must stay so) */
    if (iosr_pt_lookup(&a->pt, b->vpn[i], NULL)->state == IOSR_PTE_CLEAN) continue;
    sorted[ns][0] = b->vpn[i];
    sorted[ns++][1] = i;
  }
  qsort(sorted, ns, sizeof *sorted, cmp_vpn_idx);
  int failed = 0;
  for (uint32_t i = 0; i < ns;) {
    uint32_t k = i + 1;
    while (k < ns && sorted[k][0] == sorted[k - 1][0] + 1) k++;
    int r = iosr_uffd_wp(a->uffd, sorted[i][0] << 12, (uint64_t)(k - i) << 12, 1);
    if (r) {
      failed = r;
      /* un-protect what was protected, give up this batch */
      for (uint32_t q = 0; q < i;) {
        uint32_t t = q + 1;
        while (t < i && sorted[t][0] == sorted[t - 1][0] + 1) t++;
        unprotect(e, a, sorted[q][0], t - q);
        q = t;
      }
      break;
    }
    i = k;
  }
  free(sorted);
  if (failed) {
    iosr_bufpool_free(&e->bufs, b->buf, (size_t)n * 4096);
    free(b);
    /* EAGAIN: an event (often our own drop's REMOVE) is being delivered;
     * try these pages again once the loop has read it */
    iosr_debug("app %s: write-protect of %u pages: %s", a->name, n, strerror(-failed));
    if (failed == -EAGAIN) retry_later(j, a, vpns, n);
    else iosr_debug("app %s: write-protect failed: %s", a->name, strerror(-failed));
    return NULL;
  }
  for (uint32_t i = 0; i < n; i++) {
    iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[i], NULL);
    if (p->state == IOSR_PTE_CLEAN) {
      /* its slot holds its bytes and checksum: it keeps it, nothing is written */
      iosr_page_set_state(e, a, p, IOSR_PTE_WRITING);
      p->flags = IOSR_PTE_F_CLEAN;
      p->aux = b->seq;
      b->slot[i] = p->slot;
      b->zero[i] = IOSR_BATCH_CLEAN;
      continue;
    }
    iosr_page_set_state(e, a, p, IOSR_PTE_WRITING);
    p->flags = 0;
    p->aux = b->seq;
    p->slot = IOSR_PTE_NO_SLOT; /* a PRESENT entry owns no slot: it gets one below, or none */
    b->slot[i] = IOSR_NO_SLOT;
  }
  /* 2. copy out, in buffer order, one iovec per run of consecutive pages */
  struct iovec local = {b->buf, (size_t)n * 4096};
  struct iovec *remote = malloc(sizeof *remote * n);
  if (!remote) iosr_die("out of memory starting a swap-out batch");
  uint32_t nr = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (nr && (uint64_t)(uintptr_t)remote[nr - 1].iov_base + remote[nr - 1].iov_len == b->vpn[i] << 12) {
      remote[nr - 1].iov_len += 4096;
    } else {
      remote[nr].iov_base = (void *)(uintptr_t)(b->vpn[i] << 12);
      remote[nr].iov_len = 4096;
      nr++;
    }
  }
  size_t got = 0;
  for (uint32_t off = 0; off < nr;) {
    uint32_t cnt = nr - off > 1024 ? 1024 : nr - off;
    size_t want = 0;
    for (uint32_t q = 0; q < cnt; q++) want += remote[off + q].iov_len;
    struct iovec l = {b->buf + got, want};
    ssize_t k = process_vm_readv(a->pid, &l, 1, remote + off, cnt, 0);
    if (k > 0) got += (size_t)k;
    if (k < 0 || (size_t)k < want) break;
    off += cnt;
  }
  (void)local;
  free(remote);
  uint32_t readable = (uint32_t)(got / 4096);
  if (readable < n) iosr_debug("app %s: copied out %u of %u pages", a->name, readable, n);
  for (uint32_t i = readable; i < n; i++) {
    /* unreadable (unmapped, PROT_NONE, or the app is gone): stays resident */
    iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[i], NULL);
    if (p && p->state == IOSR_PTE_WRITING) {
      keep_resident(e, a, b->vpn[i], p);
      j->kept_pages++;
    }
  }
  if (readable < n && !readable) iosr_debug("app %s: process_vm_readv read nothing", a->name);
  for (uint32_t i = 0; i < readable; i++) {
    const uint8_t *pg = b->buf + (size_t)i * 4096;
    if (b->zero[i] == IOSR_BATCH_CLEAN) continue;
    if (all_zero(pg)) {
      iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[i], NULL);
      if (p && p->state == IOSR_PTE_WRITING) {
        b->zero[i] = IOSR_BATCH_ZERO;
        p->flags |= IOSR_PTE_F_ZEROPG;
      }
    } else {
      b->crc[i] = iosr_crc32c_page(pg); /* of exactly the bytes the write takes */
    }
  }
  for (uint32_t i = readable; i < n; i++) b->zero[i] = IOSR_BATCH_KEPT; /* not part of the batch */
  return b;
}

/* Queues the writes of a batch whose slots are assigned. */
static void queue_writes(iosr_engine *e, iosr_batch *b) {
  uint64_t now = iosr_now_ns();
  uint32_t maxp = (uint32_t)(e->set.max_io / 4096);
  uint32_t nw = 0;
  for (uint32_t i = 0; i < b->n;) {
    if (b->zero[i] || b->slot[i] == IOSR_NO_SLOT) {
      i++;
      continue;
    }
    uint32_t k = i + 1;
    while (k < b->n && k - i < maxp && !b->zero[k] && b->slot[k] != IOSR_NO_SLOT && b->slot[k] == b->slot[k - 1] + 1)
      k++;
    uint32_t n = k - i;
    iosr_req *r = calloc(1, sizeof *r + n * sizeof(iosr_target));
    if (!r) iosr_die("out of memory building a write request");
    r->kind = IOSR_REQ_WRITE;
    r->s.slot = b->slot[i];
    r->s.npages = n;
    r->s.app = b->app;
    r->s.cls = IOSR_CLS_WRITE;
    r->s.write = 1;
    r->batch = b;
    r->buf = b->buf + (size_t)i * 4096;
    r->buf_bytes = (size_t)n * 4096;
    r->fault_idx = r->trigger_idx = UINT32_MAX;
    r->t_submit = now;
    for (uint32_t q = 0; q < n; q++) {
      r->tgt[q].app = b->app;
      r->tgt[q].vpn = b->vpn[i + q];
      iosr_slot_io_begin(&e->slots, b->slot[i + q]);
    }
    iosr_req_link(e, r);
    iosr_sched_push(&e->sched, &r->s, now);
    nw++;
    i = k;
  }
  b->writes_pending = nw;
  if (!nw) batch_written(e, b);
}

/* Page t of batch b (WRITING) takes slot s: from here its entry owns the
 * slot, with the checksum of the bytes written there. */
static void give_slot(iosr_pte *p, iosr_batch *b, uint32_t t, uint32_t s) {
  p->slot = b->slot[t] = s;
  p->crc = iosr_slot_crc(b->crc[t], s);
}

static void area_full(iosr_engine *e, iosr_job *j) {
  j->err = ENOSPC;
  if (!e->full_warned++)
    iosr_warn("swap area full (%llu slots): reclaim stops, pages stay resident", (unsigned long long)e->slots.nslots);
}

/* The pages of batch b still on their way out (written or dropped): those
 * kept resident (area full, unreadable) are not, so a partial reclaim takes
 * others in their place. */
static uint32_t batch_outgoing(const iosr_batch *b) {
  uint32_t n = 0;
  for (uint32_t i = 0; i < b->n; i++)
    n += b->zero[i] == IOSR_BATCH_ZERO || b->zero[i] == IOSR_BATCH_CLEAN || (!b->zero[i] && b->slot[i] != IOSR_NO_SLOT);
  return n;
}

static int step(iosr_engine *e, iosr_job *j) {
  if (j->err) return 0;
  if (e->grace_until_ns && iosr_now_ns() < e->grace_until_ns) {
    j->err = EAGAIN;
    return 0;
  }
  uint32_t maxn = e->set.reclaim_batch;
  if (maxn > e->set.max_io / 4096) maxn = (uint32_t)(e->set.max_io / 4096);
  if (maxn > IOSR_MAX_BATCH) maxn = IOSR_MAX_BATCH;
  /* gather up to maxn still-present candidates, in LRU order */
  iosr_cand *take = malloc(sizeof *take * maxn);
  if (!take) iosr_die("out of memory in reclaim");
  uint32_t nt = 0;
  uint64_t done = j->swapped_pages + j->zero_pages;
  uint64_t inflight_pages = 0;
  for (iosr_batch *b = e->batches; b; b = b->next)
    if (b->job == j) inflight_pages += batch_outgoing(b);
  uint32_t step_apps[IOSR_STEP_APPS], nsa = 0;
  while ((j->again_pos < j->nagain || j->pos < j->ncand) && nt < maxn) {
    if (j->target_pages && done + inflight_pages + nt >= j->target_pages) break;
    int from_again = j->again_pos < j->nagain;
    iosr_cand *c = from_again ? &j->again[j->again_pos] : &j->cand[j->pos];
    uint32_t k = 0;
    while (k < nsa && step_apps[k] != c->app) k++;
    if (k == nsa) {
      if (nsa == IOSR_STEP_APPS) break; /* the rest goes in the next step */
      step_apps[nsa++] = c->app;
    }
    if (from_again) j->again_pos++;
    else j->pos++;
    iosr_app *a = iosr_engine_app(e, c->app);
    if (!a || a->uffd < 0 || a->forked || !a->conn) continue;
    /* a budget job takes the foreground app's pages only where it chose
     * them as such (none left in the background): a page of an app that
     * came to the foreground since stays */
    if (j->budget && !c->pri && c->app == e->fg_app) continue;
    iosr_pte *p = iosr_pt_lookup(&a->pt, c->vpn, NULL);
    if (!p || (p->state != IOSR_PTE_PRESENT && p->state != IOSR_PTE_CLEAN)) continue;
    if (a->batches_set_aside) {
      j->waiting_pages++; /* its drops unanswered (design note section 9): it stays */
      continue;
    }
    take[nt++] = *c;
  }
  if (!nt) {
    free(take);
    return 0;
  }
  /* one batch per app, pages in candidate order */
  iosr_batch *bs[IOSR_STEP_APPS];
  uint32_t nb = 0;
  uint64_t *vp = malloc(sizeof *vp * nt);
  if (!vp) iosr_die("out of memory in reclaim");
  uint8_t *used = calloc(nt, 1);
  for (uint32_t i = 0; i < nt && nb < IOSR_STEP_APPS; i++) {
    if (used[i]) continue;
    uint32_t n = 0;
    for (uint32_t k = i; k < nt; k++)
      if (!used[k] && take[k].app == take[i].app) {
        vp[n++] = take[k].vpn;
        used[k] = 1;
      }
    iosr_app *a = iosr_engine_app(e, take[i].app);
    iosr_batch *b = start_batch(e, j, a, vp, n);
    if (b) bs[nb++] = b;
  }
  free(vp);
  free(used);
  /* slots: global in candidate (reclaim) order across apps, as Linux hands
   * them out; process per batch in address order, appended to the app's
   * extent, so each batch is one contiguous run */
  if (e->set.slot == IOSR_SLOT_PROCESS) {
    for (uint32_t q = 0; q < nb && !j->err; q++) {
      iosr_batch *b = bs[q];
      iosr_app *a = iosr_engine_app(e, b->app);
      for (uint32_t t = 0; t < b->n && !j->err; t++) {
        if (b->zero[t]) continue;
        iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[t], NULL);
        if (!p || p->state != IOSR_PTE_WRITING) continue;
        uint32_t s = iosr_slot_alloc_process(&e->slots, &a->ext, a->id, b->vpn[t]);
        if (s == IOSR_NO_SLOT) area_full(e, j);
        else give_slot(p, b, t, s);
      }
    }
  } else {
    for (uint32_t i = 0; i < nt && !j->err; i++) {
      iosr_batch *b = NULL;
      uint32_t bi = 0;
      for (uint32_t q = 0; q < nb && !b; q++)
        if (bs[q]->app == take[i].app)
          for (uint32_t t = 0; t < bs[q]->n; t++)
            if (bs[q]->vpn[t] == take[i].vpn) {
              b = bs[q];
              bi = t;
              break;
            }
      if (!b || b->zero[bi]) continue;
      iosr_app *a = iosr_engine_app(e, b->app);
      iosr_pte *p = iosr_pt_lookup(&a->pt, take[i].vpn, NULL);
      if (!p || p->state != IOSR_PTE_WRITING) continue;
      uint32_t s = iosr_slot_alloc_global(&e->slots, a->id, take[i].vpn);
      if (s == IOSR_NO_SLOT) area_full(e, j);
      else give_slot(p, b, bi, s);
    }
  }
  /* pages left without a slot (area full) stay resident */
  for (uint32_t q = 0; q < nb; q++) {
    iosr_batch *b = bs[q];
    iosr_app *a = iosr_engine_app(e, b->app);
    for (uint32_t t = 0; t < b->n; t++) {
      if (b->zero[t] || b->slot[t] != IOSR_NO_SLOT) continue;
      iosr_pte *p = iosr_pt_lookup(&a->pt, b->vpn[t], NULL);
      if (p && p->state == IOSR_PTE_WRITING) {
        keep_resident(e, a, b->vpn[t], p);
        j->kept_pages++;
      }
    }
  }
  free(take);
  for (uint32_t q = 0; q < nb; q++) {
    iosr_batch *b = bs[q];
    b->next = e->batches;
    e->batches = b;
    j->batches_inflight++;
    iosr_app *a = iosr_engine_app(e, b->app);
    a->inflight++;
    /* process policy: the buffer is in address order and slots follow it;
     * zero pages (zero == 1) and unreadable ones (2) are skipped */
    queue_writes(e, b);
  }
  /* 0 when nothing started (all pages gone, or write-protect must wait for
   * an event to be read): the loop goes back to epoll before trying again */
  return nb > 0;
}

/* One step of job j. Returns 1 if a batch was started, 0 if the job has
 * nothing more to start now. A batch with nothing to write or drop (every
 * page kept resident: area full, unreadable) ends inside the step; the job
 * is not ended under it (`stepping`): the step goes on using it, and the
 * caller ends it (iosr_reclaim_job_done_maybe). */
int iosr_swapout_step(iosr_engine *e, iosr_job *j) {
  j->stepping = 1;
  int r = step(e, j);
  j->stepping = 0;
  return r;
}

/* The app is gone: its pending drops will never be confirmed. */
void iosr_swapout_forget_app(iosr_engine *e, iosr_app *a) {
  iosr_moveout_forget(e, a);
  while (a->drops) {
    iosr_drop *d = a->drops;
    a->drops = d->next;
    iosr_batch *b = d->batch;
    iosr_drop_free(d);
    if (b && --b->drops_pending == 0) iosr_swapout_batch_release(e, b);
  }
}
