/* libiosr: swappable memory served by IOSR, user-space flash swap on
 * userfaultfd (brief: ../shared/brief/iosr.md; decisions:
 * docs/design/iosr.md).
 *
 * A client process connects to iosrd (or to an engine running inside the
 * process), then obtains regions: anonymous private memory whose pages the
 * engine may swap out to its swap area and brings back on first touch.
 * Untouched pages read as zero; swapped pages come back byte-identical.
 *
 * Units: bytes unless named otherwise; a page is 4 KiB (IOSR_PAGE).
 * Errors: functions return NULL or -1 and set errno; they never abort on
 * bad input. Thread-safety is stated per function.
 */
#ifndef IOSR_H
#define IOSR_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define IOSR_PAGE 4096u
#define IOSR_SIZE_BUCKETS 11u /* request sizes 4 KiB, 8 KiB, ..., 2 MiB, >= 4 MiB */
#define IOSR_LAT_BUCKETS 112u /* fault latency, 4 buckets per power of two from 1 us */
#define IOSR_NAME_MAX 48u     /* app names, including the NUL */

typedef struct iosr_ctx iosr_ctx;       /* one client connection (one app) */
typedef struct iosr_region iosr_region; /* one range of swappable memory */
typedef struct iosr_engine iosr_engine; /* an engine running inside this process */
typedef struct iosr_ctl iosr_ctl;       /* a control connection */

/* ---- Engine inside this process (brief: "How this project realizes IOSR";
 * design note section 1). ---- */

/* Starts an engine on its own thread, serving the swap area at swap_path
 * (made by `iosr mkswap`). settings: NULL or "key=value,..." with the keys of
 * the IOSR_* options (README), applied after the environment. Returns NULL
 * with errno: ENOENT/EACCES (swap area), EINVAL (bad header or setting; a
 * message is printed), EBUSY (area used by a running iosrd), ENOTSUP
 * (userfaultfd or O_DIRECT unavailable). Thread-safe. */
iosr_engine *iosr_engine_start(const char *swap_path, const char *settings);

/* Stops the engine. Every client of it must have disconnected, else EBUSY.
 * Returns 0 or -1 with errno. */
int iosr_engine_stop(iosr_engine *engine);

/* ---- Clients ---- */

typedef struct iosr_connect_opts {
  const char *app_name;    /* NULL: IOSR_APP, else the program name; unique per daemon */
  const char *socket_path; /* NULL: IOSR_SOCKET, else the default socket (README) */
  iosr_engine *engine;     /* non-NULL: attach to this in-process engine instead */
  /* Called on a thread of libiosr's own, in order, when the daemon makes
   * this app the foreground app (is_foreground=1) or moves it to the
   * background (0). May be NULL. May touch the app's regions; should return
   * quickly (later notifications wait for it) and must not call libiosr
   * but iosr_trim_done. */
  void (*on_foreground)(iosr_ctx *ctx, int is_foreground, void *arg);
  void *arg;
  /* Called on the same thread as on_foreground when a swap-out of this app is about to start
   * (`iosr reclaim` naming it, or all background apps): the app gives back
   * the memory it holds free in its regions (iosr_region_discard or
   * madvise(MADV_DONTNEED)), so that it is dropped without a write, then
   * calls iosr_trim_done(ctx, id) from another thread. The daemon holds the
   * swap-out until the answer, or IOSR_TRIM_WAIT_MS (README), then writes
   * what is resident. NULL: the app is never asked. Should return quickly and
   * must not call libiosr (see on_foreground); a newer request replaces one
   * not yet delivered. Design: docs/design/stack.md,
   * "Free memory is not written". */
  void (*on_trim)(iosr_ctx *ctx, uint64_t id, void *arg);
} iosr_connect_opts;

/* Connects this process as one app: checks credentials with the daemon,
 * creates the userfaultfd and hands it over, starts the agent threads.
 * opts may be NULL. Returns NULL with errno: ECONNREFUSED/ENOENT (no daemon),
 * EACCES (refused: wrong uid), EEXIST (app name in use), ENOTSUP (kernel lacks
 * userfaultfd write-protect or events), EPROTO (daemon misbehaved), EINVAL
 * (a malformed IOSR_LOG or IOSR_RECONNECT_MS, named in a line on stderr).
 * The first call warns on stderr about each IOSR_* variable IOSR does not
 * read (a misspelt option). Thread-safe; one process may hold several
 * contexts (several apps). */
iosr_ctx *iosr_connect(const iosr_connect_opts *opts);

/* Destroys every region of ctx, says goodbye and frees ctx. 0 or -1. */
int iosr_disconnect(iosr_ctx *ctx);

/* Asks the daemon to make this app the foreground app (as `iosr fg`). 0 or -1. */
int iosr_set_foreground(iosr_ctx *ctx);

/* Answers the trim request `id` (on_trim): what the app holds free is given
 * back, the daemon may write the rest. Sends one message, waits for none.
 * 0, or -1 with errno: ENOTCONN (daemon away: the request died with it),
 * ECHILD (ctx belongs to the parent of a fork). Thread-safe, from the
 * callbacks too. */
int iosr_trim_done(iosr_ctx *ctx, uint64_t id);

/* ---- Regions (design note section 13) ---- */

/* Creates a region of `bytes` (rounded up to 4 KiB) of swappable memory,
 * aligned to `align` (a power of two >= 4 KiB; iosr_region_create uses
 * 2 MiB). Nothing is committed before it is touched; untouched pages read as
 * zero. A fork child inherits a copy (its swapped pages are served from the
 * parent's slots), except without CAP_SYS_PTRACE, where the region is not
 * inherited (MADV_DONTFORK). Release memory with iosr_region_discard or
 * madvise(MADV_DONTNEED); do not munmap or mremap parts of a region behind
 * libiosr's back while it is being reclaimed, and do not pin it for DMA.
 * Returns NULL with errno: EINVAL (size 0 or bad alignment), ENOMEM, ENOTCONN
 * (daemon gone), ECHILD (ctx belongs to the parent of a fork), EPROTO.
 * Thread-safe; never calls malloc. */
iosr_region *iosr_region_create(iosr_ctx *ctx, size_t bytes);
iosr_region *iosr_region_create_aligned(iosr_ctx *ctx, size_t bytes, size_t align);

void *iosr_region_base(const iosr_region *r);
size_t iosr_region_size(const iosr_region *r);

/* Releases [off, off+len) (4 KiB aligned, inside the region): the pages read
 * as zero afterwards and their swap slots are freed. Equivalent to
 * madvise(MADV_DONTNEED), which may be used directly. 0 or -1/EINVAL.
 * Thread-safe. */
int iosr_region_discard(iosr_region *r, size_t off, size_t len);

/* What the kernel does not tell IOSR, and what an app gets (design note
 * sections 3 and 9):
 * - mlock/mlockall of region pages: a locked page is never swapped out. A
 *   reclaim leaves the pages it finds locked when it starts; a page locked
 *   while it is being swapped out stays (or becomes again) resident, its
 *   bytes as they were. After munlock it may be swapped out again (also a
 *   region created under mlockall(MCL_FUTURE), populated at once). The same
 *   holds for pages that cannot be read (PROT_NONE): they stay resident.
 * - MADV_WIPEONFORK and MADV_DONTFORK: read from /proc at each fork; a child
 *   gets zeros (or no mapping) there, as the kernel gives it.
 * - MADV_FREE: the pages read as zero or as their old bytes, never other
 *   bytes, whether or not the kernel reclaimed them.
 * - Every other change an app makes (discard, munmap, mremap, fork) reaches
 *   IOSR as a userfaultfd event; libiosr keeps an internal PROT_NONE area of
 *   6 MiB (the dropper's marks) and a read-write one of 4 MiB after it (the
 *   graveyard, where written pages are moved out of the region) that the app
 *   must leave alone (an mlockall after connecting fills the graveyard until
 *   the next reclaim empties it).
 * - A page the kernel will not move out of the region (one shared with a fork
 *   child, or shared once and not written since; a locked or read-only part)
 *   is discarded by address instead: a page the app mremaps to such an
 *   address at that very moment is lost, and gives SIGBUS, never zero. */

/* Unmaps the region and frees its slots. 0 or -1. Thread-safe for distinct
 * regions. */
int iosr_region_destroy(iosr_region *r);

/* ---- Statistics (design note section 14) ---- */

typedef struct iosr_app_stats {
  char name[IOSR_NAME_MAX];
  int32_t pid;
  uint32_t id;
  int32_t foreground;
  int32_t forked;               /* a forked child served from its parent's slots */
  uint64_t resident_pages, swapped_pages;
  uint64_t faults, zero_faults, major_faults, probe_faults, wp_faults;
  uint64_t ra_pages, ra_hits, ra_misses; /* read-ahead pages and probe-weighted hits/misses */
  uint32_t ra_window;           /* current read-ahead window, pages */
  uint64_t read_reqs, read_bytes, write_reqs, write_bytes;
  uint64_t read_hist[IOSR_SIZE_BUCKETS], write_hist[IOSR_SIZE_BUCKETS];
  uint64_t swapin_bytes, swapin_busy_ns; /* bandwidth = bytes / busy time */
  uint64_t swapout_pages, zero_pages;    /* swapped out (written, or clean); dropped as all-zero */
  uint64_t lat_hist[IOSR_LAT_BUCKETS];   /* major-fault service latency */
  uint64_t lat_p50_ns, lat_p90_ns, lat_p99_ns, lat_max_ns;
  uint64_t read_errors, write_errors;
  uint64_t checksum_errors;     /* pages whose slot failed its checksum (each gave SIGBUS) */
  uint64_t clean_pages;         /* resident, read back and not written since: each holds its slot */
  uint64_t clean_drops;         /* swapped out with no write: clean pages, whose slots held them */
  uint64_t ra_read_pages;       /* pages read by windows the app's faults started */
  uint64_t ra_needed_pages;     /* of what those read: faulting pages + probe-weighted read-ahead hits */
} iosr_app_stats;

/* Statistics of the calling app. 0 or -1. Thread-safe. */
int iosr_stats(iosr_ctx *ctx, iosr_app_stats *out);

/* ---- Control (as the `iosr` command) ---- */

/* Opens a control connection to the daemon (socket_path NULL: IOSR_SOCKET or
 * the default) or to an in-process engine. NULL with errno as iosr_connect.
 * A control connection is used by one thread at a time. */
iosr_ctl *iosr_ctl_open(const char *socket_path);
iosr_ctl *iosr_ctl_open_engine(iosr_engine *engine);
/* Closes ctl; errno is kept, so a failed call's errno survives it. */
void iosr_ctl_close(iosr_ctl *ctl);

/* Apps are named by name, by "#PID", or by "#id:N". */

/* Makes app the foreground app (NULL or "": none). 0 or -1/ESRCH. */
int iosr_ctl_foreground(iosr_ctl *ctl, const char *app);

/* Swaps out up to `bytes` of app's least recently used pages (0: all) and
 * waits until they are written and dropped. app "--background" reclaims all
 * background apps together, oldest pages first. *reclaimed (if not NULL)
 * gets the bytes swapped out. 0, or -1 with errno: ESRCH (no such app),
 * ENOSPC (swap area full: the rest stays resident), EIO (write errors: those
 * pages stay resident), EAGAIN (right after a dirty restart, before the
 * grace period ends). */
int iosr_ctl_reclaim(iosr_ctl *ctl, const char *app, uint64_t bytes, uint64_t *reclaimed);

/* Changes an option at run time (keys as IOSR_* without prefix, lower case;
 * slot, readahead, sched, budget, ... see the README). 0 or -1/EINVAL: a key
 * of 32 bytes or more or a value of 96 or more is refused without a request.
 * A failure of the request logs one line: the engine's reason, or errno's
 * text when no reply came (then errno as the connection's failure). */
int iosr_ctl_set(iosr_ctl *ctl, const char *key, const char *value);

/* All statistics as JSON (the format of `iosr stat --json`), malloc'd; the
 * caller frees it. NULL with errno. */
char *iosr_ctl_stat_json(iosr_ctl *ctl);

/* One app's statistics. 0 or -1/ESRCH. */
int iosr_ctl_app_stats(iosr_ctl *ctl, const char *app, iosr_app_stats *out);

/* The slot map of app: for each page that holds a swap slot, its address and
 * slot, in address order. *out is malloc'd (caller frees). 0 or -1. */
typedef struct iosr_slot_entry {
  uint64_t addr;
  uint64_t slot;
} iosr_slot_entry;
int iosr_ctl_slot_map(iosr_ctl *ctl, const char *app, iosr_slot_entry **out, size_t *n);

/* Waits until no reclaim, read or write is queued or in flight. 0 or -1. */
int iosr_ctl_wait_idle(iosr_ctl *ctl);

/* Test hooks (only when the engine runs with test_hooks=1, else EPERM):
 * IOSR_TEST_FAIL_READS / IOSR_TEST_FAIL_WRITES: the next `arg` reads/writes
 * complete with EIO; IOSR_TEST_PAUSE: arg=1 holds every request in the
 * scheduler queues, arg=0 releases them; IOSR_TEST_HOLD_RETRIES: arg=1 makes
 * the un-protect of a page kept resident wait as after EAGAIN and holds every
 * such retry, arg=0 lets them run; IOSR_TEST_HOLD_EVENTS: arg=1 stops the
 * engine reading the apps' userfaultfds (a thread whose madvise, mremap or
 * fault makes an event waits for it to be read), arg=0 reads them again;
 * IOSR_TEST_DROPPER_MOVES: arg=1 has the apps' droppers move written pages
 * out, as under iosrd, even where the engine could move them itself (the
 * in-process engine), arg=0 lets the engine move them again;
 * IOSR_TEST_DISPATCH_LOG: fills *out (up to *n entries) with the dispatch
 * order since the last call. */
enum {
  IOSR_TEST_FAIL_READS = 1,
  IOSR_TEST_FAIL_WRITES = 2,
  IOSR_TEST_PAUSE = 3,
  IOSR_TEST_HOLD_RETRIES = 4,
  IOSR_TEST_HOLD_EVENTS = 5,
  IOSR_TEST_DROPPER_MOVES = 6
};
int iosr_ctl_test(iosr_ctl *ctl, int op, uint64_t arg);

typedef struct iosr_dispatch_rec {
  uint64_t seq;    /* dispatch order */
  uint32_t cls;    /* 0 foreground fault, 1 background fault, 2 read-ahead, 3 write */
  uint32_t app;    /* app id */
  uint64_t slot;   /* first slot */
  uint32_t npages;
  uint32_t write;  /* 1 for a write */
} iosr_dispatch_rec;
int iosr_ctl_dispatch_log(iosr_ctl *ctl, iosr_dispatch_rec *out, size_t *n);

#ifdef __cplusplus
}
#endif
#endif
