/* libiosr internals shared by client.c, region.c and ctl.c. */
#ifndef IOSR_CLIENT_INT_H
#define IOSR_CLIENT_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/proto.h"
#include "iosr.h"

#define IOSR_DROPQ 4096u
#define IOSR_DROP_MAX_PAGES 1024u /* a drop is one run of a swap-out batch (IOSR_MAX_BATCH) */
#define IOSR_MAX_CHILDREN 64u
#define IOSR_NOTIFY_QUEUE 16u /* foreground changes waiting for the app's callback */

struct iosr_region {
  iosr_ctx *ctx;
  uint8_t *base;
  size_t size;
  struct iosr_region *next;
  int live;
};

typedef struct iosr_dropreq {
  uint64_t id, start, len;
  uint64_t grave; /* nonzero: moved there, not discarded (iosr_m_drop) */
} iosr_dropreq;

struct iosr_ctx {
  int sock;
  int uffd;
  int ptfd;
  uint64_t features;
  int user_mode_only;
  uint64_t token;
  uint64_t beacon;         /* the dropper's beacon area (common/beacon.h); 0: none */
  int grave;               /* a graveyard follows it (common/beacon.h) */
  uint32_t app_id;
  pid_t daemon_pid;
  pid_t pid;
  char name[IOSR_NAME_MAX];
  char socket_path[108];
  iosr_engine *engine;     /* the in-process engine it is connected to (NULL: iosrd) */
  void (*on_fg)(iosr_ctx *, int, void *);
  void (*on_trim)(iosr_ctx *, uint64_t, void *);
  void *arg;

  pthread_t agent, dropper, notifier;
  int notifier_started;
  pthread_cond_t notify_cv; /* with mu: the notifier's queue */
  int notify_stop;
  int fg_queue[IOSR_NOTIFY_QUEUE]; /* foreground changes for on_foreground, oldest first */
  uint32_t fg_head, fg_n;
  uint64_t trim_pending;   /* the newest trim request for on_trim (0: none) */
  int wake_pipe[2];        /* tells the agent to stop */
  int threads_started;

  pthread_mutex_t send_mu; /* one sender at a time on sock */
  pthread_mutex_t rpc_mu;  /* one request in flight */
  pthread_mutex_t mu;      /* protects the fields below */
  pthread_cond_t cv;
  uint32_t seq;
  uint32_t wait_seq;
  int reply_ready;
  uint16_t reply_type;
  uint8_t reply[sizeof(iosr_m_app_stats) + 64];
  uint32_t reply_len;
  int reply_fd;
  int connected;           /* 0 while the daemon is away */
  int stopping;

  iosr_dropreq dq[IOSR_DROPQ]; /* drops queued for the dropper */
  uint32_t dq_head, dq_n;
  iosr_dropreq cur;        /* the drop in madvise now (id 0: none) */
  int pagemap_fd;          /* /proc/self/pagemap (-1: none): which pages the dropper may discard */
  uint64_t pm[IOSR_DROP_MAX_PAGES]; /* the dropper's pagemap entries of its drop */
  uint64_t started_drop;   /* the last drop id the dropper began (ids rise) */
  uint64_t reported_drop;  /* the drop named in the RESUME hello in flight (0: none) */
  iosr_m_dropped held;     /* its confirmation, kept until the resume completes (id 0: none) */
  iosr_m_drop_go go;       /* the daemon's answer to the running drop's mark (id 0: none yet) */
  iosr_m_drop_moved moved; /* what the dropper moved of it (the dropper's own) */
  int moving;              /* the dropper is moving pages: a resume hello waits (no daemon reads events
                            * before the moves named by the one that died are done) */
  uint32_t epoch;          /* connections lost so far: an answer (go) belongs to the connection it came on */

  int children[IOSR_MAX_CHILDREN]; /* forked children's userfaultfds, kept alive */
  unsigned nchildren;

  pthread_mutex_t reg_mu;
  iosr_region *regions;
  iosr_region *free_regions;
};

/* Sends a request on ctx and waits for its reply (through the agent once it
 * runs). Returns 0 with the reply in ctx->reply (type ctx->reply_type), or -1
 * with errno (ENOTCONN when the daemon is away). Caller holds nothing. */
int iosr_ctx_rpc(iosr_ctx *ctx, uint16_t type, const void *p, uint32_t len, const int *fds, int nfds,
                 void *out, uint32_t out_cap, int *out_fd);

/* ---- the callbacks' thread (client/notify.c); each takes ctx->mu ---- */
/* Starts it where the app gave a callback. 0, or -1 (no thread). */
int iosr_ctx_notifier_start(iosr_ctx *ctx);
/* Stops it once the callbacks queued have run. */
void iosr_ctx_notifier_stop(iosr_ctx *ctx);
/* The agent received a foreground change / a trim request; the trim: -1
 * when no callback takes it. */
void iosr_ctx_notify_fg(iosr_ctx *ctx, int fg);
int iosr_ctx_notify_trim(iosr_ctx *ctx, uint64_t id);

/* ---- the dropper (client/dropper.c); each takes ctx->mu ---- */
/* The dropper thread's body (arg: the ctx). */
void *iosr_ctx_dropper_main(void *arg);
/* The agent received a DROP request. */
void iosr_ctx_queue_drop(iosr_ctx *ctx, const iosr_m_drop *d);
/* Unlocks the graveyard (an mlockall(MCL_CURRENT) after connecting locked
 * it): pages of unlocked regions move only into unlocked memory. 0 or -1. */
int iosr_ctx_grave_unlock(iosr_ctx *ctx);
/* The agent received the daemon's answer to a drop mark (IOSR_M_DROP_GO). */
void iosr_ctx_drop_go(iosr_ctx *ctx, const iosr_m_drop_go *g);
/* Waits until no drop queued or running touches [start, start+len): queued
 * ones are cancelled (reported with ENOENT), a running one is waited for. */
void iosr_ctx_fence_drops(iosr_ctx *ctx, uint64_t start, uint64_t len);
/* Waits until the dropper has run every drop queued (the graveyard's, once
 * the regions are gone) while the daemon still reads the app's events: a
 * discard after the goodbye would wait for a REMOVE nobody reads. Returns at
 * once when the daemon is gone. */
void iosr_ctx_drain_drops(iosr_ctx *ctx);
/* Maps the dropper's beacon area, and the graveyard after it, and registers
 * them with uffd: the area's address, or 0 when it cannot (the daemon then
 * cannot tell the dropper's REMOVE events from the app's as precisely:
 * design note section 9). *grave: 1 when the graveyard is there (section 3,
 * "Moved out"). Not thread-safe: called once, at connect. */
uint64_t iosr_ctx_beacon_open(int uffd, int *grave);
/* Unregisters and unmaps it (no event: nothing waits for a reader). */
void iosr_ctx_beacon_close(iosr_ctx *ctx);
/* The connection is lost: queued drops are undone, nothing more is sent. */
void iosr_ctx_drops_lost(iosr_ctx *ctx);
/* Fills the drop fields of a RESUME hello. */
void iosr_ctx_drops_hello(iosr_ctx *ctx, iosr_m_hello *h);
/* The RESUME was accepted (ctx->sock is the new socket): confirmations flow
 * again, the reported drop's first if it ended meanwhile. */
void iosr_ctx_drops_resumed(iosr_ctx *ctx);
/* Test hook: when set, the dropper calls it with a drop's id before it runs
 * the drop (after = 0), once it has read which pages it discards (2), after
 * a run's mark and before that run's madvise (3), once the daemon has
 * named the pages of a drop the dropper moves, before the moves (4), and after, before
 * confirming it (after = 1); tests hold the dropper there. Not
 * part of the API. */
extern void (*iosr_test_drop_gate)(uint64_t id, int after);

#endif
