/* The address-ordered pairing heap (common/addr_heap.h) against a plain
 * model: random inserts, removals of arbitrary members and pops of the
 * minimum; after every operation the heap's root must be the lowest member
 * and, every 64 operations, a walk of the whole tree must find exactly the
 * members, each above its parent. Deterministic (fixed seed). */
#include "common/addr_heap.h"

#include <stdint.h>
#include <string.h>

#include "check.h"

#define N 512
static jw_heap_node node[N];
static unsigned char in[N];

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

/* Counts the nodes under n (n included), checking heap order and back links. */
static unsigned walk(jw_heap_node *n, jw_heap_node *parent) {
  unsigned count = 0;
  jw_heap_node *prev = parent;
  for (; n; prev = n, n = n->next) {
    CHECK(n->prev == prev, "node %td: back link", n - node);
    CHECK(parent == NULL || n > parent, "node %td below its parent %td", n - node, parent - node);
    CHECK(in[n - node], "node %td in the heap but not in the model", n - node);
    count += 1 + walk(n->child, n);
    if (parent == NULL) break; /* the root has no siblings */
  }
  return count;
}

int main(void) {
  jw_heap_node *h = NULL;
  unsigned members = 0;
  for (long op = 0; op < 400000; op++) {
    unsigned i = (unsigned)(next_rand() % N), kind = (unsigned)(next_rand() % 4);
    if (!in[i]) {
      jw_heap_insert(&h, &node[i]);
      in[i] = 1, members++;
    } else if (kind == 0 && h) {
      unsigned m = (unsigned)(h - node);
      jw_heap_remove(&h, h);
      in[m] = 0, members--;
    } else {
      jw_heap_remove(&h, &node[i]);
      in[i] = 0, members--;
    }
    unsigned lowest = N;
    for (unsigned k = 0; k < N && lowest == N; k++)
      if (in[k]) lowest = k;
    CHECK((lowest == N && h == NULL) || (h && (unsigned)(h - node) == lowest), "op %ld: root %td, lowest %u", op,
          h ? h - node : -1, lowest);
    if (op % 64 == 0) CHECK(walk(h, NULL) == members, "op %ld: the tree holds the wrong count", op);
    if (failures) return 1;
  }
  printf("addr_heap: 400000 operations, the root always the lowest member\n");
  return failures != 0;
}
