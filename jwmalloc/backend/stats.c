/* The backend's figures (backend.h, jw_backend_get_stats; page_source.h,
 * jw_pages_get_stats): relaxed counters read racily, or at a quiet point. */
#include "ahead.h"
#include "backend_internal.h"
#include "release.h"
#include "roots.h"

void jw_backend_get_stats(jw_backend_stats *o) {
  jw_roots_stats rs;
  jw_roots_get_stats(&rs);
  jw_bins *b = &jw_be.bins;
  o->record_bytes = jw_meta_slot_bytes();
  o->root_map_bytes = jw_root_map_bytes();
  o->metadata_arena_bytes = jw_meta_arena_bytes();
  o->pages.mapped_bytes = rs.roots * JW_ROOT;
  o->pages.peak_mapped_bytes = rs.peak_roots * JW_ROOT;
  o->pages.metadata_bytes = o->record_bytes + o->root_map_bytes;
  o->pages.peak_metadata_bytes = rs.peak_roots * JW_META_SLOT_BYTES + o->root_map_bytes;
  o->pages.live_bytes = jw_load(&jw_be.live_granules, JW_RELAXED) * JW_GRANULE;
  o->fast_bytes = jw_fast_granules() * JW_GRANULE;
  o->pages.cached_bytes =
      (jw_load(&b->granules[0], JW_RELAXED) + jw_load(&b->granules[1], JW_RELAXED)) * JW_GRANULE + o->fast_bytes;
  o->released_bytes = jw_load(&b->granules[JW_BUF_RELEASED], JW_RELAXED) * JW_GRANULE;
  o->pages.roots = rs.roots;
  o->pages.splits = jw_load(&jw_be.splits, JW_RELAXED);
  o->pages.merges = jw_load(&jw_be.merges, JW_RELAXED);
  o->free_ranges = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++) o->free_ranges += jw_load(&b->bin[c].total, JW_RELAXED);
  o->free_ranges += jw_fast_count(JW_ROOT_CLASS); /* the root reserve's (section 7c) */
  o->free_roots = free_roots();
  o->peak_roots = rs.peak_roots;
  o->roots_mapped_total = rs.mapped_total;
  o->roots_unmapped_total = rs.unmapped_total;
  o->allocs = jw_load(&jw_be.allocs, JW_RELAXED);
  o->frees = jw_load(&jw_be.frees, JW_RELAXED);
  o->deferred_frees = jw_load(&jw_be.deferred_frees, JW_RELAXED);
  o->merges_after_release = jw_load(&jw_be.merges_after_release, JW_RELAXED);
  o->allocs_refault = jw_load(&jw_be.allocs_refault, JW_RELAXED);
  o->refault_bytes = jw_load(&jw_be.refault_granules, JW_RELAXED) * JW_GRANULE;
  o->fast_allocs = jw_load(&jw_be.fast_allocs, JW_RELAXED);
  o->fast_frees = jw_load(&jw_be.fast_frees, JW_RELAXED);
  o->lf_splits = jw_load(&jw_be.lf_splits, JW_RELAXED);
  o->lf_roots = jw_load(&jw_be.lf_roots, JW_RELAXED);
  o->lf_recycled = jw_load(&jw_be.lf_recycled, JW_RELAXED);
  o->roots_reserved = jw_load(&jw_be.roots_reserved, JW_RELAXED);
  o->roots_reused = jw_load(&jw_be.roots_reused, JW_RELAXED);
  jw_ahead_stats as;
  jw_ahead_get_stats(&as);
  o->ahead_bytes = as.held * JW_ROOT;
  o->released_bytes += o->ahead_bytes; /* mapped, never touched */
  o->ahead_filled = as.filled;
  o->ahead_taken = as.taken;
  o->ahead_returned = as.returned;
}

uint64_t jw_backend_live_bytes(void) { return jw_load(&jw_be.live_granules, JW_RELAXED) * JW_GRANULE; /* a figure */ }

void jw_pages_get_stats(jw_pages_stats *out) {
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  *out = s.pages;
}

void jw_backend_get_stats_quiet(jw_backend_stats *out) {
  jw_backend_init_once();
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce();
  jw_backend_lf_pause(1); /* a filler or taker of a root mapped ahead is not half-way */
  jw_backend_get_stats(out);
  jw_backend_lf_resume();
  jw_backend_unlock();
}
