/* See ahead.h; design: docs/design/backend.md, section 7a, "Roots mapped
 * ahead". A slot's state word orders its base and records: the filler
 * writes them between its compare-and-swap EMPTY -> FILLING and its release
 * store of READY; the taker (or the cycle giving a root back) reads them
 * between its acquire compare-and-swap READY -> TAKING and its release store
 * of EMPTY. Both sides run inside lf_enter, so that a quiet point sees only
 * EMPTY and READY slots. */
#include "ahead.h"

#include "../common/log.h"
#include "upcalls.h"
#include "backend_internal.h"
#include "../pages/root_map.h"
#include "roots.h"
#include "tree.h"

enum { S_EMPTY, S_FILLING, S_READY, S_TAKING };

static struct {
  jw_atomic_u32 state;
  jw_atomic_u64 base; /* relaxed: ordered by state */
  jw_atomic_ptr recs;
} slots[JW_AHEAD_MAX];

static jw_atomic_u32 target;  /* JWMALLOC_AHEAD_ROOTS (options.c sets it) */
static jw_atomic_u32 demand;  /* step 5 needed a root since the last cycle */
static jw_atomic_u64 n_filled, n_taken, n_returned; /* figures: relaxed */

void jw_ahead_set_target(unsigned n) { jw_store(&target, n < JW_AHEAD_MAX ? n : JW_AHEAD_MAX, JW_RELAXED); }

unsigned jw_ahead_target(void) { return jw_load(&target, JW_RELAXED); }

/* Claims a READY slot (acquire: the filler's base and records); its state
 * is TAKING until the caller stores EMPTY. */
static int claim_ready(unsigned i, uintptr_t *base, jw_rec **recs) {
  uint32_t s = S_READY;
  if (jw_load(&slots[i].state, JW_RELAXED) != S_READY) return 0; /* a peek: the CAS decides */
  if (!jw_cas(&slots[i].state, &s, S_TAKING, JW_ACQUIRE, JW_RELAXED)) return 0;
  *base = (uintptr_t)jw_load(&slots[i].base, JW_RELAXED);
  *recs = jw_load(&slots[i].recs, JW_RELAXED);
  /* Release: our reads of base and records come before a filler's writes
   * (its acquire CAS reads this store). */
  jw_store(&slots[i].state, S_EMPTY, JW_RELEASE);
  return 1;
}

uintptr_t jw_ahead_take(jw_rec **recs) {
  if (jw_load(&target, JW_RELAXED) == 0) return 0; /* a setting */
  jw_store(&demand, 1, JW_RELAXED); /* a hint for the next cycle */
  uintptr_t base = 0;
  for (unsigned i = 0; i < JW_AHEAD_MAX && !base; i++) claim_ready(i, &base, recs);
  if (base) {
    jw_roots_publish(base, *recs);
    jw_fetch_add(&n_taken, 1, JW_RELAXED);
  }
  jw_reclaim_wake_ahead(); /* fill the slot again, off this call's path */
  return base;
}

unsigned jw_ahead_fill(void) {
  unsigned want = jw_load(&target, JW_RELAXED), n = 0;
  if (want == 0 || !lf_enter(JW_ROOT_CLASS)) return 0; /* off, or a check or a fork: the next cycle */
  for (unsigned i = 0; i < want; i++) {
    uint32_t s = S_EMPTY;
    /* Acquire: a taker's reads of the slot's old root come first. */
    if (!jw_cas(&slots[i].state, &s, S_FILLING, JW_ACQUIRE, JW_RELAXED)) continue;
    jw_rec *recs;
    uintptr_t base = jw_roots_prepare(JW_RS_BUSY, &recs);
    if (base == 0) { /* out of memory: step 5 maps (and fails) on its own */
      jw_store(&slots[i].state, S_EMPTY, JW_RELAXED);
      break;
    }
    jw_store(&slots[i].base, (uint64_t)base, JW_RELAXED);
    jw_store(&slots[i].recs, (void *)recs, JW_RELAXED);
    jw_store(&slots[i].state, S_READY, JW_RELEASE); /* publishes base and records to the taker */
    n++;
  }
  lf_exit(JW_ROOT_CLASS);
  jw_fetch_add(&n_filled, n, JW_RELAXED);
  return n;
}

/* Gives one ready root back, the last slots first (the taker looks at the
 * first ones first). Returns 1 if one went. */
static int give_back_one(void) {
  int done = 0;
  if (!lf_enter(JW_ROOT_CLASS)) return 0;
  for (unsigned i = JW_AHEAD_MAX; i-- > 0 && !done;) {
    uintptr_t base;
    jw_rec *recs;
    if (!claim_ready(i, &base, &recs)) continue;
    jw_roots_discard(base, recs);
    jw_fetch_add(&n_returned, 1, JW_RELAXED);
    done = 1;
  }
  lf_exit(JW_ROOT_CLASS);
  return done;
}

unsigned jw_ahead_cycle(int fill) {
  if (jw_xchg(&demand, 0, JW_RELAXED)) {
    if (fill) jw_ahead_fill();
  } else {
    give_back_one();
  }
  while (jw_ahead_held() > jw_load(&target, JW_RELAXED) && give_back_one()) {
  }
  return jw_ahead_held();
}

unsigned jw_ahead_held(void) {
  unsigned n = 0;
  for (unsigned i = 0; i < JW_AHEAD_MAX; i++) n += jw_load(&slots[i].state, JW_RELAXED) == S_READY;
  return n;
}

int jw_ahead_check(char *err, size_t cap) {
  int n = 0;
  for (unsigned i = 0; i < JW_AHEAD_MAX; i++) {
    uint32_t s = jw_load(&slots[i].state, JW_ACQUIRE); /* a quiet point: the filler's writes */
    if (s == S_EMPTY) continue;
    uintptr_t base = (uintptr_t)jw_load(&slots[i].base, JW_RELAXED);
    jw_rec *recs = jw_load(&slots[i].recs, JW_RELAXED);
    if (s != S_READY) {
      if (cap) jw_format(err, cap, "root mapped ahead in slot %u: state %u at a quiet point", i, s);
      return -1;
    }
    uint32_t tag = jw_load(&recs[0].tag, JW_RELAXED);
    if (jw_root_map_get((const void *)base) != NULL || jw_tag_state(tag) != JW_RS_BUSY ||
        jw_tag_class(tag) != JW_ROOT_CLASS) {
      if (cap) jw_format(err, cap, "root mapped ahead %p: published, or its head not one busy root leaf", (void *)base);
      return -1;
    }
    n++;
  }
  return n;
}

void jw_ahead_get_stats(jw_ahead_stats *o) {
  o->held = jw_ahead_held();
  o->filled = jw_load(&n_filled, JW_RELAXED);
  o->taken = jw_load(&n_taken, JW_RELAXED);
  o->returned = jw_load(&n_returned, JW_RELAXED);
}
