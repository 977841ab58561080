/* jwmalloc: a malloc for mobile workloads (brief: ../shared/brief/jwmalloc.md).
 *
 * Linking libjwmalloc.so or libjwmalloc.a (or LD_PRELOAD of the .so) replaces
 * the process's malloc, free, calloc, realloc, reallocarray, memalign,
 * posix_memalign, aligned_alloc, valloc, pvalloc, malloc_usable_size,
 * malloc_trim, malloc_stats, mallinfo, mallinfo2, malloc_info, mallopt
 * (Android's parameters below; glibc's accepted and ignored), Android's
 * malloc_disable, malloc_enable and malloc_iterate, glibc's
 * __libc_malloc/free/calloc/realloc/memalign/valloc/pvalloc/mallinfo/mallopt
 * and cfree, and every C++ operator new/delete. The jw_-prefixed functions below are the same allocator under
 * its own names; link libjwmalloc_api.a to use them beside the system
 * allocator (memory from jw_* must go back to jw_*).
 *
 * Every function is thread-safe, may be called before main, from any thread,
 * in a forked child, and from signal-free contexts; none blocks on another
 * thread's lock except where docs/design/concurrency.md says so.
 *
 * Sizes are bytes. Alignments are bytes, powers of two. Every block is at
 * least 16-byte aligned. Allocation failure returns NULL with errno=ENOMEM,
 * never aborts. An invalid or double free is reported on stderr and aborts,
 * unless JWMALLOC_ABORT_ON_ERROR=0 (then a warning, and the call is ignored).
 */
#ifndef JWMALLOC_H
#define JWMALLOC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* malloc(3) semantics: a block of at least n bytes, 16-byte aligned; n = 0
 * gives a unique minimal block. NULL, errno=ENOMEM on failure. */
void *jw_malloc(size_t n);
/* free(3): p from any jw_ allocation function, or NULL (no-op). */
void jw_free(void *p);
/* calloc(3): zeroed block of n*size bytes; overflow: NULL, errno=ENOMEM. */
void *jw_calloc(size_t n, size_t size);
/* realloc(3), glibc semantics: p == NULL is malloc(n); n == 0 frees p and
 * returns NULL; the first min(old usable size, n) bytes are kept. On failure
 * NULL with errno=ENOMEM and p untouched. */
void *jw_realloc(void *p, size_t n);
/* reallocarray(3): realloc(p, n*size) with overflow -> NULL, ENOMEM. */
void *jw_reallocarray(void *p, size_t n, size_t size);
/* posix_memalign(3): align a power of two multiple of sizeof(void *), else
 * returns EINVAL; ENOMEM on failure; errno untouched. */
int jw_posix_memalign(void **out, size_t align, size_t n);
/* aligned_alloc(3): align a power of two (0 counts as 1), else NULL with
 * errno=EINVAL (as glibc 2.38 and later). memalign(3): any align, rounded up
 * to a power of two as glibc does; above 2^63, NULL with errno=EINVAL. */
void *jw_aligned_alloc(size_t align, size_t n);
void *jw_memalign(size_t align, size_t n);
/* valloc(3): page-aligned; pvalloc(3): page-aligned, size rounded up to a
 * page (0 -> one page). */
void *jw_valloc(size_t n);
void *jw_pvalloc(size_t n);
/* malloc_usable_size(3): bytes usable at p (>= the size asked); 0 for NULL. */
size_t jw_malloc_usable_size(void *p);
/* malloc_trim(3): gives cached memory of the calling thread and of the
 * midend back to the page source; returns 1 if any was given back, else 0.
 * pad is ignored. */
int jw_malloc_trim(size_t pad);

/* Statistics (docs/design/api.md "Statistics"). Bytes unless named
 * otherwise; a snapshot read without stopping other threads. */
typedef struct jw_stats {
  /* calls served per tier */
  uint64_t small_mallocs, small_frees;   /* frontend, < 2 KiB */
  uint64_t mid_mallocs, mid_frees;       /* midend, 2-16 KiB */
  uint64_t large_mallocs, large_frees;   /* page ranges, 16 KiB-4 MiB */
  uint64_t huge_mallocs, huge_frees;     /* direct mappings, > 4 MiB */
  uint64_t reallocs, reallocs_in_place;
  uint64_t cross_thread_frees;           /* frees of another thread's small block */
  uint64_t pool_hits, pool_misses;       /* slab pages from the thread's pool / the page source */
  uint64_t pool_evictions;               /* pool pages given back (LRU, beyond the watermark) */
  uint64_t abandoned_slabs;              /* slabs left non-empty by exiting threads */
  uint64_t mid_fallbacks;                /* midend requests served as ranges (lock busy) */
  uint64_t threads_started, threads_exited;
  uint64_t invalid_frees;                /* reported bad frees/reallocs (with abort off) */
  /* memory */
  uint64_t mapped_bytes, peak_mapped_bytes;     /* everything jwmalloc has mapped */
  uint64_t resident_bytes, peak_resident_bytes; /* the process: VmRSS, VmHWM */
  uint64_t page_source_live_bytes;       /* granules in live ranges x 4 KiB */
  uint64_t page_source_roots;            /* 4 MiB roots reserved */
  uint64_t huge_bytes;                   /* bytes in live direct mappings */
  uint64_t mmap_calls, munmap_calls, madvise_calls;
  /* the range backend (docs/design/backend.md): 4 MiB roots and their metadata */
  uint64_t backend_root_bytes;           /* roots mapped now (4 MiB each) */
  uint64_t backend_metadata_bytes;       /* per-granule records of mapped roots + root map leaves, now */
  uint64_t backend_peak_metadata_bytes;
  uint64_t backend_cached_bytes;         /* free ranges still backed by memory */
  uint64_t backend_released_bytes;       /* free ranges whose pages went back (madvise), still mapped */
  uint64_t backend_free_root_bytes;      /* entirely free roots kept mapped (in the lists and the root reserve, aging; JWMALLOC_RETAIN_ROOTS with reclamation off) */
  uint64_t backend_allocs, backend_frees;/* ranges handed out / taken back (slabs and 16 KiB-4 MiB blocks) */
  uint64_t backend_splits, backend_merges; /* range subdivisions and coalescings */
  /* lifetime-based reclamation (docs/design/reclamation.md) */
  uint64_t reclaim_cycles;               /* reclaim cycles completed */
  uint64_t reclaim_released_bytes;       /* bytes given back to the OS by reclamation (madvise, whole roots) */
  uint64_t merges_before_release;        /* backend merges of memory none of which had been given back */
  uint64_t merges_after_release;         /* merges joining memory already given back (work done twice) */
  uint64_t refaulted_allocs;             /* ranges handed out again after their pages were given back */
  uint64_t pool_pages_aged;              /* idle page-pool pages given back by the reclaimer */
  uint64_t mid_slabs_aged;               /* idle midend slabs given back by the reclaimer */
  uint64_t huge_kept_bytes;              /* freed direct mappings kept for reuse (JWMALLOC_HUGE_CACHE_MB) */
  uint64_t huge_reuses;                  /* direct mappings served from the kept ones */
  /* the backend's non-blocking paths (docs/design/backend.md, section 7a) */
  uint64_t backend_roots_mapped;         /* 4 MiB roots mapped since start (with or without the lock) */
  uint64_t backend_fast_allocs;          /* ranges taken from a per-class bitmap, no lock */
  uint64_t backend_lf_splits;            /* lock busy: a larger bitmap range subdivided without it */
  uint64_t backend_lf_recycled;          /* lock busy, bitmaps empty: a deferred free reused without it */
  uint64_t backend_lf_roots;             /* lock busy, nothing to reuse: a root mapped without the lock */
  uint64_t backend_roots_reused;         /* allocations that took an emptied root from the root reserve
                                            instead of mapping one (backend.md section 7c) */
  uint64_t placement_on, placement_contended; /* JWMALLOC_PLACEMENT=auto: switches on by the trough
                                            detector; reclaim cycles its contention guard held it off
                                            (reclamation.md section 6a) */
  uint64_t placement_stalled;            /* switches off by the stall bound: no root came back for 16
                                            reclaim cycles of a trough (reclamation.md section 6a) */
  uint64_t backend_ahead_bytes;          /* roots mapped ahead, held ready now (address space, untouched;
                                            in backend_released_bytes too; backend.md 7a) */
  uint64_t backend_ahead_taken;          /* of backend_lf_roots, those taken mapped ahead (no mmap) */
  uint64_t adopted_slabs;                /* abandoned slabs taken over by a live thread freeing into them
                                            (docs/design/frontend.md, "Thread exit") */
  uint64_t reclaim_sync_releases;        /* releases past the watermark by a freeing thread (reclamation.md
                                            section 4) */
  uint64_t reclaim_grace_releases;       /* releases past the watermark by the reclaim thread at the end of
                                            a grace (section 4, "The grace") */
  uint64_t reclaim_grace_reused;         /* graces that ended with the excess taken back by allocations:
                                            nothing released */
} jw_stats;

/* Fills *out with the first `size` bytes of the statistics (size: the
 * caller's sizeof(jw_stats); a caller built against an older, shorter
 * jw_stats still works, down to the fields up to madvise_calls); returns 0,
 * or -1 with errno=EINVAL for a NULL out or a smaller size. */
int jw_stats_get(jw_stats *out, size_t size);
/* Prints the statistics, human-readable, on fd (no stdio, no allocation). */
void jw_stats_print(int fd);

/* Options (README "Options"; `jwmalloc options` lists them; design:
 * docs/design/architecture.md, "Options"): the value in force of a
 * JWMALLOC_* option by its name without the prefix ("STATS",
 * "POOL_PERCENT", ...): the run-time ones and LOW_MEMORY, PAGE_SIZE (bytes).
 * Words read back as numbers (PLACEMENT auto: 2; RECLAIM_POLICY lifetime: 0,
 * fixed-delay: 1). Any thread. Returns 0 and sets *value, or -1 with
 * errno=EINVAL for a name it does not reach or a NULL value. */
int jw_option_get(const char *name, long *value);
/* Changes a run-time option: STATS, ABORT_ON_ERROR, POOL_PERCENT, POOL_MIN,
 * HUGE_CACHE_MB, PLACEMENT (0, 1, 2 auto), BIN, LOCK_YIELD,
 * and reclamation's: RECLAIM 0/1, RECLAIM_INTERVAL_MS 1..600000,
 * RECLAIM_WATERMARK and RECLAIM_WATERMARK_MAX bytes, RECLAIM_GRACE_MS
 * 0..600000, RECLAIM_POLICY 0 lifetime / 1 fixed-delay, RECLAIM_THREAD 0/1;
 * the others' ranges are the table's. Any thread; others see the new value
 * at their next read. Returns 0, or -1 with errno=EINVAL (a name it does not
 * reach, a value out of range). */
int jw_option_set(const char *name, long value);

/* Android's extensions (bionic's docs/native_allocator.md; docs/design/api.md,
 * "Android's extensions"). */

/* mallopt parameters, with bionic's values. */
#ifndef M_DECAY_TIME
#define M_DECAY_TIME (-100) /* value 1: delayed release (default); 0: release at free; -1: never */
#endif
#ifndef M_PURGE
#define M_PURGE (-101) /* release unused memory now: the caller's caches, shared caches, free ranges */
#endif
#ifndef M_PURGE_ALL
#define M_PURGE_ALL (-104) /* as M_PURGE, and every other thread's pool and block cache */
#endif

/* Pauses every thread that enters an allocation call (malloc, free, calloc,
 * realloc, memalign and the other aligned forms, malloc_usable_size,
 * malloc_trim, mallopt, C++ new and delete; the caller's own calls too) at
 * the start of the call until jw_malloc_enable; calls already past that
 * start complete. Returns when the heap is quiet: no tier lock held, no
 * release batch or lock-free backend operation in flight, so that
 * jw_malloc_iterate sees a consistent heap. Waits for another disable to be
 * enabled, and for a fork in progress. The reclaim thread waits too. fork()
 * while disabled waits for jw_malloc_enable (from another thread). Not
 * nestable: a second disable from the same thread before the enable never
 * returns. */
void jw_malloc_disable(void);
/* Ends the disable (from any thread): paused calls continue. Does nothing
 * when malloc is not disabled. */
void jw_malloc_enable(void);
/* Calls callback(start, usable size, arg) once for every live block whose
 * start lies in [base, base + size): frontend and midend slab blocks, ranges,
 * direct mappings. Blocks cached by a thread or a tier for reuse are free
 * and not reported. Meant to run between jw_malloc_disable and
 * jw_malloc_enable (libmemunreachable's use); called without them, it
 * disables and enables around itself. The callback must not allocate (the
 * call would pause for ever). Returns 0, or -1 with errno=EINVAL for a NULL
 * callback. */
int jw_malloc_iterate(uintptr_t base, size_t size, void (*callback)(uintptr_t base, size_t size, void *arg),
                      void *arg);
/* mallopt(3): M_DECAY_TIME 1, 0 or -1 (any value > 1 counts as 1), M_PURGE,
 * M_PURGE_ALL (value ignored) return 1; an M_DECAY_TIME below -1 returns 0.
 * glibc's parameters are accepted and ignored (1). */
int jw_mallopt(int param, int value);
/* Threads now paused by jw_malloc_disable (a snapshot): the application's
 * threads, never the library's own reclaim thread. Thread-safe. */
unsigned jw_malloc_paused(void);

/* The same under Android's names, in the drop-in libraries (libjwmalloc.so,
 * libjwmalloc.a; mallopt is there too). */
void malloc_disable(void);
void malloc_enable(void);
int malloc_iterate(uintptr_t base, size_t size, void (*callback)(uintptr_t base, size_t size, void *arg), void *arg);

#ifdef __cplusplus
}
#endif

#endif
