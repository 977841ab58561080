/* Every jw_stats field, in order: the one list shared by the exit-time
 * stats line (api/stats.c) and its reader (tools/jwmalloc.c). X(name, how):
 * how is SUM for counters and MAX for peaks when processes are combined. */
#ifndef JW_API_STATS_FIELDS_H
#define JW_API_STATS_FIELDS_H

#define JW_STATS_FIELDS(X)                                                                              \
  X(small_mallocs, SUM) X(small_frees, SUM) X(mid_mallocs, SUM) X(mid_frees, SUM)                        \
  X(large_mallocs, SUM) X(large_frees, SUM) X(huge_mallocs, SUM) X(huge_frees, SUM) X(reallocs, SUM)     \
  X(reallocs_in_place, SUM) X(cross_thread_frees, SUM) X(pool_hits, SUM) X(pool_misses, SUM)             \
  X(pool_evictions, SUM) X(abandoned_slabs, SUM) X(mid_fallbacks, SUM) X(threads_started, SUM)           \
  X(threads_exited, SUM) X(invalid_frees, SUM) X(mapped_bytes, SUM) X(peak_mapped_bytes, MAX)           \
  X(resident_bytes, SUM) X(peak_resident_bytes, MAX) X(page_source_live_bytes, SUM)                      \
  X(page_source_roots, SUM) X(huge_bytes, SUM) X(mmap_calls, SUM) X(munmap_calls, SUM)                   \
  X(madvise_calls, SUM) X(backend_root_bytes, SUM) X(backend_metadata_bytes, SUM)                       \
  X(backend_peak_metadata_bytes, MAX) X(backend_cached_bytes, SUM) X(backend_released_bytes, SUM)         \
  X(backend_free_root_bytes, SUM) X(backend_allocs, SUM) X(backend_frees, SUM) X(backend_splits, SUM)    \
  X(backend_merges, SUM) X(reclaim_cycles, SUM) X(reclaim_released_bytes, SUM)                          \
  X(merges_before_release, SUM) X(merges_after_release, SUM) X(refaulted_allocs, SUM)                    \
  X(pool_pages_aged, SUM) X(mid_slabs_aged, SUM) X(huge_kept_bytes, SUM) X(huge_reuses, SUM)                    \
  X(backend_roots_mapped, SUM) X(backend_fast_allocs, SUM) X(backend_lf_splits, SUM)                    \
  X(backend_lf_recycled, SUM) X(backend_lf_roots, SUM) X(backend_roots_reused, SUM)                                          \
  X(placement_on, SUM) X(placement_contended, SUM) X(placement_stalled, SUM) X(adopted_slabs, SUM) \
  X(reclaim_sync_releases, SUM) X(reclaim_grace_releases, SUM) X(reclaim_grace_reused, SUM)

#endif
