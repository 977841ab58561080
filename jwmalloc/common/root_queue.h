/* A queue of slabs grouped by root, lowest root first: the partial slabs of
 * a frontend class (per thread) and of a midend class.
 *
 * Brief: "Backend" (roots go back whole); the placement decision is in
 * docs/design/frontend.md, "Placement", and docs/design/midend.md. The list
 * holds one run of nodes per root (address >> shift; the tiers pass
 * JW_ROOT_SHIFT, 4 MiB), runs in increasing root order, and within a run
 * nodes in the order they were added. The head, what a refill takes, is
 * therefore the slab of the lowest root that waited longest (the one with
 * the most blocks freed into it). Within a 16 GiB region the address order
 * of roots is the backend's range-id order (backend.md section 5), so every
 * tier prefers the roots the backend prefers.
 *
 * The first node of a run points at its last (`group`) and the last at the
 * first, so a run is joined or left in O(1); adding a node walks the runs
 * below its root (O(roots holding such slabs), usually a few; never on a
 * malloc or free fast path: only refill, park and slab-emptied paths).
 *
 * Thread-safety: none; the caller's owner rule or lock guards the queue.
 */
#ifndef JW_COMMON_ROOT_QUEUE_H
#define JW_COMMON_ROOT_QUEUE_H

#include <stddef.h>
#include <stdint.h>

#include "options.h"

/* The shift a queue that becomes non-empty now uses: JWMALLOC_PLACEMENT=1
 * groups by root (root_shift); 0 gives 63, which the tiers take to mean a
 * plain first-in first-out queue (jw_fifo_*, below). A queue keeps its mode
 * while it holds nodes (the option may change at run time; a queue's
 * structure must not). */
static inline unsigned jw_rq_shift(unsigned root_shift) { return jw_opt(JW_OPT_PLACEMENT) ? root_shift : 63; }

typedef struct jw_rq_node {
  struct jw_rq_node *next, *prev;
  struct jw_rq_node *group; /* first node of a run: its last; last node: its first; others: unused */
} jw_rq_node;

static inline uintptr_t jw_rq_key(const jw_rq_node *n, unsigned shift) { return (uintptr_t)n >> shift; }

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

#endif
