/* See stats.h. */
#include "stats.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../backend/backend.h"
#include "../common/config.h"
#include "../common/log.h"
#include "huge_cache.h"
#include "../common/options.h"
#include "../midend/midend.h"
#include "../os/os_mem.h"
#include "../reclaim/reclaim.h"
#include "counters.h"
#include "runtime.h"
#include "stats_fields.h"

static void collect(jw_stats *s) {
  memset(s, 0, sizeof *s);
  jw_tls *t = &jw_tls_state;
  if (t->state == JW_TLS_ACTIVE) jw_tc_fold(t, t->tc);
  jw_uncached_frees_flush(t); /* the caller's own frees without a cache, counted so far */
  jw_tc_totals tc;
  jw_tc_totals_get(&tc);
  jw_mid_totals mid;
  jw_mid_totals_get(&mid);
  jw_api_counter_set *a = &jw_api_counters;
  uint64_t no_cache = jw_counter_get(&a->small_frees_no_cache);
  s->small_mallocs = tc.mallocs;
  s->small_frees = tc.frees + tc.remote_frees + no_cache;
  /* The thread caches count the calls their block caches served; the tiers
   * below count the rest (a cached block given back later is not counted
   * again). */
  s->mid_mallocs = mid.mallocs + tc.mid_mallocs;
  s->mid_frees = mid.frees + tc.mid_frees;
  s->large_mallocs = jw_counter_get(&a->large_mallocs) + tc.large_mallocs;
  s->large_frees = jw_counter_get(&a->large_frees) + tc.large_frees;
  s->huge_mallocs = jw_counter_get(&a->huge_mallocs);
  s->huge_frees = jw_counter_get(&a->huge_frees);
  s->reallocs = jw_counter_get(&a->reallocs);
  s->reallocs_in_place = jw_counter_get(&a->reallocs_in_place);
  s->cross_thread_frees = tc.remote_frees + no_cache;
  s->pool_hits = tc.pool_hits;
  s->pool_misses = tc.pool_misses;
  s->pool_evictions = tc.pool_evictions;
  s->abandoned_slabs = tc.abandoned;
  s->adopted_slabs = tc.adopted;
  s->mid_fallbacks = mid.fallbacks;
  s->threads_started = jw_counter_get(&a->threads_started);
  s->threads_exited = jw_counter_get(&a->threads_exited);
  s->invalid_frees = jw_counter_get(&a->invalid);
  jw_os_counts os;
  jw_os_get_counts(&os);
  s->mapped_bytes = os.mapped_bytes;
  s->peak_mapped_bytes = os.peak_mapped_bytes;
  s->mmap_calls = os.mmap_calls;
  s->munmap_calls = os.munmap_calls;
  s->madvise_calls = os.madvise_calls;
  s->resident_bytes = jw_os_resident_bytes();
  s->peak_resident_bytes = jw_os_peak_resident_bytes();
  jw_backend_stats bs;
  jw_backend_get_stats(&bs);
  s->page_source_live_bytes = bs.pages.live_bytes;
  s->page_source_roots = bs.pages.roots;
  s->huge_bytes = jw_counter_get(&a->huge_bytes);
  s->huge_kept_bytes = jw_huge_cache_bytes();
  s->huge_reuses = jw_huge_cache_reuses();
  s->backend_root_bytes = bs.pages.mapped_bytes;
  s->backend_metadata_bytes = bs.pages.metadata_bytes;
  s->backend_peak_metadata_bytes = bs.pages.peak_metadata_bytes;
  s->backend_cached_bytes = bs.pages.cached_bytes;
  s->backend_released_bytes = bs.released_bytes;
  s->backend_free_root_bytes = bs.free_roots * JW_ROOT;
  s->backend_allocs = bs.allocs;
  s->backend_frees = bs.frees;
  s->backend_splits = bs.pages.splits;
  s->backend_merges = bs.pages.merges;
  s->backend_roots_mapped = bs.roots_mapped_total;
  s->backend_fast_allocs = bs.fast_allocs;
  s->backend_lf_splits = bs.lf_splits;
  s->backend_lf_recycled = bs.lf_recycled;
  s->backend_lf_roots = bs.lf_roots;
  s->backend_roots_reused = bs.roots_reused;
  s->backend_ahead_bytes = bs.ahead_bytes;
  s->backend_ahead_taken = bs.ahead_taken;
  jw_reclaim_stats rs;
  jw_reclaim_get_stats(&rs);
  s->reclaim_cycles = rs.cycles;
  s->reclaim_released_bytes = rs.bytes_released;
  s->reclaim_sync_releases = rs.sync_releases;
  s->reclaim_grace_releases = rs.grace_releases;
  s->reclaim_grace_reused = rs.grace_reused;
  s->merges_after_release = rs.merges_after_release;
  s->merges_before_release = rs.merges - (rs.merges_after_release < rs.merges ? rs.merges_after_release : rs.merges);
  s->refaulted_allocs = rs.allocs_refault;
  s->placement_on = rs.placement_on;
  s->placement_contended = rs.placement_contended;
  s->placement_stalled = rs.placement_stalled;
  s->pool_pages_aged = tc.pool_aged;
  s->mid_slabs_aged = mid.slabs_aged;
}

/* The smallest jw_stats a caller may pass: the fields up to madvise_calls
 * (the first published layout). */
#define STATS_V1_SIZE (offsetof(jw_stats, madvise_calls) + sizeof(uint64_t))

JW_EXPORT int jw_stats_get(jw_stats *out, size_t size) {
  if (out == NULL || size < STATS_V1_SIZE) {
    errno = EINVAL;
    return -1;
  }
  jw_stats s;
  collect(&s);
  memcpy(out, &s, size < sizeof s ? size : sizeof s);
  return 0;
}

/* Field names for the machine-readable line, in jw_stats order. */
#define F(x, how) {#x, offsetof(jw_stats, x)},
static const struct {
  const char *name;
  size_t off;
} fields[] = {JW_STATS_FIELDS(F)};
#undef F

static uint64_t field(const jw_stats *s, size_t i) { return *(const uint64_t *)((const char *)s + fields[i].off); }

static uint64_t pct(uint64_t part, uint64_t whole) { return whole ? part * 100 / whole : 0; }

JW_EXPORT void jw_stats_print(int fd) {
  jw_stats s;
  collect(&s);
  jw_dprintf(fd, "jwmalloc statistics (pid %d)\n", (int)getpid());
  jw_dprintf(fd, "  %-22s %14s %14s\n", "tier", "mallocs", "frees");
  jw_dprintf(fd, "  %-22s %14llu %14llu\n", "frontend (< 2 KiB)", (unsigned long long)s.small_mallocs,
             (unsigned long long)s.small_frees);
  jw_dprintf(fd, "  %-22s %14llu %14llu\n", "midend (2-16 KiB)", (unsigned long long)s.mid_mallocs,
             (unsigned long long)s.mid_frees);
  jw_dprintf(fd, "  %-22s %14llu %14llu\n", "ranges (16 KiB-4 MiB)", (unsigned long long)s.large_mallocs,
             (unsigned long long)s.large_frees);
  jw_dprintf(fd, "  %-22s %14llu %14llu\n", "direct mmap (> 4 MiB)", (unsigned long long)s.huge_mallocs,
             (unsigned long long)s.huge_frees);
  jw_dprintf(fd, "  reallocs %llu (%llu in place); cross-thread frees %llu (%llu%% of frontend frees)\n",
             (unsigned long long)s.reallocs, (unsigned long long)s.reallocs_in_place,
             (unsigned long long)s.cross_thread_frees, (unsigned long long)pct(s.cross_thread_frees, s.small_frees));
  jw_dprintf(fd, "  page pool: %llu hits, %llu misses (%llu%% hits), %llu pages given back\n",
             (unsigned long long)s.pool_hits, (unsigned long long)s.pool_misses,
             (unsigned long long)pct(s.pool_hits, s.pool_hits + s.pool_misses), (unsigned long long)s.pool_evictions);
  jw_dprintf(fd, "  mapped: %llu KiB now, %llu KiB peak; process resident: %llu KiB now, %llu KiB peak\n",
             (unsigned long long)(s.mapped_bytes >> 10), (unsigned long long)(s.peak_mapped_bytes >> 10),
             (unsigned long long)(s.resident_bytes >> 10), (unsigned long long)(s.peak_resident_bytes >> 10));
  jw_dprintf(fd, "  page source (backend): %llu roots, %llu KiB in live ranges; direct: %llu KiB, %llu KiB kept "
             "for reuse (%llu reused)\n",
             (unsigned long long)s.page_source_roots, (unsigned long long)(s.page_source_live_bytes >> 10),
             (unsigned long long)(s.huge_bytes >> 10), (unsigned long long)(s.huge_kept_bytes >> 10),
             (unsigned long long)s.huge_reuses);
  jw_dprintf(fd, "  backend: %llu KiB of roots (%llu KiB free roots kept), metadata %llu KiB now, %llu KiB peak; "
             "free ranges %llu KiB backed, %llu KiB released\n",
             (unsigned long long)(s.backend_root_bytes >> 10), (unsigned long long)(s.backend_free_root_bytes >> 10),
             (unsigned long long)(s.backend_metadata_bytes >> 10),
             (unsigned long long)(s.backend_peak_metadata_bytes >> 10),
             (unsigned long long)(s.backend_cached_bytes >> 10), (unsigned long long)(s.backend_released_bytes >> 10));
  jw_dprintf(fd, "  backend operations: %llu allocs, %llu frees, %llu splits, %llu merges\n",
             (unsigned long long)s.backend_allocs, (unsigned long long)s.backend_frees,
             (unsigned long long)s.backend_splits, (unsigned long long)s.backend_merges);
  jw_dprintf(fd, "  backend roots mapped: %llu, %llu emptied roots reused from the reserve; lock-free paths: %llu bitmap allocs, %llu splits and %llu "
             "deferred frees reused with the lock busy, %llu roots mapped without it (%llu of them mapped ahead, "
             "%llu KiB held ahead now)\n",
             (unsigned long long)s.backend_roots_mapped, (unsigned long long)s.backend_roots_reused,
             (unsigned long long)s.backend_fast_allocs,
             (unsigned long long)s.backend_lf_splits, (unsigned long long)s.backend_lf_recycled,
             (unsigned long long)s.backend_lf_roots, (unsigned long long)s.backend_ahead_taken,
             (unsigned long long)(s.backend_ahead_bytes >> 10));
  jw_dprintf(fd, "  threads: %llu started, %llu exited; %llu abandoned slabs (%llu adopted); %llu midend fallbacks; %llu bad frees\n",
             (unsigned long long)s.threads_started, (unsigned long long)s.threads_exited,
             (unsigned long long)s.abandoned_slabs, (unsigned long long)s.adopted_slabs, (unsigned long long)s.mid_fallbacks,
             (unsigned long long)s.invalid_frees);
  if (s.placement_on || s.placement_contended)
    jw_dprintf(fd,
               "  placement: switched on %llu times by the trough detector; %llu cycles held off (contention); "
               "%llu switched off with no root coming back (stall)\n",
               (unsigned long long)s.placement_on, (unsigned long long)s.placement_contended,
               (unsigned long long)s.placement_stalled);
  jw_dprintf(fd, "  system calls: %llu mmap, %llu munmap, %llu madvise\n", (unsigned long long)s.mmap_calls,
             (unsigned long long)s.munmap_calls, (unsigned long long)s.madvise_calls);
  jw_dprintf(fd, "  reclamation: %llu cycles, %llu KiB given back; merges %llu before release, %llu after; "
             "%llu refaulted ranges; aged out of the tiers: %llu pool pages, %llu midend slabs\n",
             (unsigned long long)s.reclaim_cycles, (unsigned long long)(s.reclaim_released_bytes >> 10),
             (unsigned long long)s.merges_before_release, (unsigned long long)s.merges_after_release,
             (unsigned long long)s.refaulted_allocs, (unsigned long long)s.pool_pages_aged,
             (unsigned long long)s.mid_slabs_aged);
  jw_dprintf(fd, "  past the watermark: %llu releases by freeing threads, %llu at the end of a grace, %llu graces "
             "taken back by allocations\n",
             (unsigned long long)s.reclaim_sync_releases, (unsigned long long)s.reclaim_grace_releases,
             (unsigned long long)s.reclaim_grace_reused);
}

/* A copy of stderr taken at start-up for the exit report: many programs
 * close stderr before exit (GNU tools' close_stdout closes both streams),
 * and the report would be lost. Taken with JWMALLOC_STATS_FILE too: a file
 * that cannot be opened at exit sends the report to stderr. -1 when not
 * taken. Written once by global initialization, before the release that
 * publishes it; read at exit. */
static int saved_stderr = -1;
static dev_t saved_dev;
static ino_t saved_ino;

void jw_stats_at_start(void) {
  if (!jw_opt(JW_OPT_STATS)) return;
  /* Close-on-exec, at a high number: invisible to programs that expect
   * their next open() to get the lowest free descriptor. */
  int fd = fcntl(2, F_DUPFD_CLOEXEC, 100);
  struct stat st;
  if (fd < 0) return;
  if (fstat(fd, &st) != 0) {
    close(fd);
    return;
  }
  saved_dev = st.st_dev;
  saved_ino = st.st_ino;
  saved_stderr = fd;
}

/* Where the report goes: stderr while it is open; else the copy, if it
 * still is the file stderr was (the program may have closed it and reused
 * its number for a file of its own: that file is never written). */
static int report_fd(void) {
  if (fcntl(2, F_GETFD) >= 0 || saved_stderr < 0) return 2;
  struct stat st;
  if (fstat(saved_stderr, &st) == 0 && st.st_dev == saved_dev && st.st_ino == saved_ino) return saved_stderr;
  return 2;
}

void jw_stats_emit_at_exit(void) {
  const char *path = jw_opt_str(JW_OPT_STATS_FILE);
  if (path == NULL) {
    jw_stats_print(report_fd());
    return;
  }
  int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) {
    /* Nothing lost: the statistics go where they go without the file. */
    int err = errno, out = report_fd();
    jw_dprintf(out, "jwmalloc: JWMALLOC_STATS_FILE=%s: cannot open (errno %d); statistics on stderr\n", path, err);
    jw_stats_print(out);
    return;
  }
  jw_stats s;
  collect(&s);
  char exe[256];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  exe[n > 0 ? n : 0] = 0;
  char line[2048];
  size_t len = jw_format(line, sizeof line, "jwmalloc-stats v1 pid=%d", (int)getpid());
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
    len += jw_format(line + len, sizeof line - len, " %s=%llu", fields[i].name, (unsigned long long)field(&s, i));
  len += jw_format(line + len, sizeof line - len, " exe=%s\n", exe);
  /* One write with O_APPEND: lines of concurrent processes do not mix. */
  if (write(fd, line, len) < 0) jw_stats_print(report_fd());
  close(fd);
}
