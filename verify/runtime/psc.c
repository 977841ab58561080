/* seq_cst: a choice is kept only if a single total order S of the seq_cst
 * operations (accesses and fences) can still satisfy C++20 [atomics.order]/4:
 *  - SC operations ordered by happens-before keep that order in S;
 *  - for atomic accesses A, B of one location with A coherence-ordered before B:
 *    (1) A, B both SC: A before B;  (2) A SC, B happens before SC fence Y: A before Y;
 *    (3) SC fence X happens before A, B SC: X before B;
 *    (4) fence X happens before A, B happens before fence Y: X before Y.
 * The constraints form a graph over SC operations; S exists iff it is acyclic.
 * Coherence order on one location is the order of access keys (pacc_t). */
#include <string.h>

#include "model.h"

#define MAXNODES 256
#define MAXFENCES 64
#define W (MAXNODES / 64)

typedef struct node {
  uint8_t tid;
  uint32_t ep;
} node_t;

typedef struct fence {
  int16_t node;
  uint8_t tid;
  uint32_t ep;
  vc_t vc;
} fence_t;

static uint64_t adj[MAXNODES][W];
static node_t nodes[MAXNODES];
static int nnodes;
static fence_t fences[MAXFENCES];
static int nfences;

typedef struct edge {
  int16_t a, b;
} edge_t;
static edge_t pend[4096];
static int npend;

static void add_pending(int a, int b) {
  if (a == b) return;
  if (adj[a][b / 64] >> (b % 64) & 1) return;
  if (npend == (int)(sizeof pend / sizeof pend[0])) fail("internal", 0, 0, "too many seq_cst constraints");
  pend[npend++] = (edge_t){(int16_t)a, (int16_t)b};
}

/* Is b reachable from a using the graph plus the pending edges? */
static bool reaches(int from, int to) {
  uint64_t seen[W] = {0}, frontier[W] = {0};
  frontier[from / 64] |= 1ull << (from % 64);
  seen[from / 64] |= 1ull << (from % 64);
  for (;;) {
    uint64_t next[W] = {0};
    bool any = false;
    for (int w = 0; w < W; w++) {
      for (uint64_t bits = frontier[w]; bits; bits &= bits - 1) {
        int x = w * 64 + __builtin_ctzll(bits);
        for (int k = 0; k < W; k++) next[k] |= adj[x][k];
        for (int e = 0; e < npend; e++)
          if (pend[e].a == x) next[pend[e].b / 64] |= 1ull << (pend[e].b % 64);
      }
    }
    for (int k = 0; k < W; k++) {
      next[k] &= ~seen[k];
      seen[k] |= next[k];
      any |= next[k] != 0;
    }
    if (seen[to / 64] >> (to % 64) & 1) return true;
    if (!any) return false;
    memcpy(frontier, next, sizeof next);
  }
}

static bool pending_acyclic(void) {
  for (int e = 0; e < npend; e++)
    if (reaches(pend[e].b, pend[e].a)) return false;
  return true;
}

static void commit_pending(void) {
  for (int e = 0; e < npend; e++) adj[pend[e].a][pend[e].b / 64] |= 1ull << (pend[e].b % 64);
  npend = 0;
}

static uint64_t fences_before(vthread_t *t) {
  uint64_t m = 0;
  for (int f = 0; f < nfences; f++)
    if (fences[f].ep <= t->vc.c[fences[f].tid]) m |= 1ull << f;
  return m;
}

/* SC fences the access happens before. */
static uint64_t fences_after(const pacc_t *b) {
  uint64_t m = 0;
  for (int f = 0; f < nfences; f++)
    if (fences[f].vc.c[b->tid] >= b->ep) m |= 1ull << f;
  return m;
}

/* Pending edges pre(A) x post(B) for A coherence-before B. */
static void edges_between(int a_node, uint64_t a_fences, int b_node, uint64_t b_fences) {
  for (uint64_t x = a_fences; x; x &= x - 1) {
    int xn = fences[__builtin_ctzll(x)].node;
    if (b_node >= 0) add_pending(xn, b_node);
    for (uint64_t y = b_fences; y; y &= y - 1) add_pending(xn, fences[__builtin_ctzll(y)].node);
  }
  if (a_node >= 0) {
    if (b_node >= 0) add_pending(a_node, b_node);
    for (uint64_t y = b_fences; y; y &= y - 1) add_pending(a_node, fences[__builtin_ctzll(y)].node);
  }
}

/* The constraints a new access with coherence key `key` adds; `self` is its
 * node if it is SC (a fresh node id, not yet in the graph). */
static void access_edges(vthread_t *t, loc_t *l, uint64_t key, int self, uint64_t pre) {
  for (uint32_t i = 0; i < l->nacc; i++) {
    pacc_t *b = &l->acc[i];
    if (b->key > key) edges_between(self, pre, b->sc ? b->node : -1, fences_after(b));
    else if (b->key < key && self >= 0) edges_between(b->sc ? b->node : -1, b->prefences, self, 0);
  }
  if (self >= 0) /* happens-before between SC operations */
    for (int n = 0; n < nnodes; n++)
      if (n != self && nodes[n].ep <= t->vc.c[nodes[n].tid]) add_pending(n, self);
}

bool psc_check_access(vthread_t *t, void *lp, uint64_t key, bool sc) {
  loc_t *l = lp;
  uint64_t pre = fences_before(t);
  if (!sc && !pre) return true;
  if (sc && nnodes >= MAXNODES) fail("internal", 0, 0, "more than %d seq_cst operations", MAXNODES);
  int self = sc ? nnodes : -1;
  npend = 0;
  if (self >= 0) {
    nodes[self] = (node_t){(uint8_t)t->id, t->vc.c[t->id]};
    memset(adj[self], 0, sizeof adj[self]);
  }
  access_edges(t, l, key, self, pre);
  bool ok = pending_acyclic();
  npend = 0;
  return ok;
}

void psc_commit_access(vthread_t *t, void *lp, uint64_t key, bool sc, uint32_t ev) {
  (void)ev;
  loc_t *l = lp;
  uint64_t pre = fences_before(t);
  int self = -1;
  if (sc) {
    if (nnodes >= MAXNODES) fail("internal", 0, 0, "more than %d seq_cst operations", MAXNODES);
    self = nnodes;
    nodes[self] = (node_t){(uint8_t)t->id, t->vc.c[t->id]};
    memset(adj[self], 0, sizeof adj[self]);
  }
  if (sc || pre) {
    npend = 0;
    access_edges(t, l, key, self, pre);
    commit_pending();
  }
  if (sc) nnodes++;
  if (l->nacc == l->capacc) {
    uint32_t nc = l->capacc ? l->capacc * 2 : 8;
    l->acc = arena_grow(l->acc, l->capacc * sizeof(pacc_t), nc * sizeof(pacc_t));
    l->capacc = nc;
  }
  l->acc[l->nacc++] = (pacc_t){key, pre, t->vc.c[t->id], (uint8_t)t->id, sc, (int16_t)self};
}

/* A new SC fence F: every SC operation happening before it precedes it, and
 * rules (2) and (4) with F as Y: pre(A) -> F for A coherence-before some B
 * that happens before F. F has no outgoing constraint yet, so no cycle. */
void psc_note_fence(vthread_t *t, uint32_t ev) {
  (void)ev;
  if (nfences >= MAXFENCES || nnodes >= MAXNODES)
    fail("internal", 0, 0, "more than %d seq_cst fences per execution", MAXFENCES);
  int self = nnodes++;
  nodes[self] = (node_t){(uint8_t)t->id, t->vc.c[t->id]};
  memset(adj[self], 0, sizeof adj[self]);
  npend = 0;
  for (int n = 0; n < self; n++)
    if (nodes[n].ep <= t->vc.c[nodes[n].tid]) add_pending(n, self);
  for (loc_t *l = model_child_locs; l; l = l->cnext) {
    uint64_t kmax = 0;
    bool any = false;
    for (uint32_t i = 0; i < l->nacc; i++) {
      pacc_t *b = &l->acc[i];
      if (b->ep <= t->vc.c[b->tid] && (!any || b->key > kmax)) kmax = b->key, any = true;
    }
    if (!any) continue;
    for (uint32_t i = 0; i < l->nacc; i++) {
      pacc_t *a = &l->acc[i];
      if (a->key >= kmax) continue;
      if (a->sc) add_pending(a->node, self);
      for (uint64_t x = a->prefences; x; x &= x - 1) add_pending(fences[__builtin_ctzll(x)].node, self);
    }
  }
  commit_pending();
  fences[nfences] = (fence_t){(int16_t)self, (uint8_t)t->id, t->vc.c[t->id], t->vc};
  nfences++;
}
