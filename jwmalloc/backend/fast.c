/* See fast.h. docs/design/backend.md, section 7a. */
#include "fast.h"

#include "bins.h"

jw_fast_class jw_fast[JW_NCLASSES];

/* Granules in the bitmaps: counted when a range is published and when it
 * leaves a slot. Relaxed: a figure (and the reclamation watermark's input),
 * ordering nothing. */
static jw_atomic_u64 fast_granules;
static inline void count(unsigned c, int sign) {
  if (sign > 0) jw_fetch_add(&fast_granules, jw_class_granules[c], JW_RELAXED);
  else jw_fetch_sub(&fast_granules, jw_class_granules[c], JW_RELAXED);
}

/* Classes (granules): 1-8 | 10 12 14 16 | 20 24 28 32 | 40 48 56 64 | 80 ... 1024. */
#ifdef JW_VERIFY_FAST_SLOTS /* model-checking clients shrink the bitmaps (docs/design/verification.md) */
const uint8_t jw_fast_nslots[JW_NCLASSES] = {[0 ... JW_NCLASSES - 1] = JW_VERIFY_FAST_SLOTS};
#else
const uint8_t jw_fast_nslots[JW_NCLASSES] = {8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 6, 5, 4, 4, 3, 2, 2, 2,
                                             2, 2, 2, 2, 2, 2, 2, 2, 1, 1, 1, 1, 1, 1, 1, JW_FAST_ROOT_SLOTS};
#endif

static inline int holds_range(uint32_t v) { return v != 0 && v != JW_FAST_RESERVED; }

/* Placement's order (backend.md 7b, "Root order"): the oldest root first,
 * then the lower address. Plain id order would prefer the newest root (the
 * kernel maps top-down) and undo what placement does with the lists. */
static inline int jw_fast_before(uint32_t a, uint32_t b) {
  uint32_t ra = jw_bins_rank(a), rb = jw_bins_rank(b);
  return ra < rb || (ra == rb && a < b);
}

jw_rid jw_fast_take(unsigned c) {
  jw_fast_class *k = &jw_fast[c];
  unsigned n = jw_fast_slots(c);
  /* Bounded retries: each failed CAS means another thread took or replaced
   * that range, i.e. made progress. */
  for (unsigned tries = 0; tries < JW_FAST_SLOTS; tries++) {
    unsigned best = n;
    uint32_t best_r = 0;
    for (unsigned i = 0; i < n; i++) {
      /* Relaxed scan: the CAS below is what reads the slot with ordering. */
      uint32_t v = jw_load(&k->slot[i], JW_RELAXED);
      if (holds_range(v) && (best_r == 0 || jw_fast_before(v, best_r))) best = i, best_r = v;
    }
    if (best == n) return 0;
    uint32_t exp = best_r;
    /* Acquire pairs with jw_fast_publish's release: the putter's head state
     * FREE_FAST and its cleared interior records are visible to the new
     * owner. Relaxed on failure: we rescan. */
    if (jw_cas(&k->slot[best], &exp, 0, JW_ACQUIRE, JW_RELAXED)) {
      count(c, -1);
      return best_r;
    }
  }
  return 0;
}

int jw_fast_nonempty(unsigned c) {
  for (unsigned i = 0; i < jw_fast_slots(c); i++)
    if (holds_range(jw_load(&jw_fast[c].slot[i], JW_RELAXED))) return 1; /* a hint: relaxed */
  return 0;
}

unsigned jw_fast_count(unsigned c) {
  unsigned n = 0;
  for (unsigned i = 0; i < jw_fast_slots(c); i++)
    n += holds_range(jw_load(&jw_fast[c].slot[i], JW_RELAXED)) != 0; /* a figure: relaxed */
  return n;
}

int jw_fast_reserve(unsigned c) {
  jw_fast_class *k = &jw_fast[c];
  unsigned n = jw_fast_slots(c);
  for (unsigned i = 0; i < n; i++) {
    uint32_t exp = 0;
    /* Relaxed: a reservation publishes nothing (the range is published by
     * jw_fast_publish); it only keeps other putters off the slot. */
    if (jw_load(&k->slot[i], JW_RELAXED) == 0 &&
        jw_cas(&k->slot[i], &exp, JW_FAST_RESERVED, JW_RELAXED, JW_RELAXED))
      return (int)i;
  }
  return -1;
}

void jw_fast_publish(unsigned c, int i, jw_rid r) {
  /* Release: the range's FREE_FAST head and cleared interior records happen
   * before any taker's or claimer's acquire CAS of this slot. */
  count(c, +1);
  jw_store(&jw_fast[c].slot[i], r, JW_RELEASE);
}

void jw_fast_unreserve(unsigned c, int i) {
  /* Relaxed: the slot held no range; nothing to publish. */
  jw_store(&jw_fast[c].slot[i], 0, JW_RELAXED);
}

int jw_fast_claim(unsigned c, jw_rid r) {
  if (c >= JW_NCLASSES) return 0;
  jw_fast_class *k = &jw_fast[c];
  unsigned n = jw_fast_slots(c);
  for (unsigned i = 0; i < n; i++) {
    uint32_t exp = r;
    /* Acquire: as in jw_fast_take (the putter's writes to the range). */
    if (jw_load(&k->slot[i], JW_RELAXED) == r && jw_cas(&k->slot[i], &exp, 0, JW_ACQUIRE, JW_RELAXED)) {
      count(c, -1);
      return 1;
    }
  }
  return 0;
}

jw_rid jw_fast_flush_slot(unsigned c, unsigned i) {
  jw_atomic_u32 *s = &jw_fast[c].slot[i];
  uint32_t v = jw_load(s, JW_RELAXED);
  /* A reserved slot belongs to a put in progress: left alone. Acquire as in
   * jw_fast_take. */
  while (holds_range(v))
    if (jw_cas(s, &v, 0, JW_ACQUIRE, JW_RELAXED)) {
      count(c, -1);
      return v;
    }
  return 0;
}

uint64_t jw_fast_granules(void) { return jw_load(&fast_granules, JW_RELAXED); /* a figure */ }

uint64_t jw_fast_granules_scan(void) {
  uint64_t g = 0;
  for (unsigned c = 0; c < JW_NCLASSES; c++)
    for (unsigned i = 0; i < jw_fast_slots(c); i++)
      /* Relaxed: for a check at a quiet point. */
      if (holds_range(jw_load(&jw_fast[c].slot[i], JW_RELAXED))) g += jw_class_granules[c];
  return g;
}
