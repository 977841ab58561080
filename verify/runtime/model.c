/* The memory model: RC11 in its view-based operational form
 * (docs/design/verification.md, "Memory model").
 *
 * Each atomic location keeps its modification order as messages sorted by
 * timestamp. A thread's view of a location is derived from its vector clock:
 * the newest timestamp that any event happening before it wrote or read.
 * Loads choose any message not older than the view, stores choose any gap
 * after it, RMWs choose an unclaimed message and go right after it. */
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "model.h"

#define NBUCKETS (1u << 16)

static loc_t **buckets;
static loc_t *all_locs;
loc_t *model_child_locs;

static unsigned bucket_of(uintptr_t a) { return (unsigned)((a * 0x9E3779B97F4A7C15ull) >> 48) & (NBUCKETS - 1); }

static loc_t *loc_find(uintptr_t a) {
  if (!buckets) return NULL;
  for (loc_t *l = buckets[bucket_of(a)]; l; l = l->hnext)
    if (l->addr == a && !l->dead) return l;
  return NULL;
}

static uint64_t mask_of(unsigned size) { return size >= 8 ? ~0ull : (1ull << (8 * size)) - 1; }

static uint64_t read_mem(uintptr_t a, unsigned size) {
  uint64_t v = 0;
  memcpy(&v, (void *)a, size);
  return v;
}

static void write_mem(uintptr_t a, unsigned size, uint64_t v) { memcpy((void *)a, &v, size); }

static int32_t cur_ev(void) { return rt.in_child ? (int32_t)rt.shm->nev : -1; }

static void list_in_child(loc_t *l) {
  if (rt.in_child && !l->listed) {
    l->listed = true;
    l->cnext = model_child_locs;
    model_child_locs = l;
  }
}

static msg_t *push_msg(loc_t *l) {
  if (l->nm == l->cap) {
    uint32_t nc = l->cap ? l->cap * 2 : 4;
    l->m = arena_grow(l->m, l->cap * sizeof(msg_t), nc * sizeof(msg_t));
    l->cap = nc;
  }
  msg_t *m = &l->m[l->nm++];
  memset(m, 0, sizeof *m);
  return m;
}

/* An atomic location at a, created on first use with the bytes in memory as
 * its initial message. Overlapping locations of another size are retired if
 * every access to them happens before this one, else it is a mixed-size race. */
static loc_t *loc_get(vthread_t *t, uintptr_t a, unsigned size) {
  loc_t *l = loc_find(a);
  if (l && l->size == size) {
    list_in_child(l);
    return l;
  }
  if (shadow_is_atomic(a, size)) {
    for (uintptr_t b = a >= 7 ? a - 7 : 0; b < a + size; b++) {
      loc_t *o = loc_find(b);
      if (!o || b + o->size <= a) continue;
      for (int u = 0; u < rt.nthreads; u++)
        if (u != t->id && (o->aw[u] > t->vc.c[u] || o->ar[u] > t->vc.c[u]))
          fail("data race", a, size,
               "T%d accesses %u bytes at %#lx atomically while T%d accesses the overlapping %u-byte atomic at "
               "%#lx, not ordered by happens-before (mixed-size atomics)",
               t->id, size, (unsigned long)a, u, o->size, (unsigned long)o->addr);
      o->dead = true;
    }
  }
  if (!buckets) buckets = arena_alloc(NBUCKETS * sizeof *buckets);
  l = arena_alloc(sizeof *l);
  l->addr = a;
  l->size = size;
  unsigned b = bucket_of(a);
  l->hnext = buckets[b];
  buckets[b] = l;
  l->anext = all_locs;
  all_locs = l;
  msg_t *m = push_msg(l);
  m->ts = 0;
  m->val = read_mem(a, size);
  m->init = true;
  m->ev = -1;
  int wt = 0;
  m->ep = shadow_last_writer(a, &wt);
  m->tid = (uint8_t)wt;
  shadow_set_atomic(a, size);
  list_in_child(l);
  return l;
}

uint64_t loc_view(vthread_t *t, loc_t *l) {
  uint64_t v = 0;
  for (int u = 0; u < rt.nthreads; u++) {
    uint32_t n = l->nseen[u];
    if (!n) continue;
    seen_t *s = l->seen[u];
    uint32_t bound = t->vc.c[u];
    if (s[0].ep > bound) continue;
    uint32_t lo = 0, hi = n - 1;
    while (lo < hi) {
      uint32_t mid = (lo + hi + 1) / 2;
      if (s[mid].ep <= bound) lo = mid;
      else hi = mid - 1;
    }
    if (s[lo].ts > v) v = s[lo].ts;
  }
  return v;
}

static void record_seen(vthread_t *t, loc_t *l, uint64_t ts) {
  int u = t->id;
  uint32_t ep = t->vc.c[u], n = l->nseen[u];
  if (n && l->seen[u][n - 1].ts >= ts) return;
  if (n && l->seen[u][n - 1].ep == ep) {
    l->seen[u][n - 1].ts = ts;
    return;
  }
  if (n == l->capseen[u]) {
    uint32_t nc = n ? n * 2 : 4;
    l->seen[u] = arena_grow(l->seen[u], n * sizeof(seen_t), nc * sizeof(seen_t));
    l->capseen[u] = nc;
  }
  l->seen[u][n] = (seen_t){ep, ts};
  l->nseen[u] = n + 1;
}

/* First message index readable with view v. */
static uint32_t first_readable(loc_t *l, uint64_t v) {
  uint32_t lo = 0, hi = l->nm;
  while (lo < hi) {
    uint32_t mid = (lo + hi) / 2;
    if (l->m[mid].ts < v) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

static uint64_t ts_after(loc_t *l, uint32_t i) {
  if (i + 1 == l->nm) return l->m[i].ts + TS_GAP;
  uint64_t ts = l->m[i].ts + (l->m[i + 1].ts - l->m[i].ts) / 2;
  if (ts == l->m[i].ts) fail("internal", l->addr, l->size, "modification-order timestamps exhausted");
  return ts;
}

/* Inserts a message right after index i; returns its index. Memory holds the
 * value of the last message in mo. */
static uint32_t insert_after(loc_t *l, uint32_t i, const msg_t *nm) {
  uint64_t ts = ts_after(l, i);
  push_msg(l);
  memmove(&l->m[i + 2], &l->m[i + 1], (l->nm - 2 - i) * sizeof(msg_t));
  l->m[i + 1] = *nm;
  l->m[i + 1].ts = ts;
  if (i + 2 == l->nm) write_mem(l->addr, l->size, nm->val);
  return i + 1;
}

/* ---- describing messages for the trace ---- */

/* A trace line into buf: cut at cap when longer (a trace is for reading;
 * a cut line is still correct as far as it goes). */
static void __attribute__((format(printf, 3, 4))) trace_text(char *buf, size_t cap, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, cap, fmt, ap);
  va_end(ap);
}

static void msg_desc(char *buf, size_t cap, const msg_t *m) {
  char site[300];
  if (m->init && m->ev < 0) {
    snprintf(buf, cap, "the initial value");
    return;
  }
  fmt_site(site, sizeof site, m->site, m->pc);
  if (m->ev < 0) snprintf(buf, cap, "a %sstore by T%d in setup at %s", m->plain ? "plain " : "", m->tid, site);
  else if (m->plain) snprintf(buf, cap, "a plain store by T%d before #%d at %s", m->tid, m->ev, site);
  else snprintf(buf, cap, "#%d (T%d %s %s)", m->ev, m->tid, mo_name(m->mo), site);
}

static void trace_event(vthread_t *t, const char *what, int mo, loc_t *l, const char *detail, unsigned c,
                        unsigned n, const vrf_site *s, uintptr_t pc) {
  char site[300], addr[200];
  fmt_site(site, sizeof site, s, pc);
  fmt_addr(addr, sizeof addr, l->addr);
  trace_printf("#%-4u T%d  %-5s %-7s %s (%uB) %s  [%u/%u]  %s\n", event_index(), t->id, what, mo_name(mo), addr,
               l->size, detail, c + 1, n, site);
}

/* A value for the trace: pointers into the program image get their symbol. */
static const char *fv(char *buf, size_t cap, uint64_t v) {
  char a[200];
  if (v >= 4096 && v >> 47 == 0) {
    fmt_addr(a, sizeof a, (uintptr_t)v);
    if (a[0] == '{') {
      snprintf(buf, cap, "%#lx (%s)", (unsigned long)v, a);
      return buf;
    }
  }
  snprintf(buf, cap, "%#lx", (unsigned long)v);
  return buf;
}

/* ---- applying reads and writes ---- */

static void apply_read(vthread_t *t, loc_t *l, uint32_t i, int mo) {
  msg_t *m = &l->m[i];
  if (m->has_rel) {
    if (mo_acq(mo)) vc_join(&t->vc, &m->rel);
    else vc_join(&t->acqpend, &m->rel);
  }
  record_seen(t, l, m->ts);
  iter_log_t *it = &t->iter;
  if (it->n < ITER_LOG) {
    it->r[it->n].loc = l;
    it->r[it->n].addr = l->addr;
    it->r[it->n].ts = m->ts;
    it->r[it->n].val = m->val;
    it->n++;
  } else {
    it->overflow = true;
  }
}

/* The clock a new store carries: the thread's clock for a release store,
 * the clock of its last release fence for a relaxed one. */
static void store_rel(vthread_t *t, int mo, msg_t *nm) {
  if (mo_rel(mo)) {
    nm->rel = t->vc;
    nm->has_rel = true;
  } else if (t->has_rel) {
    nm->rel = t->relvc;
    nm->has_rel = true;
  }
}

static msg_t new_msg(vthread_t *t, uint64_t val, int mo, const op_t *o, uintptr_t pc) {
  msg_t nm;
  memset(&nm, 0, sizeof nm);
  nm.val = val;
  nm.tid = (uint8_t)t->id;
  nm.ev = cur_ev();
  nm.avail = cur_ev() + 1;
  nm.wseq = t->nevents;
  nm.ep = t->vc.c[t->id];
  nm.mo = mo;
  nm.sc = mo == __ATOMIC_SEQ_CST;
  nm.site = o->site;
  nm.pc = pc;
  return nm;
}

static uint64_t rmw_value(int op, uint64_t old, uint64_t v, unsigned size) {
  uint64_t r;
  switch (op) {
    case VRF_RMW_ADD: r = old + v; break;
    case VRF_RMW_SUB: r = old - v; break;
    case VRF_RMW_OR: r = old | v; break;
    case VRF_RMW_AND: r = old & v; break;
    case VRF_RMW_XOR: r = old ^ v; break;
    case VRF_RMW_NAND: r = ~(old & v); break;
    default: r = v; break;
  }
  return r & mask_of(size);
}

static const char *rmw_name(int op) {
  static const char *n[] = {"add", "sub", "or", "and", "xchg", "xor", "nand"};
  return op >= 0 && op <= VRF_RMW_NAND ? n[op] : "rmw";
}

/* Candidates of one event: which message to read and/or where to write. */
enum { C_READ, C_STORE, C_RMW, C_CAS_OK, C_CAS_FAIL, C_CAS_SPURIOUS };
typedef struct cand {
  uint32_t idx;
  uint8_t kind;
} cand_t;

static cand_t *cands;
static uint32_t ncap;

static void cand_push(uint32_t *n, uint32_t idx, uint8_t kind) {
  if (*n == ncap) {
    uint32_t nc = ncap ? ncap * 2 : 64;
    cands = arena_grow(cands, ncap * sizeof(cand_t), nc * sizeof(cand_t));
    ncap = nc;
  }
  cands[(*n)++] = (cand_t){idx, kind};
}

/* Coherence key of a candidate (see pacc_t). */
static uint64_t cand_key(loc_t *l, const cand_t *c) {
  switch (c->kind) {
    case C_STORE:
    case C_RMW:
    case C_CAS_OK: return 2 * ts_after(l, c->idx);
    default: return 2 * l->m[c->idx].ts + 1;
  }
}

static bool cand_sc(const op_t *o, const cand_t *c) {
  int mo = (c->kind == C_CAS_FAIL || c->kind == C_CAS_SPURIOUS) ? o->mo_fail : o->mo;
  return mo == __ATOMIC_SEQ_CST;
}

static bool is_mutex(const op_t *o) { return o->kind == OP_LOCK || o->kind == OP_TRYLOCK || o->kind == OP_UNLOCK; }

bool model_mutex_free(vthread_t *t, void *addr) {
  loc_t *l = loc_get(t, (uintptr_t)addr, 4);
  return l->m[l->nm - 1].val == 0;
}

/* A fence: acquire joins what earlier reads saw, release records this
 * thread's clock for its later stores, seq_cst joins the order S. */
static void exec_fence(vthread_t *t, op_t *o) {
  if (mo_acq(o->mo)) vc_join(&t->vc, &t->acqpend);
  if (mo_rel(o->mo)) {
    t->relvc = t->vc;
    t->has_rel = true;
  }
  if (o->mo == __ATOMIC_SEQ_CST && rt.in_child) {
    rt.psc_active = true;
    psc_note_fence(t, event_index());
  }
  if (tracing()) {
    char s[300];
    fmt_site(s, sizeof s, o->site, o->pc);
    trace_printf("#%-4u T%d  fence %-7s  [1/1]  %s\n", event_index(), t->id, mo_name(o->mo), s);
  }
  footprint_t f = {0};
  exec_end_event(t, &f, 0, 1);
}

/* The choices of access o at l (messages from lo on, newest first) into
 * cands; returns how many. seq_cst drops those that leave no total order S
 * (C++20 [atomics.order]). */
static uint32_t collect_choices(vthread_t *t, op_t *o, loc_t *l, uint32_t lo, uint64_t mask) {
  uint32_t n = 0;
  if (is_mutex(o)) {
    uint32_t last = l->nm - 1; /* every mutex write is an RMW: only the last message is free */
    bool held = l->m[last].val != 0;
    if (o->kind == OP_TRYLOCK && held) cand_push(&n, last, C_CAS_FAIL);
    else cand_push(&n, last, C_CAS_OK);
    return n;
  }
  for (uint32_t i = l->nm; i-- > lo;) {
    msg_t *m = &l->m[i];
    switch (o->kind) {
      case OP_LOAD: cand_push(&n, i, C_READ); break;
      case OP_STORE:
        if (!m->claimed) cand_push(&n, i, C_STORE);
        break;
      case OP_RMW:
        if (!m->claimed) cand_push(&n, i, C_RMW);
        break;
      case OP_CAS:
        if ((m->val & mask) == (o->expected & mask)) {
          if (!m->claimed) cand_push(&n, i, C_CAS_OK);
          if (o->weak && t->spurious_left > 0) cand_push(&n, i, C_CAS_SPURIOUS);
        } else {
          cand_push(&n, i, C_CAS_FAIL);
        }
        break;
    }
  }
  if (rt.psc_active && rt.in_child) {
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++)
      if (psc_check_access(t, l, cand_key(l, &cands[i]), cand_sc(o, &cands[i]))) cands[k++] = cands[i];
    n = k;
  }
  return n;
}

/* Keeps only the choices for which this schedule is the canonical one: no
 * higher thread ran while this event could already have run. Returns how
 * many are left (none: this execution ends as non-canonical). */
static uint32_t keep_canonical(vthread_t *t, op_t *o, loc_t *l, uint32_t n) {
  int32_t lh = last_higher(t->id);
  if (lh < 0) return n;
  uint32_t k = 0;
  for (uint32_t i = 0; i < n; i++) {
    bool reads = cands[i].kind != C_STORE && o->kind != OP_UNLOCK;
    if (reads && l->m[cands[i].idx].avail > lh) cands[k++] = cands[i];
  }
  if (k == 0) child_end(ST_NONCANON);
  return k;
}

/* Notes which message the chosen access reads: for DPOR (the event read)
 * and in the thread's graph signature (mo is added at the end). */
static void note_read_from(vthread_t *t, op_t *o, loc_t *l, const cand_t *ch) {
  const msg_t *rm = &l->m[ch->idx];
  exec_set_rf(ch->kind == C_STORE ? -1 : rm->plain ? -1 : rm->ev);
  uint64_t x = ((uint64_t)ch->kind << 56) ^ l->addr ^ (uint64_t)o->kind << 52;
  if (ch->kind != C_STORE)
    x ^= ((uint64_t)(rm->ev < 0 ? 99u : rm->tid) << 40) ^ ((uint64_t)rm->wseq << 20) ^ (rm->init ? 0xABCDu : 0);
  t->sig = (t->sig ^ x) * 0x100000001b3ull;
}

/* A store after message ch->idx; detail: its trace words. */
static void exec_store(vthread_t *t, op_t *o, loc_t *l, const cand_t *ch, uint64_t mask, char *detail, size_t cap) {
  uint64_t v = o->val & mask;
  msg_t nm = new_msg(t, v, o->mo, o, o->pc);
  store_rel(t, o->mo, &nm);
  uint32_t at = insert_after(l, ch->idx, &nm);
  record_seen(t, l, l->m[at].ts);
  t->iter.stored = true;
  l->aw[t->id] = t->vc.c[t->id];
  if (tracing()) {
    char md[400], vb[240];
    msg_desc(md, sizeof md, &l->m[at - 1]);
    trace_text(detail, cap, "<- %s  mo: after %s%s", fv(vb, sizeof vb, v), md,
             at + 1 == l->nm ? " (last)" : " (not last)");
  }
}

/* An RMW, a successful CAS or a mutex operation on message ch->idx: reads it,
 * writes right after it. detail: its trace words. */
static void exec_rmw(vthread_t *t, op_t *o, loc_t *l, const cand_t *ch, uint64_t mask, uint64_t *result, bool *ok,
                     char *detail, size_t cap) {
  int rmo = o->mo, wmo = o->mo;
  if (o->kind == OP_LOCK || o->kind == OP_TRYLOCK) rmo = __ATOMIC_ACQUIRE, wmo = __ATOMIC_RELAXED;
  if (o->kind == OP_UNLOCK) rmo = __ATOMIC_RELAXED, wmo = __ATOMIC_RELEASE;
  apply_read(t, l, ch->idx, rmo);
  msg_t *rd = &l->m[ch->idx];
  uint64_t old = rd->val;
  uint64_t nv;
  if (o->kind == OP_CAS) nv = o->val & mask;
  else if (o->kind == OP_LOCK || o->kind == OP_TRYLOCK) nv = 1;
  else if (o->kind == OP_UNLOCK) nv = 0;
  else nv = rmw_value(o->rmw, old, o->val, o->size);
  msg_t nm = new_msg(t, nv, wmo, o, o->pc);
  store_rel(t, wmo, &nm);
  if (rd->has_rel) { /* release sequence: RMWs pass on what they read */
    if (nm.has_rel) vc_join(&nm.rel, &rd->rel);
    else nm.rel = rd->rel, nm.has_rel = true;
  }
  rd->claimed = true;
  char md[400];
  if (tracing()) msg_desc(md, sizeof md, rd);
  uint32_t at = insert_after(l, ch->idx, &nm);
  record_seen(t, l, l->m[at].ts);
  t->iter.stored = true;
  *result = old;
  *ok = true;
  l->aw[t->id] = l->ar[t->id] = t->vc.c[t->id];
  if (tracing()) {
    char ob[240], nb[240];
    if (o->kind == OP_CAS)
      trace_text(detail, cap, "ok: %s -> %s  reads %s", fv(ob, sizeof ob, old), fv(nb, sizeof nb, nv), md);
    else if (is_mutex(o))
      trace_text(detail, cap, "%s  reads %s", o->kind == OP_UNLOCK ? "released" : "acquired", md);
    else
      trace_text(detail, cap, "%s %#lx: %#lx -> %#lx  reads %s%s", rmw_name(o->rmw), (unsigned long)o->val,
               (unsigned long)old, (unsigned long)nv, md, at + 1 == l->nm ? "" : " (placed before a later store)");
  }
  if (o->kind == OP_LOCK && old != 0) fail("internal", (uintptr_t)o->addr, 4, "mutex model: lock of a held mutex");
}

/* The chosen access ch done: a read, a failing CAS, a store or a
 * read-modify-write. detail: its trace words. */
static void exec_choice_made(vthread_t *t, op_t *o, loc_t *l, const cand_t *ch, uint64_t mask, uint64_t *result,
                             bool *ok, char *detail, size_t cap) {
  char md[400];
  switch (ch->kind) {
    case C_READ: {
      apply_read(t, l, ch->idx, o->mo);
      *result = l->m[ch->idx].val;
      if (tracing()) {
        msg_desc(md, sizeof md, &l->m[ch->idx]);
        char vb[240];
        trace_text(detail, cap, "= %s  reads %s", fv(vb, sizeof vb, *result), md);
      }
      l->ar[t->id] = t->vc.c[t->id];
      break;
    }
    case C_CAS_FAIL:
    case C_CAS_SPURIOUS: {
      apply_read(t, l, ch->idx, o->mo_fail);
      *result = l->m[ch->idx].val;
      *ok = false;
      if (ch->kind == C_CAS_SPURIOUS) t->spurious_left--;
      if (tracing()) {
        msg_desc(md, sizeof md, &l->m[ch->idx]);
        char vb[240], eb[240];
        trace_text(detail, cap, "(expect %s) FAILS%s, sees %s  reads %s", fv(eb, sizeof eb, o->expected & mask),
                 ch->kind == C_CAS_SPURIOUS ? " spuriously" : "", fv(vb, sizeof vb, *result), md);
      }
      l->ar[t->id] = t->vc.c[t->id];
      break;
    }
    case C_STORE: exec_store(t, o, l, ch, mask, detail, cap); break;
    default: exec_rmw(t, o, l, ch, mask, result, ok, detail, cap); break; /* RMW, successful CAS, mutex ops */
  }
}

void model_exec(vthread_t *t, op_t *o, uint64_t *result, bool *ok) {
  uintptr_t a = (uintptr_t)o->addr;
  uintptr_t pc = o->pc;
  const vrf_site *site = o->site;
  if (o->kind == OP_FENCE) {
    exec_fence(t, o);
    return;
  }
  bool writes = o->kind != OP_LOAD;
  regions_check(t, a, o->size, writes, pc, site);
  if (tracing()) trace_watch(t, a, o->size, writes, true, pc, site);
  loc_t *l = loc_get(t, a, o->size);
  shadow_check_atomic(t, a, o->size, writes, site);
  uint64_t view = loc_view(t, l);
  uint32_t lo = first_readable(l, view);
  uint64_t mask = mask_of(o->size);
  bool sc_any = o->mo == __ATOMIC_SEQ_CST || o->mo_fail == __ATOMIC_SEQ_CST;
  if (sc_any && rt.in_child) rt.psc_active = true;
  uint32_t n = collect_choices(t, o, l, lo, mask);
  if (rt.canonical && rt.in_child) n = keep_canonical(t, o, l, n);
  if (n == 0) fail("internal", a, o->size, "no consistent choice for an atomic access");
  unsigned c = exec_choice(n);
  cand_t ch = cands[c];
  note_read_from(t, o, l, &ch);
  uint64_t key = cand_key(l, &ch);
  bool sc = cand_sc(o, &ch);
  char detail[700];
  detail[0] = 0;
  int32_t ev = cur_ev();
  exec_choice_made(t, o, l, &ch, mask, result, ok, detail, sizeof detail);
  if (rt.in_child) psc_commit_access(t, l, key, sc, (uint32_t)ev);
  if (tracing()) {
    static const char *w[] = {"", "load", "store", "rmw", "cas"};
    const char *what = is_mutex(o) ? (o->kind == OP_UNLOCK ? "unlock" : o->kind == OP_LOCK ? "lock" : "trylock")
                                   : w[o->kind];
    trace_event(t, what, (ch.kind == C_CAS_FAIL || ch.kind == C_CAS_SPURIOUS) ? o->mo_fail : o->mo, l, detail, c,
                n, site, pc);
  }
  footprint_t f = op_footprint(t, o);
  exec_end_event(t, &f, c, n);
}

/* ---- spin loops (jw_cpu_relax) ---- */

/* A message that can end the wait: newer than what the iteration read,
 * still readable, and with another value (the loop's code depends only on
 * values, so a same-value message changes nothing). It may be the waiting
 * thread's own, stored later in the iteration (a loop body that changes what
 * it tests, e.g. an exiting thread's drain between two abandon attempts). */
static bool wakes(const msg_t *m, uint64_t read_ts, uint64_t read_val) {
  return m->ts > read_ts && m->val != read_val;
}

/* Canonical exploration: could t's pending read run now without breaking
 * canonicity, i.e. read something that appeared after step lh? */
bool model_read_ready(vthread_t *t, int32_t lh) {
  const op_t *o = &t->pending;
  if (lh < 0) return true;
  loc_t *l = loc_find((uintptr_t)o->addr);
  if (!l || l->size != o->size) return false;
  if (o->kind == OP_LOCK || o->kind == OP_TRYLOCK) return l->m[l->nm - 1].avail > lh;
  uint64_t v = loc_view(t, l), mask = mask_of(o->size);
  for (uint32_t j = l->nm; j-- > 0;) {
    msg_t *m = &l->m[j];
    if (m->ts < v) break;
    if (m->avail <= lh) continue;
    if (o->kind == OP_RMW && m->claimed) continue;
    if (o->kind == OP_CAS && m->claimed && !o->weak && (m->val & mask) == (o->expected & mask)) continue;
    return true;
  }
  return false;
}

/* The step from which the await of t can run: 0 when it need not wait,
 * INT32_MAX while no message can wake it, else when the first one appeared. */
static int32_t await_ready(vthread_t *t) {
  int32_t best = INT32_MAX;
  if (t->stutters < rt.stutter || t->iter.overflow) return 0;
  for (uint32_t i = 0; i < t->iter.n; i++) {
    loc_t *l = t->iter.r[i].loc;
    uint64_t v = loc_view(t, l);
    for (uint32_t j = l->nm; j-- > 0;) {
      msg_t *m = &l->m[j];
      if (m->ts <= t->iter.r[i].ts || m->ts < v) break;
      if (wakes(m, t->iter.r[i].ts, t->iter.r[i].val) && m->avail < best) best = m->avail;
    }
  }
  return best;
}

int32_t model_relax_ready(vthread_t *t) {
  int32_t r = await_ready(t);
  return r == INT32_MAX ? 0 : r;
}

bool model_relax_enabled(vthread_t *t) { return await_ready(t) != INT32_MAX; }

void model_relax_exec(vthread_t *t) {
  iter_log_t *it = &t->iter, *pv = &t->prev_iter;
  const vrf_site *site = t->pending.site;
  bool same = t->has_prev_iter && !it->stored && !pv->stored && !it->overflow && !pv->overflow &&
              pv->site == site && it->n == pv->n;
  for (uint32_t i = 0; same && i < it->n; i++) same = it->r[i].loc == pv->r[i].loc && it->r[i].val == pv->r[i].val;
  if (tracing()) {
    char s[300];
    fmt_site(s, sizeof s, site, 0);
    trace_printf("#%-4u T%d  spin  iteration ends (%u reads)%s  %s\n", event_index(), t->id, it->n,
                 same ? ", same as the previous one" : "", s);
  }
  if (same) {
    if (++t->stutters > rt.stutter) child_end(ST_PRUNED_STUTTER);
  } else {
    t->stutters = 0;
  }
  *pv = *it;
  pv->site = site;
  t->has_prev_iter = true;
  it->n = 0;
  it->overflow = it->stored = false;
}

/* ---- plain accesses that touch atomic locations ---- */

void model_plain_overlap(vthread_t *t, uintptr_t a, unsigned n, bool write) {
  for (uintptr_t b = a >= 7 ? a - 7 : 0; b < a + n; b++) {
    loc_t *l = loc_find(b);
    if (!l || b + l->size <= a) continue;
    for (int u = 0; u < rt.nthreads; u++) {
      if (u == t->id) continue;
      if (l->aw[u] > t->vc.c[u] || (write && l->ar[u] > t->vc.c[u]))
        fail("data race", a, n,
             "T%d %s %u bytes at %#lx with a plain access, while T%d accessed the atomic there, not ordered by "
             "happens-before",
             t->id, write ? "writes" : "reads", n, (unsigned long)a, u);
    }
    if (!write) continue;
    bool dup = false;
    for (int i = 0; i < t->npend_plain; i++) dup |= t->pend_plain[i] == l;
    if (dup) continue;
    if (t->npend_plain == 8) model_flush_plain(t);
    t->pend_plain_ep[t->npend_plain] = t->vc.c[t->id];
    t->pend_plain[t->npend_plain++] = l;
  }
}

/* Plain writes to an atomic location become messages at the end of its mo
 * when the writer reaches its next scheduling point (their value is only in
 * memory after the instrumentation callback returned). */
void model_flush_plain(vthread_t *t) {
  for (int i = 0; i < t->npend_plain; i++) {
    loc_t *l = t->pend_plain[i];
    if (l->dead) continue;
    msg_t *m = push_msg(l);
    m->ts = l->m[l->nm - 2].ts + TS_GAP;
    m->val = read_mem(l->addr, l->size);
    m->tid = (uint8_t)t->id;
    m->ep = t->pend_plain_ep[i];
    m->plain = true;
    m->ev = cur_ev();
    m->avail = cur_ev() < 0 ? 0 : cur_ev();
    record_seen(t, l, m->ts);
    if (tracing()) {
      char addr[200];
      fmt_addr(addr, sizeof addr, l->addr);
      trace_printf("      T%d  plain store to atomic %s = %#lx\n", t->id, addr, (unsigned long)m->val);
    }
  }
  t->npend_plain = 0;
}

/* The final modification order of every location written in this execution,
 * as writer identities (thread, its event count): with the reads-from part
 * kept per thread, a signature of the execution graph. */
uint64_t model_mo_signature(void) {
  uint64_t sig = 0;
  for (loc_t *l = model_child_locs; l; l = l->cnext) {
    uint64_t h = l->addr * 0x9E3779B97F4A7C15ull;
    bool any = false;
    for (uint32_t i = 0; i < l->nm; i++) {
      const msg_t *m = &l->m[i];
      if (m->ev < 0 && !m->plain) continue;
      h = (h ^ ((uint64_t)m->tid << 32 | m->wseq | (uint64_t)m->plain << 40)) * 0x100000001b3ull;
      any = true;
    }
    if (any) sig += h;
  }
  return sig;
}

/* Atomic accesses to memory being released must happen before the release. */
void model_check_release(vthread_t *t, uintptr_t a, size_t n, const char *what) {
  for (loc_t *l = all_locs; l; l = l->anext) {
    if (l->dead || l->addr >= a + n || l->addr + l->size <= a) continue;
    for (int u = 0; u < rt.nthreads; u++)
      if (u != t->id && (l->aw[u] > t->vc.c[u] || l->ar[u] > t->vc.c[u])) {
        char addr[200];
        fmt_addr(addr, sizeof addr, l->addr);
        fail("out of bounds", l->addr, l->size,
             "T%d %s [%#lx, +%zu) while T%d's atomic access to %s is not ordered before it (use after free)", t->id,
             what, (unsigned long)a, n, u, addr);
      }
  }
}

/* Memory mapped afresh or returned to the OS: its locations start over. */
void model_forget(uintptr_t a, size_t n) {
  for (loc_t *l = all_locs; l; l = l->anext)
    if (l->addr < a + n && l->addr + l->size > a) l->dead = true;
}
