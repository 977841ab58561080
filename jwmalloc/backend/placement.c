/* Placement on demand (page_source.h; docs/design/backend.md, section 7b):
 * the mode, the word every tier reads, the switch and the trim requests. */
#include <errno.h>

#include "backend_internal.h"
#include "upcalls.h"

jw_atomic_u32 jw_place_word = JW_ATOMIC_INIT(0);

unsigned jw_pages_place_mode(void) {
  unsigned m = jw_load(&jw_be.place_mode, JW_RELAXED); /* a setting */
  return m == JW_PLACE_UNSET ? JW_PLACE_OFF : m;
}

int jw_pages_set_place_mode(unsigned mode) {
  if (mode > JW_PLACE_AUTO) {
    errno = EINVAL;
    return -1;
  }
  /* Seq_cst store, and seq_cst loads in jw_pages_place_sync; the switch's
   * write of the word is seq_cst too (place_word_raise): a setter and the
   * detector (switch, then jw_pages_place_sync) each store and then load
   * the other's variable, so one of the two sees the other (Dekker). */
  jw_store(&jw_be.place_mode, mode, JW_SEQ_CST);
  jw_pages_place_sync();
  return 0;
}

/* Concurrent setters (and the detector) each loop until a mode read after
 * the switch in force agrees with it still asks for it: whoever switched
 * last against the mode in force sees the newer mode and switches back, so
 * once they are done the mode and the switch agree. Two threads setting 0
 * and 1 at once could otherwise each look before the other switched and
 * leave mode 0 with placement on (or 1 with it off) for good. */
void jw_pages_place_sync(void) {
  for (;;) {
    /* Seq_cst loads: see jw_pages_set_place_mode. */
    unsigned m = jw_load(&jw_be.place_mode, JW_SEQ_CST);
    if (m == JW_PLACE_UNSET) m = JW_PLACE_OFF;
    if (m == JW_PLACE_AUTO) return;
    bool want = m == JW_PLACE_ON;
    if (((jw_load(&jw_place_word, JW_SEQ_CST) & 1u) != 0) != want) {
      jw_pages_place_switch(want);
      continue;
    }
    if (jw_load(&jw_be.place_mode, JW_SEQ_CST) == m) return;
  }
}

/* Raises the epoch (bits 1..) and sets bit 0 to `on`, or keeps it as the CAS
 * finds it (`on` < 0: a trim request). The word is a setting: what a tier
 * does on seeing it is ordered by that tier's own guard (owner, class lock,
 * backend lock); the CAS is seq_cst only for the mode's agreement
 * (jw_pages_set_place_mode). */
static void place_word_raise(int on) {
  uint32_t w = jw_load(&jw_place_word, JW_RELAXED);
  /* Seq_cst: see jw_pages_set_place_mode (a switch or trim is rare). */
  while (!jw_cas_weak(&jw_place_word, &w, on < 0 ? w + 2u : ((w + 2u) & ~1u) | (unsigned)on, JW_SEQ_CST,
                      JW_RELAXED)) {
  }
}

/* A trim request keeps bit 0 as the CAS finds it: reading it first and
 * writing it back could undo a switch made in between by
 * jw_pages_set_place_mode, whose sync had already looked (mode 0 with
 * placement on for good: test_breakit6 setrace). */
void jw_pages_place_trim(void) { place_word_raise(-1); }

void jw_pages_place_switch(bool on) {
  if (!on) {
    place_word_raise(0);
    return;
  }
  /* Until the lock holder knows better, nothing is "above": a stale hint
   * must not send every pooled page away. Relaxed: a hint (see fast_free, free.c). */
  jw_store(&jw_be.place_root, UINT32_MAX, JW_RELAXED);
  place_word_raise(1);
  if (!jw_lock_try(&jw_be.lock, JW_LK_BACKEND)) return; /* the next locked allocation sets place_root */
  unsigned drained = jw_backend_drain_deferred();
  /* The bitmaps' ranges into the lists, where the lowest-root choice sees
   * them (a bitmap hands a range out in place). */
  if (jw_fast_granules() != 0) jw_backend_flush_fast();
  unsigned k = 0;
  jw_rid r = jw_bins_lowest(&jw_be.bins, 0, JW_NCLASSES, &k);
  if (r) set_place_root(jw_bins_rank(r));
  drained += jw_backend_unlock();
  if (drained) jw_reclaim_after_free(); /* frees filed here age like any */
}

bool jw_pages_above_place(const void *p) {
  if (!placing()) return false;
  uintptr_t base = (uintptr_t)p & ~(uintptr_t)(JW_ROOT - 1);
  if (jw_root_map_get(p) == NULL) return false;
  /* Relaxed: a hint (see place_root). */
  return jw_bins_rank(jw_meta_rid(base, 0)) > jw_load(&jw_be.place_root, JW_RELAXED);
}
