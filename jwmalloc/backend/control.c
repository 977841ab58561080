/* Run-time settings of the backend (checks, retained roots), its test hooks,
 * and fork (page_source.h, jw_pages_atfork_*). */
#include "../pages/root_map.h"
#include "backend_internal.h"
#include "release.h"
#include "roots.h"
#include "upcalls.h"

bool jw_pages_checking(void) { return checking(); }

void jw_backend_set_check(int on) {
  jw_backend_init_once();
  jw_store(&jw_be.check, on ? 1u : 0u, JW_RELAXED); /* a flag read racily: relaxed */
}

void jw_backend_set_retain_roots(unsigned n) {
  jw_backend_init_once();
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce(); /* ranges in flight have merged back by now */
  jw_store(&jw_be.retain_roots, n, JW_RELAXED); /* read under the lock */
  /* Entirely free roots beyond the new count go back now. */
  jw_bins *b = &jw_be.bins;
  for (;;) {
    if (free_roots() <= n) break;
    unsigned buf;
    jw_rid r = jw_bins_pop(b, JW_ROOT_CLASS, &buf);
    uintptr_t base = jw_meta_rid_base(r);
    jw_roots_unmap(base, jw_root_map_get((const void *)base));
  }
  jw_backend_unlock();
}

uint64_t jw_backend_reclaim_step(void) { return jw_reclaim_cycle(); }

void jw_backend_test_lock(void) { jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND); }

void jw_backend_test_unlock(void) { jw_backend_unlock(); }

/* The child must inherit no range in transit: prepare waits for a batch in
 * flight to finish its system calls (they need no lock) and files it. */
void jw_pages_atfork_prepare(void) {
  jw_reclaim_atfork_prepare(); /* no tier cache half-aged in the child */
  jw_lock_acquire(&jw_be.lock, JW_LK_BACKEND);
  jw_backend_drain_deferred();
  jw_backend_flush_fast();
  jw_release_quiesce();
  /* Nor a lock-free operation half-way (its thread does not exist in the
   * child): they finish, new ones back off until the parent resumes. */
  jw_backend_lf_pause(1);
}
void jw_pages_atfork_parent(void) {
  jw_backend_lf_resume();
  jw_backend_unlock(); /* frees deferred while the fork was prepared */
  jw_reclaim_atfork_parent();
}
void jw_pages_atfork_child(void) {
  /* One thread here. Prepare kept every lock-free operation out, but a
   * thread backing off may have been between its increment and decrement of
   * a count at the fork: those threads do not exist here. */
  for (unsigned c = 0; c < JW_NCLASSES; c++) jw_store(&jw_fast[c].inflight, 0, JW_RELAXED);
  jw_store(&jw_be.lf_checking, 0, JW_RELAXED);
  jw_lock_reset(&jw_be.lock);
  jw_reclaim_atfork_child(); /* its reclaim thread is gone: restarted lazily */
}
