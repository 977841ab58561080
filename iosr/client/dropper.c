/* The dropper (design note sections 1, 9 and 12): the thread that discards,
 * with madvise(MADV_DONTNEED), pages the daemon has written out, and the
 * confirmations it sends back.
 *
 * Restart without loss: a drop belongs to the daemon that asked for it.
 * When the connection is lost, queued drops are undone (never run: their
 * pages are still mapped, the next daemon sees them present); the drop
 * running then is named in the RESUME hello, and its confirmation goes to
 * the daemon that accepted that hello, never onto the old socket. Drops the
 * dropper began are numbered in the hello too (the daemon's ids rise), so a
 * daemon that kept its records knows which of them ran.
 *
 * Locks: ctx->mu guards the queue, cur, held and connected; a confirmation
 * is sent with mu held (then send_mu), so the socket it goes out on is the
 * one `connected` describes. Nothing takes mu while holding send_mu.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "client/client_int.h"
#include "common/beacon.h"
#include "uffd/uffd.h"

void (*iosr_test_drop_gate)(uint64_t id, int after);

/* Sends a confirmation, or keeps the one of the reported drop until the
 * resume completes. Caller holds ctx->mu. */
static void confirm_locked(iosr_ctx *ctx, uint64_t id, int err) {
  if (!ctx->connected) {
    if (id && id == ctx->reported_drop) ctx->held = (iosr_m_dropped){id, err, 0};
    return; /* any other: the next daemon settles it from what the kernel holds */
  }
  iosr_m_dropped d = {id, err, 0};
  pthread_mutex_lock(&ctx->send_mu);
  iosr_msg_send(ctx->sock, IOSR_M_DROPPED, 0, 0, &d, sizeof d, NULL, 0);
  pthread_mutex_unlock(&ctx->send_mu);
}

uint64_t iosr_ctx_beacon_open(int uffd, int *grave) {
  size_t blen = (size_t)IOSR_BEACON_PAGES * 4096, glen = (size_t)IOSR_GRAVE_PAGES * 4096;
  *grave = 0;
  /* PROT_NONE first: under mlockall(MCL_FUTURE) the area is locked, and a
   * locked read-write mapping would be populated */
  void *b = mmap(NULL, blen + glen, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (b == MAP_FAILED) return 0;
  void *g = (char *)b + blen;
  /* the graveyard: read-write (a page moves only between VMAs of the same
   * access) and unlocked, so that pages of unlocked regions move into it */
  int have_grave = !munlock(g, glen) && !mprotect(g, glen, PROT_READ | PROT_WRITE);
  if (!have_grave) munmap(g, glen);
  size_t len = blen + (have_grave ? glen : 0);
  /* not inherited: a fork child has no dropper, and its copy would only
   * split the child's events */
  if (madvise(b, len, MADV_DONTFORK) || iosr_uffd_register(uffd, (uint64_t)(uintptr_t)b, len)) {
    munmap(b, len);
    return 0;
  }
  *grave = have_grave;
  return (uint64_t)(uintptr_t)b;
}

int iosr_ctx_grave_unlock(iosr_ctx *ctx) {
  if (!ctx->grave) return -1;
  void *g = (void *)(uintptr_t)(ctx->beacon + (uint64_t)IOSR_BEACON_PAGES * 4096);
  return munlock(g, (size_t)IOSR_GRAVE_PAGES * 4096);
}

void iosr_ctx_beacon_close(iosr_ctx *ctx) {
  if (!ctx->beacon) return;
  size_t len = (size_t)(IOSR_BEACON_PAGES + (ctx->grave ? IOSR_GRAVE_PAGES : 0)) * 4096;
  if (ctx->uffd >= 0) iosr_uffd_unregister(ctx->uffd, ctx->beacon, len);
  munmap((void *)(uintptr_t)ctx->beacon, len);
  ctx->beacon = 0;
  ctx->grave = 0;
}

#ifndef MADV_DONTNEED_LOCKED
#define MADV_DONTNEED_LOCKED 24
#endif

/* A dropper's mark (common/beacon.h): a discard of pages [first, first +
 * pages) of the beacon area, never populated, whose REMOVE the daemon reads
 * in order with the dropper's own. The app may have locked the area
 * (mlockall): MADV_DONTNEED_LOCKED (Linux 5.18), else the range is unlocked
 * first. 0, or -1 when no mark could be made. */
static int mark(iosr_ctx *ctx, uint64_t first, uint64_t pages) {
  void *p = (void *)(uintptr_t)(ctx->beacon + first * 4096);
  size_t len = (size_t)pages * 4096;
  if (!madvise(p, len, MADV_DONTNEED_LOCKED) || !madvise(p, len, MADV_DONTNEED)) return 0;
  return munlock(p, len) || madvise(p, len, MADV_DONTNEED) ? -1 : 0;
}

#define PM_UFFD_WP (1ull << 57)

/* Which pages of [start, start + n pages) carry userfaultfd write protection
 * (the kernel's pagemap), into ctx->pm. 0, or -1 (no pagemap). */
static int protected_pages(iosr_ctx *ctx, uint64_t start, uint64_t n) {
  if (ctx->pagemap_fd < 0) return -1;
  size_t want = (size_t)n * sizeof ctx->pm[0];
  return pread(ctx->pagemap_fd, ctx->pm, want, (off_t)(start >> 12) * 8) == (ssize_t)want ? 0 : -1;
}

/* 1 when drop d is of the graveyard (common/beacon.h). */
static int in_graveyard(const iosr_ctx *ctx, const iosr_dropreq *d) {
  uint64_t g = ctx->beacon + (uint64_t)IOSR_BEACON_PAGES * 4096, end = g + (uint64_t)IOSR_GRAVE_PAGES * 4096;
  return ctx->grave && d->start >= g && d->start < end && d->len <= end - d->start;
}

/* Discards pages the daemon moved out of the app (design note section 3,
 * "Moved out"): they are nobody's but the daemon's, so no check and no
 * marks; a REMOVE there is never the app's. The graveyard is locked only if
 * the app locked it (mlockall(MCL_CURRENT)). */
static int discard_graveyard(const iosr_dropreq *d) {
  void *p = (void *)(uintptr_t)d->start;
  if (iosr_test_drop_gate) iosr_test_drop_gate(d->id, 3);
  if (!madvise(p, d->len, MADV_DONTNEED_LOCKED) || !madvise(p, d->len, MADV_DONTNEED)) return 0;
  return errno;
}

/* Discards the pages of the drop that are still the daemon's to discard
 * (design note section 3, "Whose discard", "What the dropper discards"). It
 * discards by address, and since the drop was asked for, the app may have
 * moved other pages there (mremap) or mapped other memory there: only
 * write-protected pages are discarded (every page being swapped out is, until
 * it is settled; a page moved in is not), in runs of consecutive ones. A
 * drop mark names the drop, a run mark announces each run just before its
 * madvise, the end mark follows the last: the daemon takes a REMOVE as the
 * dropper's only over an announced run, before the next mark. No such page:
 * ENOENT, nothing discarded. A mark that cannot be made
 * keeps its pages resident (EAGAIN for the drop mark; a run's pages are
 * skipped), never the other way round. A first madvise error is reported
 * (EINVAL: a locked VMA; ENOMEM: a VMA went away) after the other runs; the
 * daemon settles each page from what the kernel holds. */
static int discard(iosr_ctx *ctx, const iosr_dropreq *d) {
  if (in_graveyard(ctx, d)) return discard_graveyard(d);
  uint64_t n = d->len >> 12;
  if (n > IOSR_DROP_MAX_PAGES) n = IOSR_DROP_MAX_PAGES; /* the daemon never asks for more */
  int known = protected_pages(ctx, d->start, n) == 0;
  uint64_t any = 0;
  for (uint64_t k = 0; known && k < n; k++) any |= ctx->pm[k] & PM_UFFD_WP;
  if (known && !any) return ENOENT;
  if (iosr_test_drop_gate) iosr_test_drop_gate(d->id, 2);
  uint64_t first, pages;
  iosr_beacon_drop_mark(d->id, &first, &pages);
  if (ctx->beacon && mark(ctx, first, pages)) return EAGAIN;
  int err = 0;
  for (uint64_t k = 0; k < n;) {
    if (known && !(ctx->pm[k] & PM_UFFD_WP)) {
      k++;
      continue;
    }
    uint64_t e = k + 1;
    while (e < n && (!known || (ctx->pm[e] & PM_UFFD_WP))) e++;
    iosr_beacon_run_mark(k, e - k, &first, &pages);
    if (!ctx->beacon || !mark(ctx, first, pages)) {
      if (iosr_test_drop_gate) iosr_test_drop_gate(d->id, 3);
      /* blocks until the daemon has read the REMOVE event this produces */
      if (madvise((void *)(uintptr_t)(d->start + (k << 12)), (e - k) << 12, MADV_DONTNEED) && !err) err = errno;
    }
    k = e;
  }
  /* done: a REMOVE over these pages from now on is the app's */
  iosr_beacon_end_mark(&first, &pages);
  if (ctx->beacon) mark(ctx, first, pages);
  return err;
}

/* 1 when ctx->go answers the mark of drop id. Caller holds ctx->mu. */
static int go_for(const iosr_ctx *ctx, uint64_t id) {
  return ctx->go.id && (ctx->go.id == id || (!ctx->go.npages && (uint16_t)ctx->go.id == (uint16_t)id));
}

/* Moves the pages of drop d that the daemon names into the graveyard at
 * d->grave (design note section 3, "Moved by the dropper"). The drop mark
 * tells the daemon the dropper begins; it answers which pages of the run are
 * still the drop's, at their addresses, and reads no more of the app's
 * events until it has the confirmation. The kernel refuses a move while an
 * event is unread (EAGAIN), so a move that succeeds takes exactly the page
 * the daemon named, and no REMOVE over the app's memory is ever made. A page
 * the kernel will not move (shared with a fork child, a locked or read-only
 * VMA) stays; the rest of its run is tried. Fills ctx->moved; returns 0 or
 * the first error (EAGAIN: the rest was not tried; ENOTCONN: the daemon went
 * away before it answered, nothing moved). Touches no memory of the app's
 * regions: the daemon serves no fault of the app until the confirmation. */
static int move_drop(iosr_ctx *ctx, const iosr_dropreq *d) {
  iosr_m_drop_moved *out = &ctx->moved;
  memset(out, 0, sizeof *out);
  out->id = d->id;
  uint64_t n = d->len >> 12, first, pages;
  if (n > IOSR_DROP_MAX_PAGES) n = IOSR_DROP_MAX_PAGES;
  out->npages = (uint32_t)n;
  if (iosr_test_drop_gate) iosr_test_drop_gate(d->id, 2);
  /* the answer comes after the mark is read, on this connection: one from
   * before, or from a daemon that died since, is not this drop's */
  pthread_mutex_lock(&ctx->mu);
  uint32_t epoch = ctx->epoch;
  memset(&ctx->go, 0, sizeof ctx->go);
  pthread_mutex_unlock(&ctx->mu);
  iosr_beacon_drop_mark(d->id, &first, &pages);
  if (!ctx->beacon || mark(ctx, first, pages)) return EAGAIN;
  pthread_mutex_lock(&ctx->mu);
  while (!go_for(ctx, d->id) && ctx->epoch == epoch && !ctx->stopping) pthread_cond_wait(&ctx->cv, &ctx->mu);
  /* moving, decided with the connection it belongs to: a resume hello
   * waits until these moves are done, and after a lost connection none
   * begins (the next daemon may read events by then) */
  int have = go_for(ctx, d->id) && ctx->epoch == epoch;
  iosr_m_drop_go g = ctx->go;
  memset(&ctx->go, 0, sizeof ctx->go);
  ctx->moving = have;
  pthread_mutex_unlock(&ctx->mu);
  if (!have) return ENOTCONN;
  if (iosr_test_drop_gate) iosr_test_drop_gate(d->id, 4);
  uint64_t gn = g.npages < n ? g.npages : n;
  int err = 0, unlocked = 0;
  for (uint64_t k = 0; k < gn;) {
    if (!iosr_drop_bit(g.bits, k)) {
      k++;
      continue;
    }
    uint64_t e = k + 1;
    while (e < gn && iosr_drop_bit(g.bits, e)) e++;
    uint64_t done = 0;
    int r = iosr_uffd_move(ctx->uffd, d->grave + (k << 12), d->start + (k << 12), (e - k) << 12, &done);
    uint64_t m = done >> 12;
    for (uint64_t q = k; q < k + m; q++) out->bits[q / 64] |= 1ull << (q % 64);
    if (!r) {
      k = e;
      continue;
    }
    if (r == -EINVAL && !unlocked++ && !iosr_ctx_grave_unlock(ctx)) {
      k += m; /* a page moves only between VMAs both locked or both not */
      continue;
    }
    if (!err) err = -r;
    if (r == -EAGAIN) break;
    k += m + 1; /* the page refused stays resident */
  }
  pthread_mutex_lock(&ctx->mu);
  ctx->moving = 0;
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
  return err;
}

/* Confirms a drop the dropper moved: to the daemon that answered its mark,
 * or (the daemon gone) as a drop that failed, which the next daemon settles
 * from what the kernel holds. Caller holds ctx->mu. */
static void confirm_moved_locked(iosr_ctx *ctx, int err) {
  if (!ctx->connected) {
    confirm_locked(ctx, ctx->moved.id, ENOTCONN);
    return;
  }
  ctx->moved.err = err;
  pthread_mutex_lock(&ctx->send_mu);
  iosr_msg_send(ctx->sock, IOSR_M_DROP_MOVED, 0, 0, &ctx->moved, sizeof ctx->moved, NULL, 0);
  pthread_mutex_unlock(&ctx->send_mu);
}

void iosr_ctx_drop_go(iosr_ctx *ctx, const iosr_m_drop_go *g) {
  pthread_mutex_lock(&ctx->mu);
  ctx->go = *g;
  if (!ctx->go.id) ctx->go.id = 1ull << 63; /* an answer for id 0 (no drop has it): never matches */
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
}

void *iosr_ctx_dropper_main(void *arg) {
  iosr_ctx *ctx = arg;
  pthread_mutex_lock(&ctx->mu);
  for (;;) {
    while ((!ctx->dq_n || !ctx->connected) && !ctx->stopping) pthread_cond_wait(&ctx->cv, &ctx->mu);
    if (ctx->stopping) break;
    iosr_dropreq d = ctx->dq[ctx->dq_head];
    ctx->dq_head = (ctx->dq_head + 1) % IOSR_DROPQ;
    ctx->dq_n--;
    if (!d.id) { /* cancelled by a region destroy */
      pthread_cond_broadcast(&ctx->cv); /* iosr_ctx_drain_drops may wait for the queue to empty */
      continue;
    }
    ctx->cur = d;
    ctx->started_drop = d.id;
    pthread_mutex_unlock(&ctx->mu);
    if (iosr_test_drop_gate) iosr_test_drop_gate(d.id, 0);
    int err = d.grave ? move_drop(ctx, &d) : discard(ctx, &d);
    if (iosr_test_drop_gate) iosr_test_drop_gate(d.id, 1);
    pthread_mutex_lock(&ctx->mu);
    ctx->cur.id = 0;
    pthread_cond_broadcast(&ctx->cv);
    if (d.grave && err != ENOTCONN) confirm_moved_locked(ctx, err);
    else confirm_locked(ctx, d.id, err);
  }
  pthread_mutex_unlock(&ctx->mu);
  return NULL;
}

void iosr_ctx_queue_drop(iosr_ctx *ctx, const iosr_m_drop *d) {
  pthread_mutex_lock(&ctx->mu);
  if (ctx->dq_n < IOSR_DROPQ) {
    ctx->dq[(ctx->dq_head + ctx->dq_n) % IOSR_DROPQ] = (iosr_dropreq){d->id, d->start, d->len, d->grave};
    ctx->dq_n++;
    pthread_cond_broadcast(&ctx->cv);
  } else {
    confirm_locked(ctx, d->id, EAGAIN); /* the daemon keeps those pages resident */
  }
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_drain_drops(iosr_ctx *ctx) {
  pthread_mutex_lock(&ctx->mu);
  while (ctx->connected && !ctx->stopping && (ctx->dq_n || ctx->cur.id)) pthread_cond_wait(&ctx->cv, &ctx->mu);
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_fence_drops(iosr_ctx *ctx, uint64_t start, uint64_t len) {
  pthread_mutex_lock(&ctx->mu);
  for (uint32_t i = 0; i < ctx->dq_n; i++) {
    iosr_dropreq *d = &ctx->dq[(ctx->dq_head + i) % IOSR_DROPQ];
    if (d->id && d->start < start + len && d->start + d->len > start) {
      confirm_locked(ctx, d->id, ENOENT); /* skipped: the daemon already forgot these pages */
      d->id = 0;
    }
  }
  while (ctx->cur.id && ctx->cur.start < start + len && ctx->cur.start + ctx->cur.len > start)
    pthread_cond_wait(&ctx->cv, &ctx->mu);
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_drops_lost(iosr_ctx *ctx) {
  pthread_mutex_lock(&ctx->mu);
  ctx->connected = 0;
  ctx->epoch++; /* a dropper waiting for an answer stops waiting */
  memset(&ctx->go, 0, sizeof ctx->go);
  ctx->dq_head = ctx->dq_n = 0; /* undone: never run against a daemon that did not ask */
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_drops_hello(iosr_ctx *ctx, iosr_m_hello *h) {
  pthread_mutex_lock(&ctx->mu);
  while (ctx->moving) pthread_cond_wait(&ctx->cv, &ctx->mu);
  h->drop_started = ctx->started_drop;
  h->drop_id = ctx->cur.id;
  if (ctx->cur.id) {
    h->drop_start = ctx->cur.start;
    h->drop_len = ctx->cur.len;
    h->drop_grave = ctx->cur.grave;
  }
  ctx->reported_drop = ctx->cur.id;
  ctx->held.id = 0; /* a drop that ended before this hello: settled by the daemon */
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_drops_resumed(iosr_ctx *ctx) {
  pthread_mutex_lock(&ctx->mu);
  ctx->connected = 1;
  if (ctx->held.id) confirm_locked(ctx, ctx->held.id, ctx->held.err);
  ctx->held.id = 0;
  ctx->reported_drop = 0;
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
}
