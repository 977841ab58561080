/* IOSR options: every tunable of the engine, read from IOSR_* environment
 * variables and from "key=value,key=value" strings (the same keys in lower
 * case without the prefix; iosrd's command-line flags and `iosr set` use them
 * too). One table in opts.c gives each its type, range, default and whether
 * it may change at run time; the README and docs/usage/iosr.md list them
 * all, and the test iosr.options_documented checks both lists against it.
 *
 * Sizes accept a K/M/G/T suffix (powers of 1024; either case, an optional
 * trailing B: 64k, 1GB). Not thread-safe: an
 * iosr_settings belongs to the engine thread once the engine runs.
 */
#ifndef IOSR_COMMON_OPTS_H
#define IOSR_COMMON_OPTS_H

#include <stddef.h>
#include <stdint.h>

enum iosr_slot_policy { IOSR_SLOT_GLOBAL = 0, IOSR_SLOT_PROCESS = 1 };
enum iosr_ra_policy { IOSR_RA_CLUSTER = 0, IOSR_RA_VMA = 1, IOSR_RA_ADAPTIVE = 2 };
enum iosr_sched_policy { IOSR_SCHED_FIFO = 0, IOSR_SCHED_SIOS = 1 };
enum iosr_io_backend { IOSR_IO_URING = 0, IOSR_IO_SYNC = 1 };

typedef struct iosr_settings {
  int slot;              /* slot=global|process (default process) */
  int readahead;         /* readahead=cluster|vma|adaptive (default adaptive) */
  int sched;             /* sched=fifo|sios (default sios) */
  uint32_t page_cluster; /* cluster/vma window = 2^page_cluster pages (3) */
  uint32_t ra_init;      /* adaptive: first window, pages (16) */
  uint32_t ra_max;       /* adaptive: largest window, pages (1024) */
  uint32_t ra_probe_stride; /* one probe page per this many read-ahead pages (16) */
  uint32_t ra_probes;    /* at most this many probe pages per read-ahead window (8) */
  uint32_t ra_probes_full; /* adaptive: at most this many once the window is at ra_max (2) */
  uint32_t ra_probe_horizon; /* a probe untouched after this many more major faults is a miss (64) */
  uint32_t ra_grow_pct;  /* adaptive: a window at least this % of whose probes were used doubles (75) */
  uint32_t ra_shrink_pct;/* adaptive: a window under this % of whose probes were used halves (50) */
  uint64_t ra_zone;      /* read-ahead state per zone of this many bytes of a region (0: per region, the default) */
  uint64_t max_io;       /* largest read or write request, bytes (1M) */
  uint32_t queue_depth;  /* requests in flight at the device (32) */
  uint32_t write_hold_max; /* sios: read dispatches a waiting write may be passed by (32) */
  uint32_t write_hold_ms;  /* sios: longest a queued write is held back (50) */
  int write_ioprio_idle; /* write_ioprio=be7|idle (be7) */
  uint64_t budget;       /* resident bytes of all regions before reclaim starts; 0 = none */
  uint64_t budget_low;   /* reclaim down to this; 0 = 15/16 of budget */
  uint32_t zero_window;  /* pages mapped per first-touch fault (16) */
  int clean_pages;       /* a page read back keeps its slot until written (0; design note section 3) */
  int moveout;           /* written pages leave the app by UFFDIO_MOVE where the kernel can (1; section 3) */
  uint32_t reclaim_batch;   /* pages per swap-out batch (256) */
  uint32_t reclaim_inflight; /* swap-out batches in flight (8) */
  int io;                /* io=uring|sync */
  int direct;            /* direct=1: O_DIRECT on the swap area */
  uint64_t buffer_bytes; /* I/O buffer arena (32M) */
  uint32_t probe_cache;  /* probe pages kept at most (4096) */
  uint32_t restart_grace_ms; /* after a dirty start, no new slots for this long (5000) */
  int test_hooks;        /* test_hooks=1: fault injection, dispatch pause/log */
  uint32_t hello_timeout_ms; /* a connection that says no hello for this long is closed (5000) */
  uint32_t conns_per_uid;  /* connections one uid may hold at once (4096) */
  uint32_t trim_wait_ms;   /* a reclaim waits this long for its apps' trims (2000; engine/trim.c) */
  uint32_t drop_stall_ms;  /* a batch waiting this long for its app's drops is set aside (2000; design note section 9) */
  int32_t nice;          /* CPU nice value of the engine thread (-10): faults wait on it */
  uint32_t rt_prio;      /* SCHED_FIFO priority of the engine thread (default 0: ordinary scheduling with `nice`; iosr-eval.md) */
} iosr_settings;

/* Fills *s with the defaults, then applies IOSR_* environment variables.
 * Returns 0, or -1 with errno=EINVAL and a message in err (cap bytes) naming
 * the bad variable. */
int iosr_settings_init(iosr_settings *s, char *err, size_t cap);

/* Applies one key=value (key without prefix, lower case). 0 or -1/EINVAL
 * with a message in err. */
int iosr_settings_set(iosr_settings *s, const char *key, const char *value, char *err, size_t cap);

/* Applies a comma-separated list of key=value. 0 or -1/EINVAL. */
int iosr_settings_parse(iosr_settings *s, const char *list, char *err, size_t cap);

/* The i-th option's key (lower case, without the IOSR_ prefix), or NULL for
 * i past the last: the names IOSR_* variables may take (common/env.c). */
const char *iosr_settings_key(size_t i);

/* The i-th option's default as the README writes it ("process", "16",
 * "1M": a size in the largest of G, M, K that divides it), in buf (cap
 * bytes; 32 hold any) or a constant string; NULL for i past the last. */
const char *iosr_settings_default(size_t i, char *buf, size_t cap);

/* 1 when `iosr set` may change option key while the engine runs, 0 when it
 * is read only when the engine starts, -1 when there is no such option: the
 * engine's reply to `iosr set` names which (engine/conn.c). */
int iosr_settings_runtime(const char *key);

/* Names of the enumerated values, for statistics. */
const char *iosr_slot_name(int v);
const char *iosr_ra_name(int v);
const char *iosr_sched_name(int v);

/* Parses "123", "64K", "16M", "2G", "1T" (suffix in either case, an
 * optional B after it) into bytes. It must start with a digit: no blanks,
 * no sign. 0 or -1/EINVAL. */
int iosr_parse_size(const char *s, uint64_t *out);

/* Reads an environment variable IOSR_<NAME>; NULL if unset or empty. */
const char *iosr_env(const char *name);

#endif
