/* The engine's internal model: apps, page tables, requests, reclaim jobs,
 * probe cache. Everything here is owned by the engine thread (design note
 * section 1); no locks. Layers below (swaparea, slots, sched, readahead) know
 * nothing of these structs; the fault/ and engine/ files share them.
 */
#ifndef IOSR_ENGINE_INT_H
#define IOSR_ENGINE_INT_H

#include <stddef.h>
#include <stdint.h>
#include <signal.h>
#include <sys/types.h>

#include "common/beacon.h"
#include "common/json.h"
#include "common/mix.h"
#include "common/opts.h"
#include "common/proto.h"
#include "fault/pagetable.h"
#include "iosr.h"
#include "readahead/window.h"
#include "sched/sched.h"
#include "slots/slotmap.h"
#include "swaparea/bufpool.h"
#include "swaparea/format.h"
#include "swaparea/io.h"

#define IOSR_MAX_APPS 4096u
#define IOSR_MAX_BATCH 1024u

typedef struct iosr_engine_s iosr_engine_s;
typedef struct iosr_app iosr_app;

/* ---- requests ---- */

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

typedef struct iosr_batch iosr_batch;

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

/* ---- swap-out ---- */

/* iosr_batch.zero[i]: what page i of a batch is */
enum {
  IOSR_BATCH_WRITE = 0, /* written to its slot */
  IOSR_BATCH_ZERO = 1,  /* all zero: no slot, nothing written */
  IOSR_BATCH_KEPT = 2,  /* unreadable: kept resident, not part of the batch */
  IOSR_BATCH_CLEAN = 3  /* was CLEAN: its slot holds it, nothing written (design note section 3) */
};

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

typedef struct iosr_cand {
  uint32_t pri;   /* 0 first (background apps), 1 after (the foreground app under the budget) */
  uint32_t age;
  uint32_t app;
  uint32_t pad;
  uint64_t vpn;
} iosr_cand;

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

typedef struct iosr_drop {
  struct iosr_drop *next;
  uint64_t id;
  uint64_t start_vpn, n;    /* the run the dropper discards: where its pages were when asked */
  struct iosr_batch *batch;
  int grave;                /* a discard of graveyard pages (fault/moveout.c), not of the app's */
  uint64_t move_to;         /* the graveyard page the dropper moves the run to (0: it discards the run) */
  uint64_t go[IOSR_DROP_BITS_WORDS]; /* the pages the daemon named to be moved (IOSR_M_DROP_GO) */
  int go_sent;              /* this daemon answered its mark (named those, maybe none) */
  uint64_t charged;         /* those of them charged to the budget until discarded */
  uint64_t *adopted;        /* where the pages handed over to it are now (moved into its run) */
  uint32_t nadopted, capadopted;
  uint64_t vpn[];           /* where page k of the run is now (mremap moves it) */
} iosr_drop;

/* ---- probe cache (design note section 6) ---- */

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

/* ---- pending retries of fault service after EAGAIN ---- */

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

typedef struct iosr_conn iosr_conn;

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
  iosr_ra_region *ra_regions; /* read-ahead state per region and zone (readahead/region.c) */
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
  uint32_t faults_waiting;   /* major faults waiting for a read */
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
  uint64_t resume_drop_id, resume_drop_start, resume_drop_n;
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
  int trims;                 /* answers trim requests (IOSR_ATTACH_TRIMS; daemon/trim.c) */
  uint64_t trim_id;          /* the trim request awaiting its answer (0: none) */
  uint64_t trim_sent_ns;     /* when it was sent */
  iosr_app_stats st;
  uint64_t lat_start_count;  /* faults with a latency start recorded */
  struct { uint64_t vpn, t0; } lat[64]; /* major faults waiting, for latency */
  uint32_t nlat;
};

/* ---- connections ---- */

struct iosr_conn {
  int fd;
  int role;
  uint32_t id;               /* connection id (replies, waiters) */
  uint32_t app;              /* app id for app connections */
  pid_t pid;
  uid_t uid;
  int hello_done;
  uint64_t accepted_ns;      /* hello due within hello_timeout_ms of this */
  uint8_t *out;              /* pending outgoing packets: [u32 len][packet]... */
  size_t out_len, out_cap;
  int nfd_pending;
  struct iosr_conn *next;
  uint32_t idle_waiter_seq;
  int idle_waiting;
};

/* ---- the engine ---- */

struct iosr_engine_s {
  iosr_settings set;
  iosr_swap_area area;
  iosr_slotmap slots;
  iosr_bufpool bufs;
  iosr_io *io;
  iosr_sched sched;
  int epfd, timerfd, listen_fd, wake_fd;
  int fork_req;              /* atomic: an in-process app thread is forking (engine/forkmode.c) */
  int fork_ack_fd;           /* eventfd: the engine entered fork mode */
  struct iosr_fork_buf *fork_buf;
  int stop;                  /* atomic: set by iosr_eng_request_stop (any thread, signal handlers) */
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
  uint64_t moveout_pages;    /* pages moved out of apps (fault/moveout.c) */
  uint64_t moveout_refused;  /* moves of runs, or their rests, the kernel refused (tried again on EAGAIN) */
  uint64_t moveout_no_room;  /* moves of runs, or their rests, that found no graveyard room (tried again) */
  uint32_t moveout_waiting;  /* batches whose move-out is tried again in a later turn */
  uint64_t stall_due_ns;     /* when the next batch waiting for drops is set aside (0: none waits) */
  uint16_t batch_seq;
  /* the hard budget (engine/budget.c; design note section 9, "Memory budget") */
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
  /* admission (daemon/admit.c) */
  int spare_fd;              /* a descriptor held in reserve for refusing clients when out of them */
  int listen_off;            /* the listening socket is not watched (back-off) */
  uint32_t listen_backoff_ms;
  uint64_t listen_resume_ns;
  uint64_t accept_errors, conns_refused, hello_timeouts;
  uint64_t loop_turns;       /* event-loop iterations: an idle engine does not turn */
  struct iosr_trim_wait *trim_waits; /* reclaims held for their apps' trims (daemon/trim.c) */
  uint64_t next_trim_id;
  uint8_t *zero_buf;         /* zero_window pages of zeros: this engine's write-fault fill source */
  size_t zero_buf_bytes;
  uint64_t started_ns;
  const char *role;          /* "iosrd" or "in-process" */
};

/* engine/engine.c */
iosr_app *iosr_eng_app(iosr_engine_s *e, uint32_t id); /* live app or NULL */
void iosr_eng_app_gone(iosr_engine_s *e, iosr_app *a, const char *why);
void iosr_eng_maybe_finish_app(iosr_engine_s *e, iosr_app *a);
uint32_t iosr_eng_new_app_id(iosr_engine_s *e);
int iosr_eng_watch(iosr_engine_s *e, int fd, uint64_t tag);
void iosr_eng_unwatch(iosr_engine_s *e, int fd);
/* Test hook IOSR_TEST_HOLD_EVENTS (include/iosr.h): on, no app's
 * userfaultfd is read (its events wait in the kernel); off, every one is
 * read again. Engine thread only. */
void iosr_eng_hold_events(iosr_engine_s *e, int on);
void iosr_eng_pump(iosr_engine_s *e);       /* dispatch what the scheduler releases */
int iosr_eng_idle(const iosr_engine_s *e);
void iosr_eng_reap_forked(iosr_engine_s *e);
void iosr_eng_notify_fg(iosr_engine_s *e, iosr_app *a, int fg);
/* The foreground app changed from `was` to `now` (either may be NULL; was
 * NULL: nothing to remember of it): `was` remembers what it holds, room is
 * expected for what `now` held when it last left the foreground, and a
 * running budget job, sized for the one before, ends with what it has in
 * flight (reclaim.c; design note section 9, "Memory budget"). */
void iosr_reclaim_fg_changed(iosr_engine_s *e, iosr_app *was, iosr_app *now);
iosr_app *iosr_eng_find_app(iosr_engine_s *e, const char *sel);
uint16_t iosr_eng_ioprio(const iosr_engine_s *e, int cls);

/* fault/fault.c */
void iosr_fault_read_uffd(iosr_engine_s *e, iosr_app *a);
void iosr_fault_handle(iosr_engine_s *e, iosr_app *a, uint64_t addr, uint64_t flags, uint32_t tid);
/* A region span sp just added for app a: the pages the kernel already holds
 * there are PRESENT (mlockall(MCL_FUTURE) populates a mapping before libiosr
 * registers it; design note section 3, "Pages present at registration").
 * Engine thread only; one pagemap read per 512 pages, none when its first
 * page is not held. */
void iosr_fault_adopt_present(iosr_engine_s *e, iosr_app *a, iosr_span *sp);
void iosr_fault_run_retries(iosr_engine_s *e);
/* A fault on page vpn of a served again (a retry, a held fault): re-handled
 * unless the page is resident by now (then its waiters are woken). Engine
 * thread only. */
void iosr_fault_again(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint64_t flags);
void iosr_fault_add_retry(iosr_engine_s *e, uint32_t app, int op, uint64_t vpn, uint64_t n, uint64_t flags);
void iosr_fault_lat_start(iosr_engine_s *e, iosr_app *a, uint64_t vpn);
void iosr_fault_lat_end(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint64_t n);
void iosr_app_set_state(iosr_engine_s *e, iosr_app *a, iosr_pte *p, int state);

/* fault/swapin.c */
void iosr_swapin_fault(iosr_engine_s *e, iosr_app *a, iosr_span *sp, uint64_t vpn, iosr_pte *p);
void iosr_swapin_continue(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint64_t next_slot);
void iosr_swapin_complete(iosr_engine_s *e, iosr_req *r);
void iosr_swapin_run_install_retries(iosr_engine_s *e);
void iosr_swapin_all(iosr_engine_s *e, iosr_app *a);
void iosr_req_free(iosr_engine_s *e, iosr_req *r);
void iosr_req_link(iosr_engine_s *e, iosr_req *r);
iosr_req *iosr_req_find_queued_read(iosr_engine_s *e, uint64_t slot);

/* fault/swapout.c */
int iosr_swapout_step(iosr_engine_s *e, iosr_job *j);
void iosr_swapout_write_done(iosr_engine_s *e, iosr_req *r);
void iosr_swapout_dropped(iosr_engine_s *e, iosr_app *a, uint64_t id, int err);
/* Ends batch b once its writes are done, its move-outs tried and every
 * discard it asked for confirmed. */
void iosr_swapout_batch_release(iosr_engine_s *e, iosr_batch *b);
/* A client came back on a new connection: every drop of a except `running`
 * (the one its dropper is in, 0: none) ends by what the kernel holds; those
 * above `started` (the last id its dropper began) never ran. */
void iosr_swapout_settle_drops(iosr_engine_s *e, iosr_app *a, uint64_t running, uint64_t started);
void iosr_swapout_cancel_page(iosr_engine_s *e, iosr_app *a, uint64_t vpn, iosr_pte *p);
iosr_drop *iosr_drop_new(iosr_app *a, uint64_t id, uint64_t start_vpn, uint64_t n);
void iosr_drop_free(iosr_drop *d);
/* Drop d of a is settled: its marks are forgotten, threads that faulted on
 * its pages retry, d is freed and its batch ends if nothing else holds it. */
void iosr_drop_end(iosr_engine_s *e, iosr_app *a, iosr_drop *d);
/* A pending drop of a, other than `except`, whose run covers page vpn (its
 * dropper may discard what is there), or NULL. */
iosr_drop *iosr_drop_covering(iosr_app *a, uint64_t vpn, const iosr_drop *except);
/* 1 when the run of a pending drop of a overlaps pages [vpn, vpn + n): its
 * dropper may discard any write-protected page there, so a page read back
 * there is mapped unprotected (not CLEAN, design note section 3). */
int iosr_drop_overlaps(const iosr_app *a, uint64_t vpn, uint64_t n);
/* 1 when a page read back to [vpn, vpn + n) of a may be mapped CLEAN:
 * write-protected, keeping its slot (design note section 3). */
int iosr_swapin_may_clean(const iosr_engine_s *e, const iosr_app *a, uint64_t vpn, uint64_t n);
/* Hands the page now at vpn over to drop d: d's confirmation settles it.
 * 0, or -1 (ENOMEM). */
int iosr_drop_adopt(iosr_drop *d, uint64_t vpn);
void iosr_swapout_drops_moved(iosr_app *a, uint64_t from, uint64_t to, uint64_t n);
/* 1 when a REMOVE over the DROPPING page p at vpn may be the dropper's
 * discard (design note section 9): it came between the dropper's marks of a
 * drop, over the pages that drop discards. 0: the app's. */
int iosr_swapout_may_be_dropper(iosr_app *a, uint64_t vpn, const iosr_pte *p);
/* A dropper's mark read (common/beacon.h, kind IOSR_MARK_*): a drop mark
 * names the drop whose id ends in x; a run mark opens the window over pages
 * [x, x + n) of it. */
void iosr_swapout_mark(iosr_app *a, int kind, uint64_t x, uint64_t n);
/* A REMOVE over [lo, hi): returns the first of its pages to count (hi:
 * none). Where it continues the dropper's madvise over the announced run
 * after a VMA split (it starts after the last REMOVE over the run began,
 * before the pages covered so far end, and where a VMA starts: vma_starts,
 * asked only then), the kernel repeats pages already
 * counted (design note section 3, "Whose discard"). Records one inside the
 * run as the last REMOVE over it; one reaching out of the run is the app's
 * and is counted whole. */
uint64_t iosr_swapout_window_repeat(iosr_app *a, uint64_t lo, uint64_t hi,
                                    int (*vma_starts)(const iosr_app *, uint64_t));
/* Resume: the dropper is somewhere in drop id (pages [lo, lo + n)): its
 * window is open over all of them. */
void iosr_swapout_resume_window(iosr_app *a, uint64_t id, uint64_t lo, uint64_t n);
void iosr_swapout_forget_app(iosr_engine_s *e, iosr_app *a);
/* Sends drop d's request to a's dropper (none while a is detached). */
void iosr_swapout_send_drop(iosr_engine_s *e, iosr_app *a, iosr_drop *d);
/* Counts page p, just settled out of the app (SWAPPED, or ZERO where
 * `zero`: all-zero), in a's and job j's statistics; clears its flags. */
void iosr_swapout_count_out(iosr_app *a, iosr_job *j, iosr_pte *p, int zero);

/* fault/moveout.c (design note section 3, "Moved out") */
/* Whether the engine moves a's written pages out itself (the option on, a
 * graveyard, UFFDIO_MOVE, the engine in a's own process). */
int iosr_moveout_usable(const iosr_engine_s *e, const iosr_app *a);
/* Whether a's dropper moves its written pages out (the same, the engine in
 * another process: iosrd). */
int iosr_moveout_by_dropper(const iosr_engine_s *e, const iosr_app *a);
/* Reserves n graveyard pages of a for a dropper's move: the first's index,
 * or -1 (no room yet; a graveyard that may hold pages is discarded first). */
int64_t iosr_moveout_reserve(iosr_engine_s *e, iosr_app *a, uint64_t n);
/* The dropper moved the pages of bits (page k to graveyard page first + k,
 * k < n) out of a: their graveyard range joins batch b's drops, the rest of
 * the reservation is free again. */
void iosr_moveout_dropper_moved(iosr_engine_s *e, iosr_app *a, iosr_batch *b, uint64_t first, const uint64_t *bits,
                                uint64_t n, int err);
/* Moves the written pages [vpn, vpn + n) of a, batch b's, out of the app
 * into its graveyard, from vpn on: each page moved is SWAPPED (ZERO if all
 * zero) at once, and a discard of its graveyard range joins b's drops.
 * Returns how many pages, from vpn, were moved (0 .. n); *why says why the
 * rest was not: -EAGAIN (an event unread: try again once it is read),
 * -ENOSPC (no graveyard room yet: the same), or the kernel's refusal
 * (-EBUSY a page shared with a fork child, -EINVAL a locked or read-only
 * VMA, ...). Engine thread only. */
uint64_t iosr_moveout_run(iosr_engine_s *e, iosr_app *a, iosr_batch *b, uint64_t vpn, uint64_t n, int *why);
/* Tries again the move-out of every batch waiting for it (engine loop, after
 * the turn's events are read). */
void iosr_swapout_run_move_retries(iosr_engine_s *e);
/* Sets aside every batch whose writes are done and whose app has not
 * answered its drops for drop_stall_ms (design note section 9, "An app that
 * does not answer its drops"): its job goes on without it. Sets
 * e->stall_due_ns to when the next one is due. Engine thread only. */
void iosr_swapout_set_aside_stalled(iosr_engine_s *e, uint64_t now);
/* Swap-out batches in flight that count against reclaim_inflight and keep
 * the engine from being idle (those set aside do not). */
uint32_t iosr_swapout_inflight(const iosr_engine_s *e);
/* Graveyard drop d of a was confirmed (err: as the dropper's): its pages
 * are free again and no longer charged. */
void iosr_moveout_discarded(iosr_engine_s *e, iosr_app *a, const iosr_drop *d, int err);
/* Graveyard pages [vpn, vpn + n) of a await a discard (a resumed dropper's):
 * not used before it is confirmed. */
void iosr_moveout_hold(iosr_app *a, uint64_t vpn, uint64_t n);
/* a's dropper answered the daemon's IOSR_M_DROP_GO: the pages it moved are
 * SWAPPED, the rest resident again, and the app's events are read again
 * (design note section 3, "Moved by the dropper"). */
void iosr_swapout_moved(iosr_engine_s *e, iosr_app *a, const iosr_m_drop_moved *m);
/* Answers the drop mark read last (a->go_pending) once the events read with
 * it are applied: names the pages of the drop still at their addresses and,
 * when there are any, stops reading a's events until the dropper confirms. */
void iosr_swapout_send_go(iosr_engine_s *e, iosr_app *a);
/* Settles what a dropper's move d left (none of it moved): resident again,
 * or zero where the app discarded it; frees d. */
void iosr_moveout_finish(iosr_engine_s *e, iosr_app *a, iosr_drop *d);
/* The app's events are read again (its dropper's move answered). */
void iosr_moveout_hold_end(iosr_engine_s *e, iosr_app *a);
/* Graveyard pages [vpn, vpn + n) reserved for a dropper's move whose answer
 * said nothing of what it moved: free again; where it may have moved some
 * (maybe_moved), the graveyard is discarded whole before it is used again. */
void iosr_moveout_release(iosr_app *a, uint64_t vpn, uint64_t n, int maybe_moved);
/* Forgets a's graveyard charge (the app is gone). */
void iosr_moveout_forget(iosr_engine_s *e, iosr_app *a);

/* fault/events.c */
void iosr_event_remove(iosr_engine_s *e, iosr_app *a, uint64_t start, uint64_t end);
void iosr_event_unmap(iosr_engine_s *e, iosr_app *a, uint64_t start, uint64_t end);
void iosr_event_remap(iosr_engine_s *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t len);
void iosr_event_fork(iosr_engine_s *e, iosr_app *a, int child_uffd);
iosr_app *iosr_app_new_child(iosr_engine_s *e, iosr_app *parent, int uffd, const char *kind);
void iosr_pte_release(iosr_engine_s *e, iosr_app *a, uint64_t vpn, iosr_pte *p);
void iosr_pte_put_slot(iosr_engine_s *e, iosr_pte *p);

/* readahead/probe.c */
int iosr_probe_init(iosr_engine_s *e);
void iosr_probe_destroy(iosr_engine_s *e);
int iosr_probe_add(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint64_t slot, uint32_t weight, uint32_t win,
                   const uint8_t *data, int trigger, uint64_t next_slot);
uint32_t iosr_probe_window(iosr_engine_s *e, uint32_t app, unsigned probes, uint32_t rstate);
void iosr_probe_used(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint32_t weight, uint32_t win, int trigger,
                     uint64_t next);
void iosr_probe_hit(iosr_engine_s *e, iosr_app *a, uint64_t vpn, iosr_pte *p, int *copied);
void iosr_probe_drop(iosr_engine_s *e, iosr_app *a, iosr_pte *p, int miss);
void iosr_probe_expire(iosr_engine_s *e, iosr_app *a, uint32_t rstate);
void iosr_probe_rekey(iosr_engine_s *e, iosr_app *a, uint64_t from, uint64_t to, uint64_t n);

/* readahead/region.c (design note section 6: a window per region) */
uint64_t iosr_ra_zone(const iosr_engine_s *e, uint64_t vpn);
uint32_t iosr_ra_state_of(const iosr_engine_s *e, iosr_app *a, iosr_span *sp, uint64_t vpn);
iosr_ra_region *iosr_ra_state(iosr_app *a, uint32_t rstate);
iosr_ra_region *iosr_ra_state_at(const iosr_engine_s *e, iosr_app *a, uint64_t vpn);
void iosr_ra_states_reset(iosr_app *a);
void iosr_ra_states_free(iosr_app *a);

/* engine/reclaim.c */
iosr_job *iosr_reclaim_start(iosr_engine_s *e, iosr_app **apps, unsigned napps, uint64_t pages,
                             int budget);
void iosr_reclaim_pump(iosr_engine_s *e);
void iosr_reclaim_check_budget(iosr_engine_s *e);
void iosr_reclaim_job_done_maybe(iosr_engine_s *e, iosr_job *j);
void iosr_reclaim_forget_app(iosr_engine_s *e, uint32_t app);

/* engine/budget.c (design note section 9, "Memory budget"). All on the
 * engine thread. */
#define IOSR_BUDGET_FLOOR_PAGES 256u /* the least budget: faults of many threads in flight, 1 MiB */
/* Pages that may still enter the apps: the budget minus the charged pages
 * (resident and being read), 0 when none; UINT64_MAX with no budget. */
uint64_t iosr_budget_room(const iosr_engine_s *e);
/* A fault of a (not forked) on page vpn that would add a page: 1 when it is
 * held (no room, and a budget job runs to make some), 0 when it is served
 * now (room, no budget, stopping, or nothing can be reclaimed: past the
 * budget). */
int iosr_budget_hold(iosr_engine_s *e, iosr_app *a, uint64_t vpn, uint64_t flags);
/* End of an engine turn: starts and pumps the budget job held faults need,
 * serves held faults, oldest first, while there is room (all of them when no
 * budget job can run). */
void iosr_budget_turn(iosr_engine_s *e);
/* 0 when a budget of `bytes` may be set now (0: none), else -1 with one line
 * in msg: below the floor, or below the foreground app's charged pages. */
int iosr_budget_check(iosr_engine_s *e, uint64_t bytes, char *msg, size_t cap);
/* Charged pages of app a: resident and being read. */
uint64_t iosr_budget_app_charged(const iosr_app *a);
void iosr_budget_destroy(iosr_engine_s *e);

/* engine/forkmode.c */
#define IOSR_FORK_BUF 2048u
int iosr_fork_init(iosr_engine_s *e);
void iosr_fork_mode(iosr_engine_s *e);

/* engine/stats.c */
void iosr_stats_fill(iosr_engine_s *e, iosr_app *a, iosr_app_stats *out);
void iosr_stats_json(iosr_engine_s *e, iosr_buf *b);

/* daemon/server.c (also serves the in-process engine's socketpairs) */
void iosr_srv_accept(iosr_engine_s *e);
void iosr_srv_conn_readable(iosr_engine_s *e, iosr_conn *c);
void iosr_srv_conn_writable(iosr_engine_s *e, iosr_conn *c);
iosr_conn *iosr_srv_add_conn(iosr_engine_s *e, int fd);
void iosr_srv_close_conn(iosr_engine_s *e, iosr_conn *c);
int iosr_srv_send(iosr_engine_s *e, iosr_conn *c, uint16_t type, uint16_t flags, uint32_t seq,
                  const void *p, uint32_t len, const int *fds, int nfds);
int iosr_srv_reply(iosr_engine_s *e, iosr_conn *c, uint32_t seq, int err, uint64_t value,
                   const char *msg);
iosr_conn *iosr_srv_conn_by_id(iosr_engine_s *e, uint32_t id);
void iosr_srv_idle_check(iosr_engine_s *e);
/* Starts a reclaim of apps for control connection c (its answer when done). */
void iosr_srv_reclaim_now(iosr_engine_s *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n,
                          uint64_t bytes);

/* daemon/trim.c: reclaims held until their apps gave back their free memory */
/* Asks the apps that trim and have not been asked yet; 1 when the reclaim is
 * held (started later by an answer or the timer), 0 to start it now. */
int iosr_srv_trim_hold(iosr_engine_s *e, iosr_conn *c, uint32_t seq, iosr_app **apps, unsigned n,
                       uint64_t bytes);
/* App a answered trim request id. */
void iosr_srv_trimmed(iosr_engine_s *e, iosr_app *a, uint64_t id);
/* Starts the held reclaims whose time is up; the next deadline (0: none). */
uint64_t iosr_srv_trim_timer(iosr_engine_s *e, uint64_t now);

/* daemon/admit.c */
int iosr_srv_admit_init(iosr_engine_s *e);
void iosr_srv_admit_conn_closed(iosr_engine_s *e);
/* Runs the admission deadlines due at now (hello timeouts, the listening
 * socket's back-off); returns the next one (0: none). */
uint64_t iosr_srv_admit_timer(iosr_engine_s *e, uint64_t now);

/* daemon/resume.c */
int iosr_resume_app(iosr_engine_s *e, iosr_conn *c, const iosr_m_hello *h, int uffd, int ptfd,
                    char *msg, size_t cap);
void iosr_resume_orphan(iosr_engine_s *e, uint32_t parent, int uffd);

/* engine tags for epoll */
enum { IOSR_TAG_LISTEN = 1, IOSR_TAG_IO, IOSR_TAG_TIMER, IOSR_TAG_WAKE, IOSR_TAG_CONN, IOSR_TAG_UFFD,
       IOSR_TAG_PIDFD };
static inline uint64_t iosr_tag(int kind, uint64_t v) { return (uint64_t)kind << 56 | v; }

#endif
