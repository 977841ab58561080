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
#include <sys/mman.h>

#include "client/client_int.h"
#include "fault/uffd.h"

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

/* Discards the run, unless its range stopped being (entirely) this
 * userfaultfd's: write-protecting what already is protected changes nothing
 * but fails with ENOENT over a VMA that is not registered, such as memory the
 * app mapped where part of a region was unmapped since the drop was asked
 * for. (A mapping made between the check and the madvise is not caught: the
 * app was told not to munmap parts of a region during reclaim.) */
static int discard(iosr_ctx *ctx, const iosr_dropreq *d) {
  int r = iosr_uffd_wp(ctx->uffd, d->start, d->len, 1);
  if (r == -ENOENT) return ENOENT;
  /* blocks until the daemon has read the REMOVE event this produces */
  return madvise((void *)(uintptr_t)d->start, d->len, MADV_DONTNEED) ? errno : 0;
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
    if (!d.id) continue; /* cancelled by a region destroy */
    ctx->cur = d;
    ctx->started_drop = d.id;
    pthread_mutex_unlock(&ctx->mu);
    if (iosr_test_drop_gate) iosr_test_drop_gate(d.id, 0);
    int err = discard(ctx, &d);
    if (iosr_test_drop_gate) iosr_test_drop_gate(d.id, 1);
    pthread_mutex_lock(&ctx->mu);
    ctx->cur.id = 0;
    pthread_cond_broadcast(&ctx->cv);
    confirm_locked(ctx, d.id, err);
  }
  pthread_mutex_unlock(&ctx->mu);
  return NULL;
}

void iosr_ctx_queue_drop(iosr_ctx *ctx, const iosr_m_drop *d) {
  pthread_mutex_lock(&ctx->mu);
  if (ctx->dq_n < IOSR_DROPQ) {
    ctx->dq[(ctx->dq_head + ctx->dq_n) % IOSR_DROPQ] = (iosr_dropreq){d->id, d->start, d->len};
    ctx->dq_n++;
    pthread_cond_broadcast(&ctx->cv);
  } else {
    confirm_locked(ctx, d->id, EAGAIN); /* the daemon keeps those pages resident */
  }
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
  ctx->dq_head = ctx->dq_n = 0; /* undone: never run against a daemon that did not ask */
  pthread_cond_broadcast(&ctx->cv);
  pthread_mutex_unlock(&ctx->mu);
}

void iosr_ctx_drops_hello(iosr_ctx *ctx, iosr_m_hello *h) {
  pthread_mutex_lock(&ctx->mu);
  h->drop_started = ctx->started_drop;
  h->drop_id = ctx->cur.id;
  if (ctx->cur.id) {
    h->drop_start = ctx->cur.start;
    h->drop_len = ctx->cur.len;
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
