/* See driver.h. */
#include "driver.h"

#include <errno.h>
#include <string.h>

#include "backend/ahead.h"
#include "backend/backend.h"
#include "backend/meta.h"
#include "backend/release.h"
#include "pages/root_map.h"
#include "backend/size_class.h"
#include "tb.h"

#define PATTERN 0x5a17c0de00000000ull

static bd_root *root_of(bd *d, uintptr_t base, int create) {
  bd_root *freeslot = NULL;
  for (unsigned i = 0; i < BD_MAX_ROOTS; i++) {
    if (d->roots[i].base == base) return &d->roots[i];
    if (d->roots[i].base == 0 && !freeslot) freeslot = &d->roots[i];
  }
  if (!create) return NULL;
  /* Full: forget roots with no live range that the backend has unmapped
   * since (a reclaim cycle or a release after the watermark's grace gives
   * them back after their last free, which saw them still mapped). */
  for (unsigned i = 0; i < BD_MAX_ROOTS && !freeslot; i++)
    if (d->roots[i].base && d->roots[i].live_granules == 0 && jw_root_map_get((void *)d->roots[i].base) == NULL)
      freeslot = &d->roots[i];
  REQUIRE(freeslot != NULL, "more than %d roots in the model", BD_MAX_ROOTS);
  memset(freeslot, 0, sizeof *freeslot);
  freeslot->base = base;
  return freeslot;
}

static inline uintptr_t root_base(uintptr_t a) { return a & ~(uintptr_t)(JW_ROOT - 1); }

void bd_init(bd *d, uint32_t check_every) {
  memset(d, 0, sizeof *d);
  d->roots = calloc(BD_MAX_ROOTS, sizeof *d->roots);
  REQUIRE(d->roots != NULL, "calloc");
  d->next_id = 1;
  d->check_every = check_every ? check_every : 1;
  jw_backend_set_check(1); /* always on in tests */
}

void bd_destroy(bd *d) { free(d->roots); }

static void expect_lookup(uintptr_t a, const bd_range *want, int resolves, const char *what) {
  jw_range_info info = {0};
  bool got = jw_pages_lookup((void *)a, &info);
  REQUIRE(got == (resolves != 0), "%s: lookup(%#lx) = %d, want %d", what, (unsigned long)a, got, resolves);
  if (got)
    REQUIRE((uintptr_t)info.start == want->start && info.granules == want->granules && info.kind == want->kind,
            "%s: lookup(%#lx) gave %p+%u kind %d, want %#lx+%u kind %d", what, (unsigned long)a, info.start,
            info.granules, info.kind, (unsigned long)want->start, want->granules, want->kind);
}

static void maybe_check(bd *d) {
  if (++d->ops % d->check_every == 0) bd_check_all(d);
}

int bd_alloc(bd *d, uint32_t granules, jw_range_kind kind) {
  if (d->nlive == BD_MAX_LIVE) return -1;
  uint32_t got = 0;
  bool zeroed = false;
  errno = 0;
  void *p = jw_pages_alloc(granules, kind, &got, &zeroed);
  if (granules == 0 || granules > JW_ROOT_GRANULES || kind < JW_KIND_SMALL_SLAB || kind > JW_KIND_LARGE) {
    REQUIRE(p == NULL && errno == ENOMEM, "alloc(%u, kind %d) out of bounds gave %p errno %d", granules, kind,
            p, errno);
    return 0;
  }
  REQUIRE(p != NULL, "alloc(%u) failed: errno %d", granules, errno);
  unsigned c = jw_class_index_up(granules);
  REQUIRE(got == jw_class_granules[c], "alloc(%u) reserved %u, class is %u", granules, got,
          jw_class_granules[c]);
  uintptr_t a = (uintptr_t)p, base = root_base(a);
  uint32_t g = (uint32_t)((a - base) >> JW_GRANULE_SHIFT);
  REQUIRE((a & (JW_GRANULE - 1)) == 0 && g + got <= JW_ROOT_GRANULES, "range %p+%u misplaced", p, got);
  bd_root *rt = root_of(d, base, 1);
  uint32_t id = d->next_id++;
  for (uint32_t i = g; i < g + got; i++) {
    REQUIRE(rt->owner[i] == 0, "range %p+%u overlaps live range %u at granule %u", p, got, rt->owner[i], i);
    rt->owner[i] = id;
  }
  rt->live_granules += got;
  d->live_granules += got;
  volatile uint64_t *first = (uint64_t *)p, *last = (uint64_t *)(a + (size_t)got * JW_GRANULE) - 1;
  if (zeroed) {
    volatile uint64_t *mid = (uint64_t *)(a + (size_t)(got / 2) * JW_GRANULE);
    REQUIRE(*first == 0 && *last == 0 && *mid == 0, "range %p+%u said zeroed, holds data", p, got);
    d->zeroed_allocs++;
  }
  *first = PATTERN | id;
  *last = ~(PATTERN | id);
  bd_range *r = &d->live[d->nlive++];
  *r = (bd_range){a, got, id, kind, 0};
  d->allocs++;
  d->class_allocs[c]++;
  expect_lookup(a + ((id * 8) & 0xff8), r, 1, "new range start");
  if (got > 1) expect_lookup(a + JW_GRANULE * (1 + id % (got - 1)) + 24, r, kind != JW_KIND_LARGE, "new interior");
  jw_backend_stats s;
  jw_backend_get_stats(&s);
  if (s.record_bytes > d->peak_record_bytes) d->peak_record_bytes = s.record_bytes;
  if (s.pages.roots > d->peak_roots) d->peak_roots = s.pages.roots;
  maybe_check(d);
  return 0;
}

void bd_free(bd *d, uint32_t i) {
  if (d->nlive == 0) return;
  i %= d->nlive;
  bd_range r = d->live[i];
  d->live[i] = d->live[--d->nlive];
  volatile uint64_t *first = (uint64_t *)r.start, *last = (uint64_t *)(r.start + (size_t)r.granules * JW_GRANULE) - 1;
  REQUIRE(*first == (PATTERN | r.id) && *last == ~(PATTERN | r.id),
          "live range %#lx+%u (id %u) was overwritten or released", (unsigned long)r.start, r.granules, r.id);
  REQUIRE(jw_backend_free((void *)r.start) == 0, "free(%#lx) rejected: errno %d", (unsigned long)r.start, errno);
  uintptr_t base = root_base(r.start);
  bd_root *rt = root_of(d, base, 0);
  uint32_t g = (uint32_t)((r.start - base) >> JW_GRANULE_SHIFT);
  for (uint32_t k = g; k < g + r.granules; k++) rt->owner[k] = 0;
  rt->live_granules -= r.granules;
  d->live_granules -= r.granules;
  expect_lookup(r.start, &r, 0, "freed range");
  if (rt->live_granules == 0 && jw_root_map_get((void *)base) == NULL) rt->base = 0; /* root given back */
  d->frees++;
  maybe_check(d);
}

void bd_mark(bd *d, uint32_t i, uint32_t off) {
  if (d->nlive == 0) return;
  bd_range *r = &d->live[i % d->nlive];
  if (r->kind != JW_KIND_LARGE || r->granules < 2 || r->marked) return;
  r->marked = 1 + off % (r->granules - 1);
  uintptr_t p = r->start + (size_t)r->marked * JW_GRANULE + (off & 0xff8);
  jw_pages_mark_interior((void *)r->start, (void *)p);
  expect_lookup(p, r, 1, "marked interior");
  if (r->granules > 2) {
    uint32_t other = r->marked == 1 ? 2 : 1;
    expect_lookup(r->start + (size_t)other * JW_GRANULE, r, 0, "unmarked interior of a marked range");
  }
  maybe_check(d);
}

void bd_probe(bd *d, uint64_t x) {
  unsigned n = 0;
  bd_root *pick = NULL;
  for (unsigned i = 0; i < BD_MAX_ROOTS; i++)
    if (d->roots[i].base && tb_below(&(tb_rng){x + i}, ++n) == 0) pick = &d->roots[i];
  if (!pick) return;
  uint32_t g = (uint32_t)(x >> 8) % JW_ROOT_GRANULES;
  uintptr_t a = pick->base + (size_t)g * JW_GRANULE + (x & 0xff8);
  uint32_t id = pick->owner[g];
  d->probes++;
  jw_range_info info;
  jw_ptr_class pc = jw_backend_classify((void *)a, &info);
  if (id == 0) {
    expect_lookup(a, NULL, 0, "probe of free granule");
    REQUIRE(pc == JW_PTR_FREE || pc == JW_PTR_NOT_OURS, "classify(free granule) = %s",
            jw_backend_ptr_class_name(pc));
    return;
  }
  bd_range *r = NULL;
  for (uint32_t k = 0; k < d->nlive; k++)
    if (d->live[k].id == id) r = &d->live[k];
  REQUIRE(r != NULL, "model: owner %u not live", id);
  uint32_t off = (uint32_t)((a - r->start) >> JW_GRANULE_SHIFT);
  int resolves = off == 0 || r->kind != JW_KIND_LARGE || (r->marked && off == r->marked);
  expect_lookup(a, r, resolves, "probe of live granule");
  jw_ptr_class want = (a == r->start) ? JW_PTR_RANGE_START : resolves ? JW_PTR_RESOLVED : JW_PTR_INTERIOR;
  REQUIRE(pc == want && (uintptr_t)info.start == r->start, "classify(%#lx) = %s, want %s",
          (unsigned long)a, jw_backend_ptr_class_name(pc), jw_backend_ptr_class_name(want));
}

void bd_bad_free(bd *d, uint64_t x) {
  jw_backend_stats before, after;
  /* A reclaim thread running behind the driver may have made its last frees
   * deferred: complete them first, so that only this call could change the
   * figures compared below (only the driver frees). */
  if (jw_release_lock(1)) jw_release_unlock();
  jw_backend_get_stats(&before);
  uintptr_t a = 0;
  int local;
  switch (x % 4) {
    case 0: /* into the middle of a live range */
    case 1: /* a live range start plus a few bytes */
      if (d->nlive == 0) return;
      {
        bd_range *r = &d->live[(x >> 8) % d->nlive];
        if (x % 4 == 0 && r->granules < 2) return;
        a = x % 4 == 0 ? r->start + JW_GRANULE * (1 + (x >> 20) % (r->granules - 1)) : r->start + 8 * (1 + x % 7);
      }
      break;
    case 2: { /* into a free granule of a known root (double free, or never ours) */
      for (unsigned i = 0; i < BD_MAX_ROOTS && !a; i++) {
        bd_root *rt = &d->roots[(i + x) % BD_MAX_ROOTS];
        if (!rt->base) continue;
        for (uint32_t g = (uint32_t)(x >> 8) % JW_ROOT_GRANULES, k = 0; k < JW_ROOT_GRANULES; k++)
          if (rt->owner[(g + k) % JW_ROOT_GRANULES] == 0) {
            a = rt->base + (size_t)((g + k) % JW_ROOT_GRANULES) * JW_GRANULE;
            break;
          }
      }
      if (!a) return;
      break;
    }
    default: /* an address that is not the backend's */
      a = (uintptr_t)&local & ~(uintptr_t)(JW_GRANULE - 1);
      break;
  }
  errno = 0;
  REQUIRE(jw_backend_free((void *)a) == -1 && errno == EINVAL, "bad free of %#lx (case %d) accepted",
          (unsigned long)a, (int)(x % 4));
  jw_backend_get_stats(&after);
  REQUIRE(after.pages.live_bytes == before.pages.live_bytes && after.frees == before.frees,
          "bad free changed the backend");
  d->bad_frees++;
}

void bd_reclaim(bd *d) {
  jw_backend_reclaim_step();
  d->reclaims++;
  maybe_check(d);
}

void bd_check_all(bd *d) {
  char err[300];
  REQUIRE(jw_backend_check_all(err, sizeof err) == 0, "backend check: %s", err);
  jw_backend_stats s;
  jw_backend_get_stats_quiet(&s); /* consistent even with a reclaim thread at work */
  REQUIRE(s.pages.live_bytes == d->live_granules * JW_GRANULE, "live bytes %llu, model %llu",
          (unsigned long long)s.pages.live_bytes, (unsigned long long)(d->live_granules * JW_GRANULE));
  /* A root with no live range has merged back into one free leaf. */
  uint64_t live_roots = 0;
  for (unsigned i = 0; i < BD_MAX_ROOTS; i++) live_roots += d->roots[i].base && d->roots[i].live_granules;
  REQUIRE(s.pages.roots == live_roots + s.free_roots, "%llu roots: %llu with live ranges + %llu whole free",
          (unsigned long long)s.pages.roots, (unsigned long long)live_roots, (unsigned long long)s.free_roots);
  /* Metadata: 12 bytes per granule of the mapped roots (those mapped ahead,
   * unpublished, too: backend.md 7a), nothing per range. */
  uint64_t ahead = s.ahead_bytes / JW_ROOT;
  REQUIRE(s.record_bytes == (s.pages.roots + ahead) * JW_META_SLOT_BYTES,
          "record bytes %llu for %llu roots and %llu mapped ahead", (unsigned long long)s.record_bytes,
          (unsigned long long)s.pages.roots, (unsigned long long)ahead);
  REQUIRE(s.pages.metadata_bytes == s.record_bytes + s.root_map_bytes, "metadata bytes");
}

void bd_free_all(bd *d) {
  while (d->nlive) bd_free(d, d->nlive - 1);
  bd_check_all(d);
  jw_backend_stats s;
  jw_backend_get_stats_quiet(&s);
  REQUIRE(s.pages.live_bytes == 0 && s.free_ranges == s.free_roots && s.pages.roots == s.free_roots,
          "after freeing everything: %llu roots, %llu free ranges, %llu whole free roots",
          (unsigned long long)s.pages.roots, (unsigned long long)s.free_ranges, (unsigned long long)s.free_roots);
  /* With no root retained, every root and its metadata go back; and the
   * roots mapped ahead (a reclaim thread may hold some, backend.md 7a): the
   * target 0 first, then a quiet point (no filler half-way), then a cycle's
   * give-back of every ready root beyond the target. */
  unsigned ahead_target = jw_ahead_target();
  jw_ahead_set_target(0);
  jw_backend_set_retain_roots(0);
  jw_backend_get_stats_quiet(&s);
  jw_ahead_cycle(0);
  jw_backend_get_stats_quiet(&s);
  REQUIRE(s.pages.roots == 0 && s.record_bytes == 0 && s.pages.mapped_bytes == 0,
          "retain 0 left %llu roots, %llu record bytes", (unsigned long long)s.pages.roots,
          (unsigned long long)s.record_bytes);
  jw_backend_set_retain_roots(1);
  jw_ahead_set_target(ahead_target);
  for (unsigned i = 0; i < BD_MAX_ROOTS; i++) d->roots[i].base = 0;
}
