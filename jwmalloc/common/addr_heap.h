/* An intrusive pairing heap ordered by address: the lowest node first.
 *
 * Brief: "Backend" (low roots drain last, so high roots can go back whole);
 * the placement decision is in docs/design/frontend.md, "Placement", and
 * docs/design/midend.md. The frontend's partial slabs (per thread and class)
 * and the midend's (per class) are kept in one such heap each, with the node
 * embedded in the slab header at a fixed offset: comparing node addresses
 * compares slab addresses, and an address order is the backend's range-id
 * order within a 16 GiB region (backend.md section 5), so every tier prefers
 * the same roots.
 *
 * Costs (n nodes): insert O(1), minimum O(1), pop and remove O(log n)
 * amortized, no allocation, three pointers per node; used only on slow paths
 * (refill, park, slab emptied), never on a malloc or free fast path.
 *
 * Thread-safety: none; the caller's owner rule or lock guards the heap.
 */
#ifndef JW_COMMON_ADDR_HEAP_H
#define JW_COMMON_ADDR_HEAP_H

#include <stddef.h>

typedef struct jw_heap_node {
  struct jw_heap_node *child; /* first child (every child is above this node) */
  struct jw_heap_node *next;  /* next sibling */
  struct jw_heap_node *prev;  /* previous sibling, or the parent for a first child; NULL for the root */
} jw_heap_node;

/* Two roots (prev and next NULL) into one; returns the lower. */
static inline jw_heap_node *jw_heap_meld(jw_heap_node *a, jw_heap_node *b) {
  if (a == NULL) return b;
  if (b == NULL) return a;
  if (b < a) {
    jw_heap_node *t = a;
    a = b;
    b = t;
  }
  b->prev = a;
  b->next = a->child;
  if (a->child) a->child->prev = b;
  a->child = b;
  return a;
}

/* The two-pass pairing of a sibling list (the children of a removed node)
 * into one root. */
static inline jw_heap_node *jw_heap_pair(jw_heap_node *n) {
  jw_heap_node *acc = NULL; /* paired roots, linked by next, last pair first */
  while (n) {
    jw_heap_node *a = n, *b = n->next;
    n = b ? b->next : NULL;
    a->next = a->prev = NULL;
    if (b) b->next = b->prev = NULL;
    jw_heap_node *m = jw_heap_meld(a, b);
    m->next = acc;
    acc = m;
  }
  jw_heap_node *root = NULL;
  while (acc) {
    jw_heap_node *nx = acc->next;
    acc->next = NULL;
    root = jw_heap_meld(root, acc);
    acc = nx;
  }
  return root;
}

/* Adds n (not in any heap) to the heap rooted at *h. */
static inline void jw_heap_insert(jw_heap_node **h, jw_heap_node *n) {
  n->child = n->next = n->prev = NULL;
  *h = jw_heap_meld(*h, n);
}

/* Removes n (in the heap rooted at *h) from it. */
static inline void jw_heap_remove(jw_heap_node **h, jw_heap_node *n) {
  jw_heap_node *sub = jw_heap_pair(n->child);
  if (n == *h) {
    *h = sub;
  } else {
    if (n->prev->child == n) n->prev->child = n->next; /* first child: prev is the parent */
    else n->prev->next = n->next;
    if (n->next) n->next->prev = n->prev;
    *h = jw_heap_meld(*h, sub);
  }
  n->child = n->next = n->prev = NULL;
}

#endif
