/* Memory safety: which memory each access may touch
 * (docs/design/verification.md, "What every execution checks"). */
#include <link.h>
#include <stdio.h>
#include <string.h>

#include "rt.h"

typedef struct region {
  uintptr_t lo, hi;
  const char *name;
  int32_t ev; /* event that declared it (-1: setup) */
} region_t;

typedef struct rset {
  region_t *r;
  uint32_t n, cap;
} rset_t;

static rset_t always; /* stacks, static data, static TLS */
static rset_t legal;  /* vrf_mem_legal */
static rset_t blocks; /* live blocks */
static rset_t owned;  /* allocator memory */

static region_t *rs_find(rset_t *s, uintptr_t a) {
  /* last region with lo <= a */
  uint32_t lo = 0, hi = s->n;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (s->r[mid].lo <= a) lo = mid + 1;
    else hi = mid;
  }
  return lo ? &s->r[lo - 1] : NULL;
}

static bool rs_contains(rset_t *s, uintptr_t a, unsigned n) {
  region_t *r = rs_find(s, a);
  if (r && a + n <= r->hi) return true;
  /* overlapping declarations: fall back to a scan */
  for (uint32_t i = 0; i < s->n && s->r[i].lo <= a; i++)
    if (a >= s->r[i].lo && a + n <= s->r[i].hi) return true;
  return false;
}

static region_t *rs_overlap(rset_t *s, uintptr_t a, unsigned n) {
  for (uint32_t i = 0; i < s->n && s->r[i].lo < a + n; i++)
    if (s->r[i].hi > a) return &s->r[i];
  return NULL;
}

static void rs_add(rset_t *s, uintptr_t lo, uintptr_t hi, const char *name) {
  if (s->n == s->cap) {
    uint32_t nc = s->cap ? s->cap * 2 : 16;
    s->r = arena_grow(s->r, s->cap * sizeof(region_t), nc * sizeof(region_t));
    s->cap = nc;
  }
  uint32_t i = s->n;
  while (i > 0 && s->r[i - 1].lo > lo) {
    s->r[i] = s->r[i - 1];
    i--;
  }
  s->r[i] = (region_t){lo, hi, name, rt.in_child ? (int32_t)event_index() : -1};
  s->n++;
}

/* Removes the region starting at lo (or covering [lo, hi) exactly when hi). */
static bool rs_remove(rset_t *s, uintptr_t lo) {
  for (uint32_t i = 0; i < s->n; i++) {
    if (s->r[i].lo == lo) {
      memmove(&s->r[i], &s->r[i + 1], (s->n - i - 1) * sizeof(region_t));
      s->n--;
      return true;
    }
  }
  return false;
}

static int phdr_cb(struct dl_phdr_info *info, size_t size, void *data) {
  (void)size, (void)data;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type == PT_LOAD) {
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      rs_add(&always, lo, lo + ph->p_memsz, "static data");
    } else if (ph->p_type == PT_TLS && info->dlpi_tls_data) {
      uintptr_t lo = (uintptr_t)info->dlpi_tls_data;
      rs_add(&always, lo, lo + ph->p_memsz, "T0 thread-local storage");
    }
  }
  return 0;
}

void regions_init(void) {
  dl_iterate_phdr(phdr_cb, NULL);
  /* T0's stack: the whole [stack] mapping, which also holds argv and environ. */
  FILE *f = fopen("/proc/self/maps", "r");
  char line[512];
  while (f && fgets(line, sizeof line, f)) {
    unsigned long lo, hi;
    if (strstr(line, "[stack]") && sscanf(line, "%lx-%lx", &lo, &hi) == 2) rs_add(&always, lo, hi, "T0 stack");
  }
  if (f) fclose(f);
}

void regions_add_thread_stack(int tid, const void *p, size_t n) {
  static char names[MAXT][24];
  snprintf(names[tid], sizeof names[tid], "T%d stack", tid);
  rs_add(&always, (uintptr_t)p, (uintptr_t)p + n, names[tid]);
}

static void describe_near(char *buf, size_t cap, uintptr_t a) {
  rset_t *sets[] = {&blocks, &legal, &owned};
  const char *kinds[] = {"live block", "legal region", "allocator memory"};
  region_t *best = NULL;
  const char *kind = NULL;
  uintptr_t bestd = UINTPTR_MAX;
  for (int k = 0; k < 3; k++) {
    for (uint32_t i = 0; i < sets[k]->n; i++) {
      region_t *r = &sets[k]->r[i];
      uintptr_t d = a < r->lo ? r->lo - a : a >= r->hi ? a - r->hi + 1 : 0;
      if (d < bestd) bestd = d, best = r, kind = kinds[k];
    }
  }
  if (!best) {
    snprintf(buf, cap, "no memory was declared near it");
    return;
  }
  char ev[32] = "setup";
  if (best->ev >= 0) snprintf(ev, sizeof ev, "#%d", best->ev);
  if (a >= best->hi)
    snprintf(buf, cap, "%lu bytes past the end of %s %s [%#lx, +%lu) declared at %s", (unsigned long)(a - best->hi),
             kind, best->name ? best->name : "", (unsigned long)best->lo, (unsigned long)(best->hi - best->lo), ev);
  else if (a < best->lo)
    snprintf(buf, cap, "%lu bytes before %s %s [%#lx, +%lu) declared at %s", (unsigned long)(best->lo - a), kind,
             best->name ? best->name : "", (unsigned long)best->lo, (unsigned long)(best->hi - best->lo), ev);
  else
    snprintf(buf, cap, "straddling the end of %s %s [%#lx, +%lu)", kind, best->name ? best->name : "",
             (unsigned long)best->lo, (unsigned long)(best->hi - best->lo));
}

bool regions_any(uintptr_t a, unsigned n) {
  return rs_contains(&always, a, n) || rs_contains(&blocks, a, n) || rs_contains(&legal, a, n) ||
         rs_contains(&owned, a, n);
}

void regions_check(vthread_t *t, uintptr_t a, unsigned n, bool write, uintptr_t pc, const vrf_site *s) {
  if (rs_contains(&always, a, n)) return;
  char site[300], near[400];
  if (t->domain <= 0) {
    if (rs_contains(&blocks, a, n) || rs_contains(&legal, a, n)) return;
  } else {
    region_t *b = rs_overlap(&blocks, a, n);
    if (b) {
      fmt_site(site, sizeof site, s, pc);
      fail("out of bounds", a, n, "allocator code in T%d %s %u bytes at %#lx inside live block [%#lx, +%lu) (%s)",
           t->id, write ? "writes" : "reads", n, (unsigned long)a, (unsigned long)b->lo,
           (unsigned long)(b->hi - b->lo), site);
    }
    if (rs_contains(&owned, a, n) || rs_contains(&legal, a, n)) return;
  }
  fmt_site(site, sizeof site, s, pc);
  describe_near(near, sizeof near, a);
  fail("out of bounds", a, n, "%s code in T%d %s %u bytes at %#lx (%s): outside legal memory; %s",
       t->domain > 0 ? "allocator" : "client", t->id, write ? "writes" : "reads", n, (unsigned long)a, site, near);
}

/* ---- the client interface ---- */

void vrf_mem_legal(const void *p, size_t n, const char *name) { rs_add(&legal, (uintptr_t)p, (uintptr_t)p + n, name); }
void vrf_mem_revoke(const void *p) {
  region_t *r = rs_find(&legal, (uintptr_t)p);
  if (r && r->lo == (uintptr_t)p && rt.started) shadow_check_release(rt_self, r->lo, r->hi - r->lo, "revokes");
  rs_remove(&legal, (uintptr_t)p);
}
void vrf_block_live(const void *p, size_t n) { rs_add(&blocks, (uintptr_t)p, (uintptr_t)p + n, "block"); }
void vrf_block_dead(const void *p) {
  region_t *r = rs_find(&blocks, (uintptr_t)p);
  if (!r || r->lo != (uintptr_t)p) fail("assertion", (uintptr_t)p, 1, "vrf_block_dead(%p): not a live block", p);
  if (rt.started) shadow_check_release(rt_self, r->lo, r->hi - r->lo, "frees block");
  rs_remove(&blocks, (uintptr_t)p);
}
void vrf_alloc_owned(const void *p, size_t n) { rs_add(&owned, (uintptr_t)p, (uintptr_t)p + n, "mapping"); }
/* Removes [a, a+n) from allocator memory, splitting regions (munmap may trim
 * the head and tail of an aligned mapping). */
void regions_disown(uintptr_t a, size_t n) {
  uintptr_t hi = a + n;
  for (uint32_t i = 0; i < owned.n; i++) {
    region_t r = owned.r[i];
    if (r.hi <= a || r.lo >= hi) continue;
    rs_remove(&owned, r.lo);
    if (r.lo < a) rs_add(&owned, r.lo, a, r.name);
    if (r.hi > hi) rs_add(&owned, hi, r.hi, r.name);
    i = (uint32_t)-1; /* the set changed: rescan */
  }
}
void vrf_alloc_disowned(const void *p, size_t n) { regions_disown((uintptr_t)p, n); }
void vrf_enter_allocator(void) {
  if (rt_self) rt_self->domain++;
}
void vrf_leave_allocator(void) {
  if (rt_self) rt_self->domain--;
}
