/* The engine's one internal header: the model every file of engine/ shares,
 * then a section per file with what that file defines for the others.
 *
 * The engine (design note section 1) is one thread that owns everything here:
 * apps and their page tables, requests, reclaim jobs, swap-out batches, drops,
 * the probe cache, connections. No locks: only fields marked atomic are
 * touched by other threads. The layers below (swaparea/, slots/, sched/,
 * readahead/, uffd/) know nothing of these structs; the layer above (daemon/,
 * client/) sees the engine through engine.h only. A function's prefix names
 * its file (iosr_fault_*: fault.c, iosr_conn_*: conn.c); engine.c and inproc.c
 * share iosr_engine_*. Pages are 4 KiB; a vpn is a virtual page number
 * (address >> 12). Everything runs on the engine thread unless its comment
 * says otherwise. "Section N": of the design note, docs/design/iosr.md.
 */
#ifndef IOSR_ENGINE_INT_H
#define IOSR_ENGINE_INT_H

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/beacon.h"
#include "common/json.h"
#include "common/mix.h"
#include "common/opts.h"
#include "common/proto.h"
#include "iosr.h"
#include "readahead/window.h"
#include "sched/sched.h"
#include "slots/slotmap.h"
#include "swaparea/bufpool.h"
#include "swaparea/format.h"
#include "swaparea/io.h"
#include "uffd/pagetable.h"

#define IOSR_MAX_APPS 4096u  /* app ids 1 .. IOSR_MAX_APPS - 1 */
#define IOSR_MAX_BATCH 1024u /* pages of one swap-out batch at most */

typedef struct iosr_app iosr_app;
typedef struct iosr_batch iosr_batch;
typedef struct iosr_conn iosr_conn;

/* ==== the model ==== */
/* ---- requests: a read (swapin.c) or a write (swapout.c) of contiguous
 * slots; all alive are on one list (req.c) ---- */
typedef struct iosr_target {
  uint32_t app;
  uint32_t weight;   /* read-ahead probe weight (0: not a probe) */
  uint64_t vpn;
  uint32_t win;      /* probe: its window record */
  uint32_t pad;
} iosr_target;

enum { IOSR_REQ_READ = 0, IOSR_REQ_WRITE = 1 };
enum { IOSR_DONE_FINISHED = 1, IOSR_DONE_VERIFIED = 2 }; /* iosr_req.done[] bits */

/* The checksum kept for a slot: the page's CRC32C bound to the slot number,
 * so that a page read from any other slot fails too (design note section 4). */
static inline uint32_t iosr_slot_crc(uint32_t page_crc, uint64_t slot) {
  return page_crc ^ (uint32_t)(iosr_mix(slot + 1) >> 32);
}

typedef struct iosr_req {
  iosr_sreq s;               /* scheduler node: slot, npages, class, app */
  iosr_iocb cb;
  struct iosr_req *prev_all, *next_all; /* all requests alive (queued or in flight) */
  struct iosr_req *next_retry;
  int kind;
  int dispatched;
  int installing;            /* completion being installed (retry list) */
  uint8_t *buf;              /* read: owned buffer; write: inside the batch's buffer */
  size_t buf_bytes;
  uint64_t t_submit;
  uint32_t fault_idx;        /* read: index of the faulting page, or UINT32_MAX */
  uint32_t trigger_idx;      /* read: index of the asynchronous read-ahead trigger, or UINT32_MAX */
  uint64_t trigger_next;     /* read: slot after the window, where the next one starts */
  iosr_batch *batch;         /* write */
  uint8_t *done;             /* read: per page, IOSR_DONE_* bits (install retries) */
  uint32_t bad_pages;        /* read: pages that failed their checksum */
  uint64_t bad_vpn;          /* read: the first of them */
  iosr_target tgt[];         /* per page i (slot s.slot + i) */
} iosr_req;

/* ---- swap-out and reclaim (swapout.c, reclaim.c, drops.c) ---- */
/* iosr_batch.zero[i]: what page i of a batch is */
enum {
  IOSR_BATCH_WRITE = 0, /* written to its slot */
  IOSR_BATCH_ZERO = 1,  /* all zero: no slot, nothing written */
  IOSR_BATCH_KEPT = 2,  /* unreadable: kept resident, not part of the batch */
  IOSR_BATCH_CLEAN = 3  /* was CLEAN: its slot holds it, nothing written (design note section 3) */
};

/* A swap-out batch (swapout.c): up to IOSR_MAX_BATCH pages of one app,
 * copied out, written, then taken out of the app (moveout.c) or dropped by
 * its dropper (drops.c). */
struct iosr_batch {
  struct iosr_batch *next;
  struct iosr_job *job;
  uint32_t app;
  uint32_t n;
  uint8_t *buf;              /* n pages, in buffer order */
  uint64_t vpn[IOSR_MAX_BATCH];
  uint32_t slot[IOSR_MAX_BATCH];
  uint8_t zero[IOSR_MAX_BATCH];  /* IOSR_BATCH_* */
  uint32_t crc[IOSR_MAX_BATCH]; /* CRC32C of each page copied out (design note section 4) */
  uint32_t writes_pending;
  uint32_t drops_pending;
  int write_err;
  uint16_t seq;              /* its WRITING pages' aux: a page cancelled and picked again is another batch's */
  uint16_t move_tries;       /* move-outs tried after a refusal that passes (EAGAIN, no graveyard room) */
  uint8_t move_wait;         /* written; some pages wait, WRITING, for their move-out to be tried again */
  uint8_t set_aside;         /* its app has not answered its drops for drop_stall_ms (design note section 9) */
  uint64_t drop_since_ns;    /* when it last asked its app for a drop */
};

/* A reclaim candidate (reclaim.c): one page, oldest first within a priority. */
typedef struct iosr_cand {
  uint32_t pri;   /* 0 first (background apps), 1 after (the foreground app under the budget) */
  uint32_t age;
  uint32_t app;
  uint32_t pad;
  uint64_t vpn;
} iosr_cand;

/* A reclaim job (reclaim.c): the candidates of one reclaim, stepped by
 * swapout.c a batch at a time. */
typedef struct iosr_job {
  struct iosr_job *next;
  uint32_t id;
  uint64_t target_pages;      /* 0: all candidates */
  uint64_t swapped_pages, zero_pages, kept_pages;
  uint64_t waiting_pages;     /* in batches set aside: their app has not answered its drops */
  iosr_cand *cand;
  size_t ncand, pos;
  iosr_cand *again;           /* candidates to retry (write-protect hit EAGAIN) */
  size_t nagain, capagain, again_pos;
  int err;                    /* first error (ENOSPC, EIO) */
  uint32_t batches_inflight;
  int stepping;               /* iosr_swapout_step runs: the job is not ended under it */
  int budget;                 /* started by the budget */
  uint32_t waiter;            /* client id to reply to (0: none) */
  uint32_t waiter_seq;
} iosr_job;

/* A discard asked of an app's dropper (drops.c): one run of a batch, or of
 * the graveyard (moveout.c). */
typedef struct iosr_drop {
  struct iosr_drop *next;
  uint64_t id;
  uint64_t start_vpn, n;    /* the run the dropper discards: where its pages were when asked */
  struct iosr_batch *batch;
  int grave;                /* a discard of graveyard pages (moveout.c), not of the app's */
  uint64_t move_to;         /* the graveyard page the dropper moves the run to (0: it discards the run) */
  uint64_t go[IOSR_DROP_BITS_WORDS]; /* the pages the daemon named to be moved (IOSR_M_DROP_GO) */
  int go_sent;              /* this daemon answered its mark (named those, maybe none) */
  uint64_t charged;         /* those of them charged to the budget until discarded */
  uint64_t *adopted;        /* where the pages handed over to it are now (moved into its run) */
  uint32_t nadopted, capadopted;
  uint64_t vpn[];           /* where page k of the run is now (mremap moves it) */
} iosr_drop;

/* ---- probe cache (probe.c; design note section 6) ---- */
/* A probe page (probe.c): a read-ahead page held in the cache, mapped when
 * touched; whether it was tells how large windows should be. */
typedef struct iosr_probe {
  uint32_t app;
  uint32_t weight;
  uint64_t vpn;
  uint64_t slot;
  uint64_t issued_major;     /* its region's major-fault count when read */
  uint64_t next_slot;        /* trigger: where the next window starts */
  int trigger;
  int used;
  uint32_t win;              /* window record (adaptive) */
  int32_t prev, next;        /* app FIFO (indexes) */
  uint32_t rstate;           /* 1 + index of its region's read-ahead state (0: none) */
  int32_t rprev, rnext;      /* that region's FIFO (indexes) */
  uint8_t *data;
} iosr_probe;

/* A read-ahead window's probes, for the adaptive rule: a window none of whose
 * probes was used halves the app's window. */
#define IOSR_WINDOWS 8192u
typedef struct iosr_window {
  uint32_t id;     /* the full id (a sequence number): a stale reference does not match */
  uint32_t app;
  uint16_t probes, hits, resolved;
  uint16_t live;
  uint32_t rstate; /* 1 + index of the region's read-ahead state (0: none) */
} iosr_window;

/* ---- fault service (fault.c) ---- */
/* A fault-service step that met EAGAIN (fault.c): retried once the app's
 * pending events are read. */
typedef struct iosr_retry {
  struct iosr_retry *next;
  uint32_t app;
  int op;                    /* IOSR_RETRY_* */
  uint64_t vpn, n;
  uint64_t flags;
} iosr_retry;
enum { IOSR_RETRY_FAULT = 1, IOSR_RETRY_UNPROTECT = 2, IOSR_RETRY_WAKE = 3 };

/* ---- apps ---- */
enum { IOSR_APP_FREE = 0, IOSR_APP_ACTIVE, IOSR_APP_DETACHED, IOSR_APP_DEAD };

/* A client process (or a forked child of one) and its memory: its page
 * table, read-ahead state, drops, graveyard and statistics. Created by
 * conn.c (attach), resume.c or events.c (fork); freed by engine.c. */
struct iosr_app {
  uint32_t id;
  int state;
  char name[IOSR_NAME_MAX];
  pid_t pid;
  int pidfd;
  int uffd;
  uint64_t uffd_features;
  int user_mode_only;
  int forked;
  int orphan;                /* a forked child whose page table died with a daemon */
  uint32_t parent;
  uint64_t token;
  iosr_conn *conn;           /* NULL while detached */
  iosr_ptable pt;
  iosr_extmap ext;
  iosr_ra_adaptive ra;        /* the settings every region's window starts from */
  iosr_ra_region *ra_regions; /* read-ahead state per region and zone (ra_region.c) */
  uint32_t n_ra_regions, cap_ra_regions;
  uint32_t *ra_hash, ra_hash_cap; /* (region, zone) -> 1 + index in ra_regions; 0: empty */
  uint32_t next_region;      /* the last region id given (spans name their region by it) */
  uint32_t ra_last_window;
  int fg;
  uint64_t fg_since_ns, bg_since_ns;
  uint64_t ws_pages; /* charged pages when it last left the foreground: what it is expected to need back */
  uint64_t resident, swapped;
  uint64_t clean;            /* CLEAN pages: resident, holding their slots */
  uint64_t reading;          /* READING pages: a read will install them */
  uint64_t swapped_peak;     /* most pages swapped since the app last had none (probe horizon) */
  uint64_t majors;           /* major faults so far (each region keeps its own clock for probe expiry) */
  uint64_t busy_since;
  int32_t probe_head, probe_tail; /* FIFO of this app's probes */
  uint32_t nprobes;
  iosr_drop *drops;
  uint64_t drop_seq;
  uint64_t beacon;           /* first page of the dropper's beacon area (common/beacon.h); 0: none */
  uint64_t mark_drop;        /* the drop the dropper announced last (0: none) */
  uint64_t mark_base, mark_n;/* its pages */
  uint64_t win_id;           /* the drop of the run the dropper announced (0: none): REMOVEs there may be its */
  uint64_t win_lo, win_hi;   /* that run's pages */
  uint64_t rep_lo, rep_hi;   /* the start of the last REMOVE over them, the end of all of them: the
                              * kernel may repeat the tail of what they covered */
  uint64_t grave;            /* first page of the graveyard (common/beacon.h); 0: none, no move-out */
  uint64_t grave_used[IOSR_GRAVE_PAGES / 64]; /* its pages holding a page or awaiting a discard */
  uint64_t grave_pages;      /* pages moved out and not yet discarded: charged to the budget */
  int grave_dirty;           /* pages may be left there (a resumed app, an undone discard) */
  uint64_t go_drop;          /* a drop mark was read: answer it once the events read with it are applied */
  uint64_t go_id16;          /* the id bits that mark carried (its drop unknown: go_drop is 0) */
  int go_pending;
  uint64_t hold_drop;        /* the dropper moves this drop's pages: none of the app's events is read
                              * until it confirms (design note section 3, "Moved by the dropper") */
  uint32_t inflight;         /* requests and batches referring to this app */
  uint32_t batches_set_aside; /* its batches whose drops it has not answered: reclaim passes it by */
  int trims;                 /* answers trim requests (IOSR_ATTACH_TRIMS; trim.c) */
  uint64_t trim_id;          /* the trim request awaiting its answer (0: none) */
  uint64_t trim_sent_ns;     /* when it was sent */
  iosr_app_stats st;
  struct { uint64_t vpn, t0; } lat[64]; /* major faults waiting, for latency */
  uint32_t nlat;
};

/* ---- connections ---- */
/* A connection (conn.c; admission: admit.c): an app's, or a control
 * connection's (the iosr tool, iosr_ctl_*). */
struct iosr_conn {
  int fd;
  int role;
  uint32_t id;               /* connection id (replies, waiters) */
  uint32_t app;              /* app id for app connections */
  pid_t pid;
  uid_t uid;
  int hello_done;
  uint64_t accepted_ns;      /* hello due within hello_timeout_ms of this */
  struct iosr_outmsg *out;   /* messages the socket did not take yet, oldest first (conn.c) */
  struct iosr_conn *next;
  uint32_t idle_waiter_seq;
  int idle_waiting;
};

/* ---- the engine ---- */
/* The engine (engine.c): include/iosr.h's iosr_engine, opaque outside this
 * folder. */
struct iosr_engine {
  iosr_settings set;
  iosr_swap_area area;
  iosr_slotmap slots;
  iosr_bufpool bufs;
  iosr_io *io;
  iosr_sched sched;
  int epfd, timerfd, listen_fd, wake_fd;
  int fork_req;              /* atomic: an in-process app thread is forking (forkmode.c) */
  int fork_ack_fd;           /* eventfd: the engine entered fork mode */
  struct iosr_fork_buf *fork_buf;
  int stop;                  /* atomic: set by iosr_engine_request_stop (any thread, signal handlers) */
  unsigned nconns;           /* atomic: read by iosr_engine_stop on another thread */
  int dirty_start;
  uint64_t grace_until_ns;
  uint64_t tick;             /* one per fault handled: page ages */
  iosr_app *apps[IOSR_MAX_APPS];
  uint32_t next_app_hint;
  iosr_conn *conns;
  uint32_t next_conn_id;
  uint32_t fg_app;           /* 0: none */
  iosr_req *reqs;            /* all live requests */
  iosr_req *install_retry;   /* reads whose install hit EAGAIN */
  iosr_retry *retries;
  iosr_job *jobs;
  uint32_t next_job_id;
  iosr_batch *batches;
  uint64_t resident_total;
  uint64_t resident_peak; /* most resident_total since the foreground app last changed */
  uint64_t fg_room_pages; /* pages the foreground app is expected to bring back since it became so */
  uint64_t fg_room_base;  /* its charged pages then */
  uint64_t reading_total;    /* READING pages of apps charged to the budget: a read will install them */
  uint64_t grave_total;      /* pages in apps' graveyards, charged to the budget until discarded */
  uint64_t moveout_pages;    /* pages moved out of apps (moveout.c) */
  uint64_t moveout_refused;  /* moves of runs, or their rests, the kernel refused (tried again on EAGAIN) */
  uint64_t moveout_no_room;  /* moves of runs, or their rests, that found no graveyard room (tried again) */
  uint32_t moveout_waiting;  /* batches whose move-out is tried again in a later turn */
  uint64_t stall_due_ns;     /* when the next batch waiting for drops is set aside (0: none waits) */
  uint16_t batch_seq;
  /* the hard budget (budget.c; design note section 9, "Memory budget") */
  iosr_retry *held, *held_tail;   /* faults held until there is room, oldest first */
  uint32_t nheld;
  int budget_force;               /* held faults served past the budget (no reclaim can run) */
  uint64_t budget_over_peak;      /* most resident_total ever over the budget, pages */
  uint64_t budget_overrun_pages;  /* pages that entered an app past the budget */
  uint64_t budget_held_faults;    /* faults held so far */
  uint64_t budget_ra_cut_pages;   /* read-ahead and zero-window pages left out for lack of room */
  iosr_ra_linux cluster_ra;  /* engine-wide, as Linux's cluster read-ahead */
  iosr_probe *probes;
  uint32_t probe_cap;
  iosr_window windows[IOSR_WINDOWS];
  uint32_t next_window;
  int32_t probe_free;
  uint64_t fail_reads, fail_writes; /* test hooks */
  int draining;              /* stopping, swapping every page back in: none is mapped CLEAN */
  int events_held;           /* test hook: no app's events are read */
  int dropper_moves;         /* test hook: droppers move pages out even for an engine in the app's process */
  int hold_retries;          /* test hook: un-protects of kept pages wait, as after EAGAIN, and retries are held */
  int has_rt_ioprio;
  uint64_t full_warned;
  uint64_t budget_backoff_ns; /* no budget job before this (after one failed) */
  uint64_t next_reap_ns;      /* next check for exited forked children */
  uint32_t nforked;           /* forked children tracked (dead ones until freed) */
  /* engine-wide counters */
  uint64_t reads, writes, read_bytes, write_bytes, io_errors;
  uint64_t zero_fill_pages;
  uint64_t inconsistencies;
  uint64_t checksum_errors;  /* pages whose slot failed its checksum */
  /* admission (admit.c) */
  int spare_fd;              /* a descriptor held in reserve for refusing clients when out of them */
  int listen_off;            /* the listening socket is not watched (back-off) */
  uint32_t listen_backoff_ms;
  uint64_t listen_resume_ns;
  uint64_t accept_errors, conns_refused, hello_timeouts;
  uint64_t loop_turns;       /* event-loop iterations: an idle engine does not turn */
  struct iosr_trim_wait *trim_waits; /* reclaims held for their apps' trims (trim.c) */
  uint64_t next_trim_id;
  uint8_t *zero_buf;         /* zero_window pages of zeros: this engine's write-fault fill source */
  size_t zero_buf_bytes;
  uint64_t started_ns;
  const char *role;          /* "iosrd" or "in-process" */
  /* in-process engines (inproc.c) */
  pthread_t thread;          /* the thread running the loop */
  struct iosr_engine *next_inproc; /* the running in-process engines, for the fork handlers */
};

/* ==== what each file defines for the others ==== */
/* ---- engine.c: the loop, the apps, I/O dispatch (and engine.h's calls) ---- */
/* The live app of id, or NULL (free slot, out of range). */
iosr_app *iosr_engine_app(iosr_engine *e, uint32_t id);
/* A free app id, or 0 when all IOSR_MAX_APPS - 1 are taken. */
uint32_t iosr_engine_new_app_id(iosr_engine *e);
/* The app named by sel (as include/iosr.h's control calls name apps: a
 * name, "#PID" or "#id:N"), or NULL. */
iosr_app *iosr_engine_find_app(iosr_engine *e, const char *sel);
/* App a is gone (its connection closed, its process died; why says which,
 * for the log): its pages and slots are released, it is DEAD until
 * iosr_engine_maybe_finish_app frees it. */
void iosr_engine_app_gone(iosr_engine *e, iosr_app *a, const char *why);
/* Frees a dead app once nothing in flight refers to it. */
void iosr_engine_maybe_finish_app(iosr_engine *e, iosr_app *a);
/* Reaps forked children whose process exited (their memory is gone). */
void iosr_engine_reap_forked(iosr_engine *e);
/* Adds fd to / removes it from the loop's epoll set with tag (iosr_tag). 0
 * or -1 with errno (epoll_ctl's). */
int iosr_engine_watch(iosr_engine *e, int fd, uint64_t tag);
void iosr_engine_unwatch(iosr_engine *e, int fd);
/* Test hook IOSR_TEST_HOLD_EVENTS (include/iosr.h): on, no app's
 * userfaultfd is read (its events wait in the kernel); off, every one is
 * read again. */
void iosr_engine_hold_events(iosr_engine *e, int on);
/* Dispatches what the scheduler releases to the swap area's I/O. */
void iosr_engine_pump(iosr_engine *e);
/* 1 when no request, batch, job, retry or held fault is left. */
int iosr_engine_idle(const iosr_engine *e);
/* Tells a's client that it became the foreground app (fg 1) or left it (0). */
void iosr_engine_notify_fg(iosr_engine *e, iosr_app *a, int fg);
/* Hands a connected socket to the engine, which serves it from its next
 * turn (in-process clients: inproc.c). 0, or -1 (ENOMEM, or the engine's
 * wake-up failed). Thread-safe. */
int iosr_engine_add_fd(iosr_engine *e, int fd);
/* Connections open now (apps and control). Thread-safe. */
unsigned iosr_engine_clients(iosr_engine *e);

/* ---- inproc.c: in-process engines; all it defines is in iosr.h and engine.h ---- */
/* ---- page.c: a page's state and what it charges ---- */
/* Moves page p of a to state (IOSR_PTE_*), keeping a's resident, clean,
 * reading and swapped counts and the engine's resident and reading totals
 * (the budget's; forked children are not charged). */
void iosr_page_set_state(iosr_engine *e, iosr_app *a, iosr_pte *p, int state);
/* The entry gives up its slot reference, and with it the slot's number
 * (pagetable.h: a slot number is valid only while it is owned). */
void iosr_page_put_slot(iosr_engine *e, iosr_pte *p);
/* A page of a leaves the table or becomes ZERO: its probe and its slot
 * are released, its flags cleared. */
void iosr_page_release(iosr_engine *e, iosr_app *a, iosr_pte *p);

/* ---- req.c: the requests alive ---- */
void iosr_req_link(iosr_engine *e, iosr_req *r);
/* Unlinks r and frees it (a read's buffer too). */
void iosr_req_free(iosr_engine *e, iosr_req *r);
/* The read still queued (not dispatched) that covers slot, or NULL. */
iosr_req *iosr_req_find_queued_read(iosr_engine *e, uint64_t slot);

/* ---- fault.c: fault service (design note sections 3, 7, 9) ---- */
/* Reads a's userfaultfd: page faults are handled, events go to events.c. */
void iosr_fault_read_uffd(iosr_engine *e, iosr_app *a);
/* A fault at addr of a (flags: UFFD_PAGEFAULT_FLAG_*; tid: the faulting
 * thread, 0 when unknown: it gets the SIGBUS of a poisoned page where the
 * kernel cannot poison): served by the page's state. */
void iosr_fault_handle(iosr_engine *e, iosr_app *a, uint64_t addr, uint64_t flags, uint32_t tid);
/* A region span sp just added for app a: the pages the kernel already holds
 * there are PRESENT (mlockall(MCL_FUTURE) populates a mapping before libiosr
 * registers it; design note section 3, "Pages present at registration").
 * One pagemap read per 512 pages, none when its first page is not held. */
void iosr_fault_adopt_present(iosr_engine *e, iosr_app *a, iosr_span *sp);
/* Runs the retries queued (none while the test hook hold_retries is on). */
void iosr_fault_run_retries(iosr_engine *e);
/* A fault on page vpn of a served again (a retry, a held fault): re-handled
 * unless the page is resident by now (then its waiters are woken). */
void iosr_fault_again(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t flags);
/* Queues a retry (op IOSR_RETRY_*) of pages [vpn, vpn + n) of app. Dies when
 * out of memory (a fault would never be served). */
void iosr_fault_add_retry(iosr_engine *e, uint32_t app, int op, uint64_t vpn, uint64_t n, uint64_t flags);
/* Fault latency (iosr_app_stats.lat_*): a major fault on vpn begins; the
 * faults on [vpn, vpn + n) end. */
void iosr_fault_lat_start(iosr_engine *e, iosr_app *a, uint64_t vpn);
void iosr_fault_lat_end(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t n);

/* ---- swapin.c: swap-in (design note sections 6 and 7) ---- */
/* A fault on SWAPPED page p at vpn of a (in span sp): reads it with its
 * read-ahead window. */
void iosr_swapin_fault(iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn, iosr_pte *p);
/* Asynchronous read-ahead after a hit on the trigger probe at vpn: the next
 * window of its region's slot run from next_slot on. */
void iosr_swapin_continue(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t next_slot);
/* Read r completed: its pages are checked and mapped. */
void iosr_swapin_complete(iosr_engine *e, iosr_req *r);
/* Maps again what reads could not map (EAGAIN). */
void iosr_swapin_run_install_retries(iosr_engine *e);
/* Reads every swapped page of the app back (orderly daemon shutdown). */
void iosr_swapin_all(iosr_engine *e, iosr_app *a);
/* 1 when a page read back to [vpn, vpn + n) of a may be mapped CLEAN:
 * write-protected, keeping its slot (design note section 3). */
int iosr_swapin_may_clean(const iosr_engine *e, const iosr_app *a, uint64_t vpn, uint64_t n);

/* ---- swapout.c: swap-out batches (design note sections 3, 8, 9) ---- */
/* One step of job j. Returns 1 if a batch was started, 0 if the job has
 * nothing more to start now. A batch with nothing to write or drop (every
 * page kept resident: area full, unreadable) ends inside the step; the job
 * is not ended under it (`stepping`): the step goes on using it, and the
 * caller ends it (iosr_reclaim_job_done_maybe). */
int iosr_swapout_step(iosr_engine *e, iosr_job *j);
/* Write r of a batch completed. */
void iosr_swapout_write_done(iosr_engine *e, iosr_req *r);
/* Ends batch b once its writes are done, its move-outs tried and every
 * discard it asked for confirmed. */
void iosr_swapout_batch_release(iosr_engine *e, iosr_batch *b);
/* Page p at vpn of a, being swapped out, stays resident instead (written
 * or faulted on meanwhile). */
void iosr_swapout_cancel_page(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p);
/* The app is gone: its pending drops will never be confirmed. */
void iosr_swapout_forget_app(iosr_engine *e, iosr_app *a);
/* Sends drop d's request to a's dropper (none while a is detached). */
void iosr_swapout_send_drop(iosr_engine *e, iosr_app *a, iosr_drop *d);
/* Counts page p, just settled out of the app (SWAPPED, or ZERO where
 * `zero`: all-zero), in a's and job j's statistics; clears its flags. */
void iosr_swapout_count_out(iosr_app *a, iosr_job *j, iosr_pte *p, int zero);
/* Tries again the move-out of every batch waiting for it (engine loop, after
 * the turn's events are read). */
void iosr_swapout_run_move_retries(iosr_engine *e);
/* Sets aside every batch whose writes are done and whose app has not
 * answered its drops for drop_stall_ms (design note section 9, "An app that
 * does not answer its drops"): its job goes on without it. Sets
 * e->stall_due_ns to when the next one is due. */
void iosr_swapout_set_aside_stalled(iosr_engine *e, uint64_t now);
/* Swap-out batches in flight that count against reclaim_inflight and keep
 * the engine from being idle (those set aside do not). */
uint32_t iosr_swapout_inflight(const iosr_engine *e);

/* ---- drops.c: drops; the dropper's discards told from the app's (sections 3, 9) ---- */
/* A drop of the n pages at start_vpn, linked into a's drops; its pages'
 * entries carry the low bits of its id (aux), so a page that mremap moved
 * into another drop's run is finished by its own drop only. NULL (ENOMEM). */
iosr_drop *iosr_drop_new(iosr_app *a, uint64_t id, uint64_t start_vpn, uint64_t n);
void iosr_drop_free(iosr_drop *d);
/* Drop d of a is settled: its marks are forgotten, threads that faulted on
 * its pages retry, d is freed and its batch ends if nothing else holds it. */
void iosr_drop_end(iosr_engine *e, iosr_app *a, iosr_drop *d);
/* a's dropper confirmed drop id (err: its madvise's, 0 when it worked). */
void iosr_drop_confirmed(iosr_engine *e, iosr_app *a, uint64_t id, int err);
/* A client came back on a new connection: every drop of a except `running`
 * (the one its dropper is in, 0: none) ends by what the kernel holds; those
 * above `started` (the last id its dropper began) never ran. */
void iosr_drop_settle_all(iosr_engine *e, iosr_app *a, uint64_t running, uint64_t started);
/* A pending drop of a, other than `except`, whose run covers page vpn (its
 * dropper may discard what is there), or NULL. */
iosr_drop *iosr_drop_covering(iosr_app *a, uint64_t vpn, const iosr_drop *except);
/* 1 when the run of a pending drop of a overlaps pages [vpn, vpn + n): its
 * dropper may discard any write-protected page there, so a page read back
 * there is mapped unprotected (not CLEAN, design note section 3). */
int iosr_drop_overlaps(const iosr_app *a, uint64_t vpn, uint64_t n);
/* Hands the page now at vpn over to drop d: d's confirmation settles it.
 * 0, or -1 (ENOMEM). */
int iosr_drop_adopt(iosr_drop *d, uint64_t vpn);
/* mremap moved pages [from, from + n) of a to [to, ...): the drops follow
 * their pages. */
void iosr_drop_rekey(iosr_app *a, uint64_t from, uint64_t to, uint64_t n);
/* 1 when a REMOVE over the DROPPING page p at vpn may be the dropper's
 * discard (design note section 9): it came between the dropper's marks of a
 * drop, over the pages that drop discards. 0: the app's. */
int iosr_drop_may_be_dropper(iosr_app *a, uint64_t vpn, const iosr_pte *p);
/* A dropper's mark read (common/beacon.h, kind IOSR_MARK_*): a drop mark
 * names the drop whose id ends in x; a run mark opens the window over pages
 * [x, x + n) of it. */
void iosr_drop_mark(iosr_app *a, int kind, uint64_t x, uint64_t n);
/* A REMOVE over [lo, hi): returns the first of its pages to count (hi:
 * none). Where it continues the dropper's madvise over the announced run
 * after a VMA split (it starts after the last REMOVE over the run began,
 * before the pages covered so far end, and where a VMA starts: vma_starts,
 * asked only then), the kernel repeats pages already
 * counted (design note section 3, "Whose discard"). Records one inside the
 * run as the last REMOVE over it; one reaching out of the run is the app's
 * and is counted whole. */
uint64_t iosr_drop_window_repeat(iosr_app *a, uint64_t lo, uint64_t hi,
                                 int (*vma_starts)(const iosr_app *, uint64_t));
/* Resume: the dropper is somewhere in drop id (pages [lo, lo + n)): its
 * window is open over all of them. */
void iosr_drop_resume_window(iosr_app *a, uint64_t id, uint64_t lo, uint64_t n);

/* ---- moveout.c: written pages moved out of the app (section 3, "Moved out") ---- */
/* Whether the engine moves a's written pages out itself (the option on, a
 * graveyard, UFFDIO_MOVE, the engine in a's own process). */
int iosr_moveout_usable(const iosr_engine *e, const iosr_app *a);
/* Whether a's dropper moves its written pages out (the same, the engine in
 * another process: iosrd). */
int iosr_moveout_by_dropper(const iosr_engine *e, const iosr_app *a);
/* Moves the written pages [vpn, vpn + n) of a, batch b's, out of the app
 * into its graveyard, from vpn on: each page moved is SWAPPED (ZERO if all
 * zero) at once, and a discard of its graveyard range joins b's drops.
 * Returns how many pages, from vpn, were moved (0 .. n); *why says why the
 * rest was not: -EAGAIN (an event unread: try again once it is read),
 * -ENOSPC (no graveyard room yet: the same), or the kernel's refusal
 * (-EBUSY a page shared with a fork child, -EINVAL a locked or read-only
 * VMA, ...). */
uint64_t iosr_moveout_run(iosr_engine *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n, int *why);
/* Reserves n graveyard pages of a for a dropper's move: the first's index,
 * or -1 (no room yet; a graveyard that may hold pages is discarded first). */
int64_t iosr_moveout_reserve(iosr_engine *e, iosr_app *a, uint64_t n);
/* Answers the drop mark read last (a->go_pending) once the events read with
 * it are applied: names the pages of the drop still at their addresses and,
 * when there are any, stops reading a's events until the dropper confirms. */
void iosr_moveout_send_go(iosr_engine *e, iosr_app *a);
/* a's dropper answered the daemon's IOSR_M_DROP_GO: the pages it moved are
 * SWAPPED, the rest resident again, and the app's events are read again
 * (design note section 3, "Moved by the dropper"). */
void iosr_moveout_dropper_answered(iosr_engine *e, iosr_app *a, const iosr_m_drop_moved *m);
/* Settles what a dropper's move d left (none of it moved): resident again,
 * or zero where the app discarded it; frees d. */
void iosr_moveout_finish(iosr_engine *e, iosr_app *a, iosr_drop *d);
/* The app's events are read again (its dropper's move answered). */
void iosr_moveout_hold_end(iosr_engine *e, iosr_app *a);
/* Graveyard drop d of a was confirmed (err: as the dropper's): its pages
 * are free again and no longer charged. */
void iosr_moveout_discarded(iosr_engine *e, iosr_app *a, const iosr_drop *d, int err);
/* Graveyard pages [vpn, vpn + n) of a await a discard (a resumed dropper's):
 * not used before it is confirmed. */
void iosr_moveout_hold(iosr_app *a, uint64_t vpn, uint64_t n);
/* Graveyard pages [vpn, vpn + n) reserved for a dropper's move whose answer
 * said nothing of what it moved: free again; where it may have moved some
 * (maybe_moved), the graveyard is discarded whole before it is used again. */
void iosr_moveout_release(iosr_app *a, uint64_t vpn, uint64_t n, int maybe_moved);
/* Forgets a's graveyard charge (the app is gone). */
void iosr_moveout_forget(iosr_engine *e, iosr_app *a);

/* ---- events.c: userfaultfd events (design note section 10) ---- */
/* MADV_DONTNEED / MADV_REMOVE over [start, end) (bytes): the dropper's or
 * the app's discard. */
void iosr_event_remove(iosr_engine *e, iosr_app *a, uint64_t start, uint64_t end);
/* munmap of [start, end) (bytes). */
void iosr_event_unmap(iosr_engine *e, iosr_app *a, uint64_t start, uint64_t end);
/* mremap moved [from, from + len) to [to, to + len) (bytes). */
void iosr_event_remap(iosr_engine *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t len);
/* fork: the child, served through child_uffd, shares every swapped slot of
 * the parent a. */
void iosr_event_fork(iosr_engine *e, iosr_app *a, int child_uffd);
/* A forked child of app `parent` served through `uffd`: registered with the
 * engine, with an empty page table. kind names it ("fork", "orphan"). NULL
 * (descriptor closed) when it cannot be tracked. */
iosr_app *iosr_event_child_app(iosr_engine *e, iosr_app *parent, int uffd, const char *kind);

/* ---- probe.c: the probe cache (design note section 6) ---- */
/* Allocates / frees the cache (probe_cache entries). 0 or -1 (ENOMEM). */
int iosr_probe_init(iosr_engine *e);
void iosr_probe_destroy(iosr_engine *e);
/* Keeps a copy of page vpn of a (read from slot) as a probe of window win
 * with weight; trigger: reaching it starts the next window at next_slot.
 * A full cache first gives up a's oldest probe (mapped). 0, or -1 when no
 * entry is free. */
int iosr_probe_add(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t slot, uint32_t weight, uint32_t win,
                   const uint8_t *data, int trigger, uint64_t next_slot);
/* A record for a window of `probes` probes of app (region rstate); its id
 * (never 0) names it. */
uint32_t iosr_probe_window(iosr_engine *e, uint32_t app, unsigned probes, uint32_t rstate);
/* A probe page that a thread was already waiting for when its read
 * completed: mapped at once, and a hit. */
void iosr_probe_used(iosr_engine *e, iosr_app *a, uint64_t vpn, uint32_t weight, uint32_t win, int trigger,
                     uint64_t next);
/* A fault on the CACHED page p at vpn: the probe is mapped (*copied 1) and
 * counts as a hit, or the copy met EAGAIN (*copied 0: retry). */
void iosr_probe_hit(iosr_engine *e, iosr_app *a, uint64_t vpn, iosr_pte *p, int *copied);
/* The probe of CACHED page p leaves the cache (p SWAPPED again); miss: it
 * counts as unused. */
void iosr_probe_drop(iosr_engine *e, iosr_app *a, iosr_pte *p, int miss);
/* At a major fault of region rstate: its probes untouched for longer than
 * the horizon are misses. */
void iosr_probe_expire(iosr_engine *e, iosr_app *a, uint32_t rstate);
/* mremap moved pages [from, from + n) of a to [to, ...): its probes follow. */
void iosr_probe_rekey(iosr_engine *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t n);

/* ---- ra_region.c: a read-ahead window per region (section 6) ---- */
/* The zone of page vpn: its index among the ra_zone-sized zones of the
 * address space (0 with ra_zone 0: one state per region). */
uint64_t iosr_ra_region_zone(const iosr_engine *e, uint64_t vpn);
/* 1 + index of the state of vpn's zone of sp's region, created at first use;
 * 0 only when out of memory (read-ahead then goes on with the app's
 * settings, without a region's state). */
uint32_t iosr_ra_region_of(const iosr_engine *e, iosr_app *a, iosr_span *sp, uint64_t vpn);
/* The state rstate names (1 + index), or NULL for 0. */
iosr_ra_region *iosr_ra_region_get(iosr_app *a, uint32_t rstate);
/* The state of page vpn's region and zone (created at first use, as
 * iosr_ra_region_of), or NULL. */
iosr_ra_region *iosr_ra_region_at(const iosr_engine *e, iosr_app *a, uint64_t vpn);
/* Every window back to the app's settings (ra_init/ra_max or the policy
 * changed); the counters stay. */
void iosr_ra_region_reset_all(iosr_app *a);
void iosr_ra_region_free_all(iosr_app *a);

/* ---- reclaim.c: reclaim jobs (design note sections 8 and 9) ---- */
/* Starts a job reclaiming up to `pages` (0: all) of the napps apps, oldest
 * pages first; budget: started by the budget. NULL when out of memory. */
iosr_job *iosr_reclaim_start(iosr_engine *e, iosr_app **apps, unsigned napps, uint64_t pages, int budget);
/* Steps every job while batches may start (reclaim_inflight). */
void iosr_reclaim_pump(iosr_engine *e);
/* Starts a budget job when the charged pages pass the high watermark. */
void iosr_reclaim_check_budget(iosr_engine *e);
/* Ends job j if it is finished, answering its waiter. */
void iosr_reclaim_job_done_maybe(iosr_engine *e, iosr_job *j);
/* App app is gone (its candidates are skipped when reached). */
void iosr_reclaim_forget_app(iosr_engine *e, uint32_t app);
/* The foreground app changed from `was` to `now` (either may be NULL; was
 * NULL: nothing to remember of it): `was` remembers what it holds, room is
 * expected for what `now` held when it last left the foreground, and a
 * running budget job, sized for the one before, ends with what it has in
 * flight (design note section 9, "Memory budget"). */
void iosr_reclaim_fg_changed(iosr_engine *e, iosr_app *was, iosr_app *now);

/* ---- budget.c: the hard memory budget (section 9, "Memory budget") ---- */
#define IOSR_BUDGET_FLOOR_PAGES 256u /* the least budget: faults of many threads in flight, 1 MiB */
/* Pages that may still enter the apps: the budget minus the charged pages
 * (resident and being read), 0 when none; UINT64_MAX with no budget. */
uint64_t iosr_budget_room(const iosr_engine *e);
/* A fault of a (not forked) on page vpn that would add a page: 1 when it is
 * held (no room, and a budget job runs to make some), 0 when it is served
 * now (room, no budget, stopping, or nothing can be reclaimed: past the
 * budget). */
int iosr_budget_hold(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t flags);
/* End of an engine turn: starts and pumps the budget job held faults need,
 * serves held faults, oldest first, while there is room (all of them when no
 * budget job can run). */
void iosr_budget_turn(iosr_engine *e);
/* 0 when a budget of `bytes` may be set now (0: none), else -1 with one line
 * in msg: below the floor, or below the foreground app's charged pages. */
int iosr_budget_check(iosr_engine *e, uint64_t bytes, char *msg, size_t cap);
/* Charged pages of app a: resident and being read. */
uint64_t iosr_budget_app_charged(const iosr_app *a);
void iosr_budget_destroy(iosr_engine *e);

/* ---- forkmode.c: fork mode of in-process engines (section 10) ---- */
#define IOSR_FORK_BUF 2048u /* userfaultfd messages held in fork mode */
/* Allocates fork mode's buffers when the engine starts (fork mode itself
 * must not allocate). 0 or -1 (ENOMEM). */
int iosr_fork_init(iosr_engine *e);
/* The loop's side: entered when fork_req is set; returns when the forking
 * thread's parent handler ends the mode. */
void iosr_fork_mode(iosr_engine *e);
/* Called from inproc.c's pthread_atfork handlers of the forking thread:
 * before fork, the engine enters a mode in which it calls no malloc (glibc
 * holds its allocator locks across fork, while fork waits for the engine to
 * read the userfaultfd FORK event); after fork it leaves it. Thread-safe. */
void iosr_fork_prepare(iosr_engine *e);
void iosr_fork_parent(iosr_engine *e);

/* ---- stats.c: statistics (design note section 14) ---- */
/* a's statistics, as include/iosr.h's iosr_app_stats. */
void iosr_stats_fill(iosr_engine *e, iosr_app *a, iosr_app_stats *out);
/* The engine's and every app's statistics as JSON (`iosr stat --json`). */
void iosr_stats_json(iosr_engine *e, iosr_buf *b);

/* ---- conn.c: connections, the in-process ones too (sections 11, 12, 15) ---- */
/* A new connection on fd (accepted, or handed over by iosr_engine_add_fd),
 * watched by the loop; NULL when out of memory. */
iosr_conn *iosr_conn_add(iosr_engine *e, int fd);
/* Closes c; an app attached to it is detached while its process lives (its
 * client may resume), else gone. */
void iosr_conn_close(iosr_engine *e, iosr_conn *c);
/* The loop's handlers: c's socket is readable (messages are validated and
 * served) / writable (queued messages are sent). */
void iosr_conn_readable(iosr_engine *e, iosr_conn *c);
void iosr_conn_writable(iosr_engine *e, iosr_conn *c);
/* Sends a message with up to IOSR_MAX_FDS descriptors (the caller keeps its
 * own: a queued message holds duplicates), queued when the socket is full.
 * 0, or -1 (the socket failed, or ENOMEM). */
int iosr_conn_send(iosr_engine *e, iosr_conn *c, uint16_t type, uint16_t flags, uint32_t seq, const void *p,
                   uint32_t len, const int *fds, int nfds);
/* Sends a REPLY to request seq: err (0 or an errno), value, msg (NULL: none). */
int iosr_conn_reply(iosr_engine *e, iosr_conn *c, uint32_t seq, int err, uint64_t value, const char *msg);
/* The connection of id, or NULL (closed meanwhile). */
iosr_conn *iosr_conn_by_id(iosr_engine *e, uint32_t id);
/* Answers every connection waiting for idle once the engine is. */
void iosr_conn_idle_check(iosr_engine *e);
/* Starts a reclaim of apps for control connection c (its answer when done). */
void iosr_conn_reclaim_now(iosr_engine *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n,
                           uint64_t bytes);

/* ---- admit.c: admission (section 15, "Connections from hostile users") ---- */
int iosr_admit_init(iosr_engine *e);
/* The listening socket is readable: accepts, or refuses, the clients waiting. */
void iosr_admit_accept(iosr_engine *e);
/* A connection closed: the listening socket is watched again if it backed off. */
void iosr_admit_conn_closed(iosr_engine *e);
/* Runs the admission deadlines due at now (hello timeouts, the listening
 * socket's back-off); returns the next one (0: none). */
uint64_t iosr_admit_timer(iosr_engine *e, uint64_t now);

/* ---- trim.c: reclaims held until their apps gave back their free memory ---- */
/* Asks the apps that trim and have not been asked yet; 1 when the reclaim is
 * held (started later by an answer or the timer), 0 to start it now. */
int iosr_trim_hold(iosr_engine *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n, uint64_t bytes);
/* App a answered trim request id. */
void iosr_trim_answered(iosr_engine *e, iosr_app *a, uint64_t id);
/* Starts the held reclaims whose time is up; the next deadline (0: none). */
uint64_t iosr_trim_timer(iosr_engine *e, uint64_t now);

/* ---- resume.c: a client back after its connection or daemon was lost (section 12) ---- */
/* The RESUME hello h of c, with its userfaultfd and page-table memfd:
 * re-attaches the app (same engine) or rebuilds it (new engine). 0, or an
 * errno (EPROTO, EBUSY, ...) with one line in msg (cap bytes). */
int iosr_resume_app(iosr_engine *e, iosr_conn *c, const iosr_m_hello *h, int uffd, int ptfd, char *msg,
                    size_t cap);
/* A forked child of a resumed app, whose page table died with the old
 * daemon: its faults get SIGBUS, never zero. */
void iosr_resume_orphan(iosr_engine *e, uint32_t parent, int uffd);

/* epoll tags (engine.c's loop): the descriptor's kind in the top byte, an id below */
enum { IOSR_TAG_LISTEN = 1, IOSR_TAG_IO, IOSR_TAG_TIMER, IOSR_TAG_WAKE, IOSR_TAG_CONN, IOSR_TAG_UFFD,
       IOSR_TAG_PIDFD };
static inline uint64_t iosr_tag(int kind, uint64_t v) { return (uint64_t)kind << 56 | v; }

#endif
