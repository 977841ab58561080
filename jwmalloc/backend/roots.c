/* See roots.h. Counters: atomic read-modify-writes (a root may be mapped
 * without the backend lock, docs/design/backend.md section 7a), read racily
 * for statistics: relaxed. */
#include "roots.h"

#include <errno.h>

#include "../os/os_mem.h"
#include "meta.h"
#include "../pages/root_map.h"
#include "tree.h"

static jw_atomic_u64 nroots, peak, mapped_total, unmapped_total;

uintptr_t jw_roots_prepare(unsigned state, jw_rec **recs_out) {
  void *mem = jw_os_map_root(JW_ROOT, JW_ROOT); /* a random place (os_mem.h) */
  if (mem == NULL) goto fail;
  uintptr_t base = (uintptr_t)mem;
  /* The region's id and its root-map leaf now, so that publishing maps
   * nothing (also rejects bases above the root map). */
  if (jw_meta_prepare_root(base) != 0 || jw_root_map_prepare(base) != 0) goto fail_unmap;
  jw_rec *recs = jw_meta_slot_alloc();
  if (recs == NULL) goto fail_unmap;
  jw_tree t = {recs, JW_ROOT_GRANULES};
  jw_tree_init(&t, state, 1);
  *recs_out = recs;
  return base;
fail_unmap:
  jw_os_unmap(mem, JW_ROOT);
fail:
  errno = ENOMEM;
  return 0;
}

void jw_roots_publish(uintptr_t base, jw_rec *recs) {
  /* Publishes the initialized records (release inside jw_root_map_set); the
   * leaf exists (jw_roots_prepare), so it cannot fail. */
  jw_root_map_set(base, recs);
  uint64_t n = jw_fetch_add(&nroots, 1, JW_RELAXED) + 1, p = jw_load(&peak, JW_RELAXED);
  while (n > p && !jw_cas_weak(&peak, &p, n, JW_RELAXED, JW_RELAXED)) {
  }
  jw_fetch_add(&mapped_total, 1, JW_RELAXED);
}

void jw_roots_discard(uintptr_t base, jw_rec *recs) {
  jw_meta_slot_free(recs); /* never published: nobody else saw them */
  jw_os_unmap((void *)base, JW_ROOT);
}

uintptr_t jw_roots_map(unsigned state, jw_rec **recs_out) {
  uintptr_t base = jw_roots_prepare(state, recs_out);
  if (base) jw_roots_publish(base, *recs_out);
  return base;
}

void jw_roots_forget(uintptr_t base, jw_rec *recs) {
  jw_root_map_clear(base);
  jw_meta_slot_retire(recs);
  jw_fetch_sub(&nroots, 1, JW_RELAXED);
  jw_fetch_add(&unmapped_total, 1, JW_RELAXED);
}

void jw_roots_unmap(uintptr_t base, jw_rec *recs) {
  jw_roots_forget(base, recs);
  jw_os_unmap((void *)base, JW_ROOT);
  jw_meta_slot_release(recs);
  jw_meta_slot_put(recs);
}

void jw_roots_get_stats(jw_roots_stats *out) {
  out->roots = jw_load(&nroots, JW_RELAXED);
  out->peak_roots = jw_load(&peak, JW_RELAXED);
  out->mapped_total = jw_load(&mapped_total, JW_RELAXED);
  out->unmapped_total = jw_load(&unmapped_total, JW_RELAXED);
}
