/* A queue of slabs grouped by root, lowest root first: the partial slabs of
 * a frontend class (per thread) and of a midend class.
 *
 * Brief: "Backend" (roots go back whole); the placement decision is in
 * docs/design/frontend.md, "Placement", and docs/design/midend.md. The list
 * holds one run of nodes per root (address >> shift; the tiers pass
 * JW_ROOT_SHIFT, 4 MiB), runs in root rank order (jw_root_rank: the oldest
 * root, the highest address, first), and within a run nodes in the order
 * they were added. The head, what a refill takes, is therefore the slab of
 * the oldest root that waited longest (the one with the most blocks freed
 * into it). The rank agrees with the backend's range-id rank (backend.md
 * section 7b, "Root order"), so every tier prefers the roots the backend
 * prefers.
 *
 * The first node of a run points at its last (`group`) and the last at the
 * first, so a run is joined or left in O(1); adding a node walks the runs
 * below its root (O(roots holding such slabs), usually a few; never on a
 * malloc or free fast path: only refill, park and slab-emptied paths).
 *
 * Thread-safety: none; the caller's owner rule or lock guards the queue.
 */
#ifndef JW_PAGES_ROOT_QUEUE_H
#define JW_PAGES_ROOT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "page_source.h"

/* The shift a queue takes now: placement on (jw_place_on: the option, or the
 * reclaimer's switch under JWMALLOC_PLACEMENT=auto) groups by root
 * (root_shift); off gives 63, which the tiers take to mean their plain queue
 * (the frontend's first-in first-out jw_fifo_*, below; the midend's stack).
 * A queue's structure changes only when its guard converts it
 * (jw_rq_requeue): the switch may come at any time, a queue keeps the mode it
 * was built in until then (backend.md 7b, "Placement on demand"). */
static inline unsigned jw_rq_shift(unsigned root_shift) { return jw_place_on() ? root_shift : 63; }

typedef struct jw_rq_node {
  struct jw_rq_node *next, *prev;
  struct jw_rq_node *group; /* first node of a run: its last; last node: its first; others: unused */
} jw_rq_node;

static inline uintptr_t jw_rq_key(const jw_rq_node *n, unsigned shift) { return ~((uintptr_t)n >> shift); /* jw_root_rank */ }

/* Adds n (in no queue) at the end of its root's run in *q. */
static inline void jw_rq_add(jw_rq_node **q, jw_rq_node *n, unsigned shift) {
  uintptr_t k = jw_rq_key(n, shift);
  jw_rq_node *g = *q, *before = NULL; /* g: first node of a run; before: last node of the run below */
  while (g && jw_rq_key(g, shift) < k) {
    before = g->group;
    g = before->next;
  }
  if (g && jw_rq_key(g, shift) == k) { /* join the run, at its end */
    jw_rq_node *last = g->group;
    n->next = last->next;
    n->prev = last;
    if (last->next) last->next->prev = n;
    last->next = n;
    g->group = n;
    n->group = g;
  } else { /* a new run between `before` and g */
    n->prev = before;
    n->next = g;
    if (g) g->prev = n;
    if (before) before->next = n;
    else *q = n;
    n->group = n;
  }
}

/* Removes n (in *q) from it. */
static inline void jw_rq_remove(jw_rq_node **q, jw_rq_node *n, unsigned shift) {
  uintptr_t k = jw_rq_key(n, shift);
  int first = n->prev == NULL || jw_rq_key(n->prev, shift) != k;
  int last = n->next == NULL || jw_rq_key(n->next, shift) != k;
  if (first && !last) { /* the next node starts the run */
    n->next->group = n->group;
    n->group->group = n->next;
  } else if (last && !first) { /* the previous node ends the run */
    n->prev->group = n->group;
    n->group->group = n->prev;
  }
  if (n->prev) n->prev->next = n->next;
  else *q = n->next;
  if (n->next) n->next->prev = n->prev;
  n->next = n->prev = n->group = NULL;
}

/* With placement off (jw_rq_shift gave 63) the tiers keep the same nodes in
 * a plain first-in first-out queue instead, as cheap as before placement
 * existed: the head's prev names the tail, next links run head to tail. */
static inline void jw_fifo_add(jw_rq_node **q, jw_rq_node *n) {
  jw_rq_node *head = *q;
  n->next = NULL;
  if (head == NULL) {
    n->prev = n;
    *q = n;
  } else {
    jw_rq_node *tail = head->prev;
    tail->next = n;
    n->prev = tail;
    head->prev = n;
  }
}

static inline void jw_fifo_remove(jw_rq_node **q, jw_rq_node *n) {
  jw_rq_node *head = *q;
  if (n == head) {
    *q = n->next;
    if (n->next) n->next->prev = n->prev; /* the tail */
  } else {
    n->prev->next = n->next;
    if (n->next) n->next->prev = n->prev;
    else head->prev = n->prev; /* n was the tail */
  }
  n->next = n->prev = NULL;
}

/* Converts a queue to another mode: every node of *q is taken out (in each
 * mode the next links run from the head to the last node, NULL-terminated)
 * and added again, head first, with add(q, node, shift) (jw_rq_add, or the
 * tier's plain add, which ignores shift). O(nodes x runs); once per switch
 * per queue, by its guard. */
typedef void (*jw_rq_add_fn)(jw_rq_node **q, jw_rq_node *n, unsigned shift);
static inline void jw_rq_requeue(jw_rq_node **q, jw_rq_add_fn add, unsigned shift) {
  jw_rq_node *n = *q;
  *q = NULL;
  while (n) {
    jw_rq_node *next = n->next;
    n->next = n->prev = n->group = NULL;
    add(q, n, shift);
    n = next;
  }
}

/* Checks (JWMALLOC_CHECK=1, and tests): the queue's links agree and, in
 * root-grouped mode, runs are in increasing root order with their first
 * and last nodes pointing at each other; in plain mode (shift 63) the
 * head's prev is NULL (`fifo` 0: the midend's stack) or the last node
 * (`fifo` 1). Returns the node count, or -1 when broken. Never allocates. */
static inline long jw_rq_check(jw_rq_node *const *q, unsigned shift, int fifo) {
  const jw_rq_node *h = *q, *prev = NULL, *first = NULL;
  long n = 0;
  if (h == NULL) return 0;
  if (shift == 63 ? (fifo ? h->prev == NULL : h->prev != NULL) : h->prev != NULL) return -1;
  for (const jw_rq_node *x = h; x; prev = x, x = x->next, n++) {
    if (x != h && x->prev != prev) return -1;
    if (n > (1L << 30)) return -1; /* a cycle */
    if (shift == 63) continue;
    uintptr_t k = jw_rq_key(x, shift);
    if (first == NULL || jw_rq_key(first, shift) != k) { /* x starts a run */
      if (first && jw_rq_key(first, shift) > k) return -1;
      if (prev && prev != first->group) return -1; /* the run before ended at its last */
      first = x;
    }
    if (x->next == NULL || jw_rq_key(x->next, shift) != k) /* x ends its run */
      if (first->group != x || x->group != first) return -1;
  }
  if (shift == 63 && fifo && h->prev != prev) return -1;
  return n;
}

#endif
