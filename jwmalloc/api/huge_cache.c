/* See huge_cache.h. */
#include "huge_cache.h"

#include "../common/config.h"
#include "../common/counter.h"
#include "../common/lock.h"
#include "../common/options.h"
#include "../os/os_mem.h"
#include "../reclaim/reclaim.h"

typedef struct kept {
  uintptr_t start;
  size_t size;
  bool old; /* already kept at the previous aging pass */
} kept;

/* Under `lock`: the kept mappings, oldest first. */
static struct {
  jw_lock lock;
  unsigned n;
  kept e[JW_HUGE_CACHE_SLOTS];
} hc = {.lock = JW_LOCK_INIT};

static jw_atomic_u64 kept_bytes; /* written under the lock, read anywhere (relaxed) */
static jw_atomic_u64 reuses;

static uint64_t bound(void) {
  if (!jw_reclaim_enabled()) return 0; /* nothing would age the cache */
  return (uint64_t)jw_opt(JW_OPT_HUGE_CACHE_MB) << 20;
}

/* Under the lock: removes entry i and returns it. */
static kept remove_at(unsigned i) {
  kept k = hc.e[i];
  for (unsigned j = i + 1; j < hc.n; j++) hc.e[j - 1] = hc.e[j];
  hc.n--;
  jw_store(&kept_bytes, jw_load(&kept_bytes, JW_RELAXED) - k.size, JW_RELAXED); /* the lock orders writers */
  return k;
}

static void unmap_all(const kept *v, unsigned n) {
  for (unsigned i = 0; i < n; i++) jw_os_unmap((void *)v[i].start, v[i].size);
}

/* Under the lock: removes every kept mapping into v; returns how many. */
static unsigned take_all_locked(kept *v) {
  unsigned n = 0;
  while (hc.n > 0) v[n++] = remove_at(0);
  return n;
}

/* The cache is off (HUGE_CACHE_MB=0 or reclamation turned off at run time)
 * with mappings still kept: nothing would age them, so they go now. Try-lock
 * (malloc and free never wait): when busy, the next call drops them. */
static void drop_when_off(void) {
  if (jw_load(&kept_bytes, JW_RELAXED) == 0 || !jw_lock_try(&hc.lock, JW_LK_HUGE)) return; /* a hint: the lock decides */
  kept victims[JW_HUGE_CACHE_SLOTS];
  unsigned nv = take_all_locked(victims);
  jw_lock_release(&hc.lock);
  unmap_all(victims, nv);
}

bool jw_huge_cache_put(void *p, size_t size) {
  uint64_t cap = bound();
  if (cap == 0) {
    drop_when_off();
    return false;
  }
  if (size > cap || !jw_lock_try(&hc.lock, JW_LK_HUGE)) return false;
  kept victims[JW_HUGE_CACHE_SLOTS];
  unsigned nv = 0;
  while (hc.n > 0 && (hc.n == JW_HUGE_CACHE_SLOTS || jw_load(&kept_bytes, JW_RELAXED) + size > cap))
    victims[nv++] = remove_at(0);
  hc.e[hc.n++] = (kept){(uintptr_t)p, size, false};
  jw_store(&kept_bytes, jw_load(&kept_bytes, JW_RELAXED) + size, JW_RELAXED); /* the lock orders writers */
  jw_lock_release(&hc.lock);
  unmap_all(victims, nv);
  jw_reclaim_kick(); /* it ages from now on (outside the lock: may start the thread) */
  return true;
}

void *jw_huge_cache_take(size_t size, size_t align, size_t *got) {
  if (jw_load(&kept_bytes, JW_RELAXED) == 0) return NULL; /* a hint: the lock decides */
  if (bound() == 0) {
    drop_when_off();
    return NULL;
  }
  if (!jw_lock_try(&hc.lock, JW_LK_HUGE)) return NULL;
  unsigned best = hc.n;
  for (unsigned i = 0; i < hc.n; i++)
    if (hc.e[i].size >= size && (hc.e[i].start & (align - 1)) == 0 && (best == hc.n || hc.e[i].size < hc.e[best].size))
      best = i;
  if (best == hc.n) {
    jw_lock_release(&hc.lock);
    return NULL;
  }
  kept k = remove_at(best);
  jw_lock_release(&hc.lock);
  if (k.size - size > size / 8) { /* no more than an eighth left over */
    jw_os_unmap((void *)(k.start + size), k.size - size);
    k.size = size;
  }
  jw_counter_add(&reuses, 1);
  *got = k.size;
  return (void *)k.start;
}

uint64_t jw_huge_cache_age(void) {
  if (!jw_lock_try(&hc.lock, JW_LK_HUGE)) return jw_load(&kept_bytes, JW_RELAXED);
  kept victims[JW_HUGE_CACHE_SLOTS];
  unsigned nv = 0;
  for (unsigned i = 0; i < hc.n;) {
    if (hc.e[i].old) {
      victims[nv++] = remove_at(i);
    } else {
      hc.e[i++].old = true;
    }
  }
  uint64_t left = jw_load(&kept_bytes, JW_RELAXED);
  jw_lock_release(&hc.lock);
  unmap_all(victims, nv);
  return left;
}

bool jw_huge_cache_drop(void) {
  jw_lock_acquire(&hc.lock, JW_LK_HUGE); /* malloc_trim may wait: the holder never does */
  kept victims[JW_HUGE_CACHE_SLOTS];
  unsigned nv = take_all_locked(victims);
  jw_lock_release(&hc.lock);
  unmap_all(victims, nv);
  return nv > 0;
}

uint64_t jw_huge_cache_bytes(void) { return jw_load(&kept_bytes, JW_RELAXED); }

uint64_t jw_huge_cache_reuses(void) { return jw_counter_get(&reuses); }

void jw_huge_cache_atfork_prepare(void) { jw_lock_acquire(&hc.lock, JW_LK_HUGE); }

void jw_huge_cache_atfork_release(void) { jw_lock_release(&hc.lock); }
