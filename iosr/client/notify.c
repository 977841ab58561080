/* The app's callbacks (on_foreground, on_trim) run on a thread of their own,
 * never on the agent. A callback may touch memory of the app's regions, and
 * while the app's dropper moves pages iosrd serves none of the app's faults
 * until the dropper answers (design note section 3, "Moved by the
 * dropper"); the dropper waits for the agent to deliver iosrd's answer. Run
 * on the agent, such a callback would wait on a fault that waits on the
 * agent.
 *
 * Each change of foreground state is delivered in order (a queue of
 * IOSR_NOTIFY_QUEUE; when it is full the newest state replaces the last
 * queued); trim requests collapse to the newest id (one answer after a
 * trim that began after both answers the newer, design note "Free memory is
 * not written" in docs/design/stack.md).
 *
 * Locks: ctx->mu guards the queue and the pending trim; callbacks run with
 * nothing held.
 */
#include <string.h>

#include "client/client_int.h"

static void *notifier_main(void *arg) {
  iosr_ctx *ctx = arg;
  pthread_mutex_lock(&ctx->mu);
  for (;;) {
    while (!ctx->fg_n && !ctx->trim_pending && !ctx->notify_stop) pthread_cond_wait(&ctx->notify_cv, &ctx->mu);
    if (ctx->notify_stop) break;
    if (ctx->fg_n) {
      int fg = ctx->fg_queue[ctx->fg_head];
      ctx->fg_head = (ctx->fg_head + 1) % IOSR_NOTIFY_QUEUE;
      ctx->fg_n--;
      pthread_mutex_unlock(&ctx->mu);
      ctx->on_fg(ctx, fg, ctx->arg);
    } else {
      uint64_t id = ctx->trim_pending;
      ctx->trim_pending = 0;
      pthread_mutex_unlock(&ctx->mu);
      ctx->on_trim(ctx, id, ctx->arg);
    }
    pthread_mutex_lock(&ctx->mu);
  }
  pthread_mutex_unlock(&ctx->mu);
  return NULL;
}

int iosr_ctx_notifier_start(iosr_ctx *ctx) {
  if (!ctx->on_fg && !ctx->on_trim) return 0;
  if (pthread_cond_init(&ctx->notify_cv, NULL)) return -1;
  if (pthread_create(&ctx->notifier, NULL, notifier_main, ctx)) {
    pthread_cond_destroy(&ctx->notify_cv);
    return -1;
  }
  ctx->notifier_started = 1;
  return 0;
}

void iosr_ctx_notifier_stop(iosr_ctx *ctx) {
  if (!ctx->notifier_started) return;
  pthread_mutex_lock(&ctx->mu);
  ctx->notify_stop = 1;
  pthread_cond_broadcast(&ctx->notify_cv);
  pthread_mutex_unlock(&ctx->mu);
  pthread_join(ctx->notifier, NULL);
  pthread_cond_destroy(&ctx->notify_cv);
  ctx->notifier_started = 0;
}

void iosr_ctx_notify_fg(iosr_ctx *ctx, int fg) {
  if (!ctx->notifier_started || !ctx->on_fg) return;
  pthread_mutex_lock(&ctx->mu);
  if (ctx->fg_n < IOSR_NOTIFY_QUEUE) {
    ctx->fg_queue[(ctx->fg_head + ctx->fg_n) % IOSR_NOTIFY_QUEUE] = fg;
    ctx->fg_n++;
  } else {
    ctx->fg_queue[(ctx->fg_head + ctx->fg_n - 1) % IOSR_NOTIFY_QUEUE] = fg;
  }
  pthread_cond_broadcast(&ctx->notify_cv);
  pthread_mutex_unlock(&ctx->mu);
}

int iosr_ctx_notify_trim(iosr_ctx *ctx, uint64_t id) {
  if (!ctx->notifier_started || !ctx->on_trim) return -1;
  pthread_mutex_lock(&ctx->mu);
  ctx->trim_pending = id;
  pthread_cond_broadcast(&ctx->notify_cv);
  pthread_mutex_unlock(&ctx->mu);
  return 0;
}
