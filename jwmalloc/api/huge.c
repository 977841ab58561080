/* See huge.h. */
#include "huge.h"

#include <errno.h>
#include <stdint.h>

#include "../common/config.h"
#include "../os/os_mem.h"
#include "counters.h"
#include "huge_cache.h"

#define SLOTS_SHIFT 20
#define SLOTS ((size_t)1 << SLOTS_SHIFT)
#define MAX_LIVE (SLOTS / 2) /* load factor at most 1/2 */

/* Slot keys: EMPTY ends a probe, TOMB and BUSY do not. */
#define EMPTY ((uintptr_t)0)
#define TOMB ((uintptr_t)1)
#define BUSY ((uintptr_t)2)

typedef struct slot {
  jw_atomic_uptr key; /* mapping start, or EMPTY/TOMB/BUSY */
  jw_atomic_u64 size; /* bytes mapped; valid while key is the start */
} slot;

static jw_atomic_ptr table; /* slot[SLOTS], mapped on first use */
static jw_atomic_u64 live;

static slot *get_table(bool create) {
  /* Acquire: the zeroed table another thread mapped. */
  slot *t = jw_load(&table, JW_ACQUIRE);
  if (t || !create) return t;
  slot *fresh = jw_os_map(SLOTS * sizeof(slot), 4096);
  if (fresh == NULL) return NULL;
  void *expected = NULL;
  /* Release publishes the table; the loser unmaps its own. */
  if (jw_cas(&table, &expected, fresh, JW_ACQ_REL, JW_ACQUIRE)) return fresh;
  jw_os_unmap(fresh, SLOTS * sizeof(slot));
  return expected;
}

static size_t hash(uintptr_t a) { return (size_t)(((a >> 12) * 0x9e3779b97f4a7c15ULL) >> (64 - SLOTS_SHIFT)); }

/* Reserves room for one more entry (keeps the load factor at most 1/2, so
 * place() always finds a slot). */
static bool reserve(void) {
  /* Relaxed: a bound on the load factor, not a synchronization. */
  if (jw_fetch_add(&live, 1, JW_RELAXED) < MAX_LIVE) return true;
  jw_fetch_sub(&live, 1, JW_RELAXED);
  return false;
}

static void unreserve(void) { jw_fetch_sub(&live, 1, JW_RELAXED); }

/* Registers mapping a of `size` bytes in a reserved place. */
static void place(slot *t, uintptr_t a, size_t size) {
  for (size_t i = hash(a);; i = (i + 1) & (SLOTS - 1)) {
    uintptr_t k = jw_load(&t[i].key, JW_RELAXED);
    if (k != EMPTY && k != TOMB) continue;
    /* Acquire: pairs with the release that emptied the slot. */
    if (!jw_cas(&t[i].key, &k, BUSY, JW_ACQUIRE, JW_RELAXED)) continue;
    jw_store(&t[i].size, (uint64_t)size, JW_RELAXED); /* published below */
    /* Release: lookups that see the key (acquire) see the size. */
    jw_store(&t[i].key, a, JW_RELEASE);
    return;
  }
}

static slot *find(uintptr_t a) {
  slot *t = get_table(false);
  if (t == NULL || (a & 4095) != 0 || a <= BUSY) return NULL;
  for (size_t i = hash(a), n = 0; n < SLOTS; i = (i + 1) & (SLOTS - 1), n++) {
    uintptr_t k = jw_load(&t[i].key, JW_ACQUIRE); /* pairs with insert's release */
    if (k == a) return &t[i];
    if (k == EMPTY) return NULL;
  }
  return NULL;
}

/* Unregisters a (keeping its reservation); returns its size, or 0 when it
 * is not registered. */
static size_t take_entry(uintptr_t a) {
  slot *s = find(a);
  if (s == NULL) return 0;
  size_t size = (size_t)jw_load(&s->size, JW_RELAXED); /* ordered by find's acquire */
  uintptr_t k = a;
  /* Acq_rel: the winner of a racing double free alone unmaps; the release
   * orders our size read before the slot's reuse. */
  if (!jw_cas(&s->key, &k, TOMB, JW_ACQ_REL, JW_RELAXED)) return 0;
  return size;
}

void *jw_huge_alloc(size_t n, size_t align, bool *zeroed) {
  if (n > PTRDIFF_MAX - 2 * JW_PAGE || align > ((size_t)1 << (sizeof(size_t) * 8 - 2))) {
    errno = ENOMEM;
    return NULL;
  }
  size_t size = jw_align_up(n ? n : 1, JW_PAGE);
  if (align < JW_PAGE) align = JW_PAGE;
  size_t got = 0;
  void *p = jw_huge_cache_take(size, align, &got);
  bool fresh = p == NULL;
  if (!fresh) {
    size = got;
  } else {
    p = jw_os_map_committed(size, align);
    if (p == NULL) {
      errno = ENOMEM;
      return NULL;
    }
  }
  if (zeroed) *zeroed = fresh;
  slot *t = get_table(true);
  if (t == NULL || !reserve()) {
    jw_os_unmap(p, size);
    errno = ENOMEM;
    return NULL;
  }
  place(t, (uintptr_t)p, size);
  jw_counter_add(&jw_api_counters.huge_mallocs, 1);
  jw_counter_add(&jw_api_counters.huge_bytes, size);
  return p;
}

bool jw_huge_free(void *p) {
  size_t size = take_entry((uintptr_t)p);
  if (size == 0) return false;
  unreserve();
  if (!jw_huge_cache_put(p, size)) jw_os_unmap(p, size);
  jw_counter_add(&jw_api_counters.huge_frees, 1);
  jw_fetch_sub(&jw_api_counters.huge_bytes, size, JW_RELAXED); /* statistics */
  return true;
}

size_t jw_huge_usable(const void *p) {
  slot *s = find((uintptr_t)p);
  return s ? (size_t)jw_load(&s->size, JW_RELAXED) : 0; /* ordered by find's acquire */
}

void *jw_huge_resize(void *p, size_t n) {
  if (n > PTRDIFF_MAX - 2 * JW_PAGE) {
    errno = ENOMEM;
    return NULL;
  }
  size_t size = jw_align_up(n ? n : 1, JW_PAGE);
  /* Unregistered before mremap, registered again after it: a mapping moved
   * by mremap leaves its old range free in the kernel at once, and a mapping
   * another thread makes there must not find p's entry still in the table
   * (two entries with one key: its size and its free would read ours). */
  size_t old = take_entry((uintptr_t)p); /* keeps the entry's reservation */
  if (old == 0) {
    errno = EINVAL;
    return NULL;
  }
  void *q = jw_os_remap(p, old, size);
  if (q == NULL) {
    place(get_table(false), (uintptr_t)p, old); /* the entry's reservation was kept */
    errno = ENOMEM;
    return NULL;
  }
  place(get_table(false), (uintptr_t)q, size);
  jw_fetch_sub(&jw_api_counters.huge_bytes, old, JW_RELAXED); /* statistics */
  jw_counter_add(&jw_api_counters.huge_bytes, size);
  return q;
}

size_t jw_huge_each(uintptr_t lo, uintptr_t hi, void (*fn)(uintptr_t start, size_t size, void *arg), void *arg) {
  slot *t = get_table(false);
  /* Relaxed: the reservations bound how many entries there are to find. */
  uint64_t want = jw_load(&live, JW_RELAXED), seen = 0;
  size_t n = 0;
  for (size_t i = 0; t != NULL && i < SLOTS && seen < want; i++) {
    uintptr_t k = jw_load(&t[i].key, JW_ACQUIRE); /* pairs with place's release: the size */
    if (k <= BUSY) continue;
    seen++;
    if (k < lo || k >= hi) continue;
    fn(k, (size_t)jw_load(&t[i].size, JW_RELAXED), arg);
    n++;
  }
  return n;
}
