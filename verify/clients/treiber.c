/* A Treiber stack written against jwmalloc's atomic.h, the shape of the
 * allocator's lock-free free lists. Built four ways:
 *   (default)               correct: release CAS on push, acquire on pop
 *   -DTREIBER_RELAXED_PUSH  push publishes with a relaxed CAS: the popper's read
 *                           of the payload is a data race (may see it stale)
 *   -DTREIBER_LOST_PUSH     push is load + store, not a CAS: a concurrent push
 *                           is lost (found by the final invariant)
 *   -DTREIBER_ABA           nodes are reused without a tag: a pop whose CAS
 *                           succeeds after pop/pop/push of the same node
 *                           re-links a node that is no longer in the stack
 * Invariant checked in finish(): every node is either in the stack exactly once
 * or was popped exactly once, and never both. */
#include "common/atomic.h"
#include "vrf.h"

typedef struct node {
  jw_atomic_ptr next;
  int payload; /* plain data, published by the push */
} node_t;

#define NNODES 6
node_t pool[NNODES];
jw_atomic_ptr top;
int popped_by[NNODES]; /* thread that popped the node (plain: written by that thread only) */

#ifdef TREIBER_RELAXED_PUSH
#define PUSH_MO JW_RELAXED
#else
#define PUSH_MO JW_RELEASE /* publishes the node's payload and next */
#endif

static void push(node_t *n) {
#ifdef TREIBER_LOST_PUSH
  void *old = jw_load(&top, JW_ACQUIRE);
  jw_store(&n->next, old, JW_RELAXED);
  jw_store(&top, n, JW_RELEASE); /* BUG: overwrites a concurrent push */
#else
  void *old = jw_load(&top, JW_RELAXED); /* only a guess: the CAS validates it */
  do {
    jw_store(&n->next, old, JW_RELAXED); /* published by the CAS below */
  } while (!jw_cas_weak(&top, &old, n, PUSH_MO, JW_RELAXED));
#endif
}

static node_t *pop(void) {
  void *old = jw_load(&top, JW_ACQUIRE); /* sees the pushed node's contents */
  while (old) {
    void *next = jw_load(&((node_t *)old)->next, JW_RELAXED); /* ordered by the acquire above */
    /* Acquire on both paths: the node we end up owning (or retrying with) was published by a release push. */
    if (jw_cas_weak(&top, &old, next, JW_ACQUIRE, JW_ACQUIRE)) break;
  }
  node_t *n = old;
  if (n) {
    int id = (int)(n - pool);
    VRF_ASSERT(n->payload == id + 1); /* the payload the pusher wrote */
    VRF_ASSERT(popped_by[id] == 0);
    popped_by[id] = vrf_self();
  }
  return n;
}

static void push_new(int id) {
  pool[id].payload = id + 1;
  push(&pool[id]);
}

#ifdef TREIBER_ABA
/* Setup: A -> B -> C. T1 pops once; T2 pops A and B, then pushes A back. */
static void setup(void) {
  for (int id = 2; id >= 0; id--) push_new(id);
}
static void t1(void *a) {
  (void)a;
  pop();
}
static void t2(void *a) {
  (void)a;
  node_t *x = pop();
  pop();
  if (x) {
    popped_by[x - pool] = 0; /* reused: back into the stack */
    push(x);
  }
}
#define THREADS t1, t2
#define SETUP setup
#define BOUND "stack A-B-C; T1: 1 pop; T2: pop, pop, push of the first node"
#else
/* Pushes and pops per thread. --param 1 and 2 select small configurations
 * used to cross-check the exploration modes (tests/verify). */
static const int cfg[2][3][3][2] = {
    [0] = {{{2, 0}, {0, 2}, {1, 1}}, {{1, 0}, {0, 1}, {1, 0}}, {{1, 0}, {1, 1}, {0, 0}}},
    [1] = {{{2, 1}, {0, 2}, {1, 1}}, {{1, 0}, {0, 1}, {1, 0}}, {{1, 0}, {1, 1}, {0, 0}}},
};
static void worker(void *a) {
  int t = (int)(intptr_t)a, p = vrf_param() % 3;
  for (int i = 0; i < cfg[vrf_level()][p][t][0]; i++) push_new(2 * t + i);
  for (int i = 0; i < cfg[vrf_level()][p][t][1]; i++) pop();
}
#define SETUP NULL
#define THREADS worker, worker, worker
#define BOUND "test: T1 2 pushes; T2 2 pops; T3 push+pop. full: T1 also pops"
#endif

static void finish(void) {
  int in_stack[NNODES] = {0};
  int steps = 0;
  for (node_t *n = jw_load(&top, JW_ACQUIRE); n; n = jw_load(&n->next, JW_RELAXED)) {
    VRF_ASSERT(++steps <= NNODES); /* no cycle */
    in_stack[n - pool]++;
  }
  for (int id = 0; id < NNODES; id++) {
    bool pushed = pool[id].payload != 0;
    VRF_ASSERT(in_stack[id] <= 1);
    if (pushed) VRF_ASSERT(in_stack[id] + (popped_by[id] != 0) == 1); /* not lost, not duplicated */
  }
}

#if defined(TREIBER_RELAXED_PUSH)
VRF_CLIENT(.name = "treiber_relaxed_push", .about = "Treiber stack whose push CAS is relaxed (planted bug)",
           .bound = BOUND, .setup = SETUP, .threads = {THREADS}, .args = {(void *)0, (void *)1, (void *)2}, .finish = finish, .expect = "data race");
#elif defined(TREIBER_LOST_PUSH)
VRF_CLIENT(.name = "treiber_lost_push", .about = "Treiber stack whose push is a load and a store (planted bug)",
           .bound = BOUND, .setup = SETUP, .threads = {THREADS}, .args = {(void *)0, (void *)1, (void *)2}, .finish = finish, .expect = "assertion");
#elif defined(TREIBER_ABA)
VRF_CLIENT(.name = "treiber_aba", .about = "Treiber stack with node reuse and no ABA tag (planted bug)",
           .bound = BOUND, .setup = SETUP, .threads = {THREADS}, .args = {(void *)0, (void *)1, (void *)2}, .finish = finish, .expect = "assertion");
#else
VRF_CLIENT(.name = "treiber", .about = "correct Treiber stack: no race, no lost or duplicated node",
           .bound = BOUND, .setup = SETUP, .threads = {THREADS}, .args = {(void *)0, (void *)1, (void *)2}, .finish = finish);
#endif
