/* The root-grouped queue of partial slabs (pages/root_queue.h) against a
 * plain model: random adds and removals of arbitrary members (and of the
 * head, as a refill does). After every operation the whole list is walked:
 * keys (address >> shift) never decrease, nodes of one key are in the order
 * they were added, each run's first and last node name each other, the list
 * holds exactly the members, and the head is the oldest member of the lowest
 * key. Nodes are 24 bytes and the test's shift is 7, so a "root" holds about
 * five nodes and runs are joined, split and emptied all the time.
 * Deterministic (fixed seed). */
#include "pages/root_queue.h"

#include <stdint.h>
#include <string.h>

#include "check.h"

#define N 512
#define SHIFT 7
static jw_rq_node node[N];
static unsigned long seq[N]; /* when the member was added; 0: not a member */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t next_rand(void) {
  rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
  return rng;
}

static void check_list(jw_rq_node *q, unsigned members, long op) {
  unsigned count = 0;
  jw_rq_node *first = NULL;
  for (jw_rq_node *n = q, *prev = NULL; n; prev = n, n = n->next) {
    size_t i = (size_t)(n - node);
    CHECK(seq[i] != 0, "op %ld: node %zu listed but not a member", op, i);
    CHECK(n->prev == prev, "op %ld: node %zu: back link", op, i);
    int starts = prev == NULL || jw_rq_key(prev, SHIFT) != jw_rq_key(n, SHIFT);
    if (prev && !starts) CHECK(seq[prev - node] < seq[i], "op %ld: node %zu out of order in its run", op, i);
    if (prev && starts) CHECK(jw_rq_key(prev, SHIFT) < jw_rq_key(n, SHIFT), "op %ld: runs out of order", op);
    if (starts) first = n;
    int ends = n->next == NULL || jw_rq_key(n->next, SHIFT) != jw_rq_key(n, SHIFT);
    if (ends) CHECK(first->group == n && n->group == first, "op %ld: run of node %zu: group links", op, i);
    count++;
  }
  CHECK(count == members, "op %ld: %u listed, %u members", op, count, members);
  /* The head: the oldest member of the lowest key. */
  size_t want = N;
  for (size_t i = 0; i < N; i++)
    if (seq[i] && (want == N || jw_rq_key(&node[i], SHIFT) < jw_rq_key(&node[want], SHIFT) ||
                   (jw_rq_key(&node[i], SHIFT) == jw_rq_key(&node[want], SHIFT) && seq[i] < seq[want])))
      want = i;
  CHECK((want == N && q == NULL) || (q && (size_t)(q - node) == want), "op %ld: head %td, want %zu", op,
        q ? q - node : -1, want);
}

/* Roots are mapped top-down (os/os_mem.c): of two roots either side of a
 * 16 GiB boundary the higher is the older and ranks first, in jw_root_rank
 * and in the queue's keys. The nodes are only addresses, never touched. */
static void check_region_boundary(void) {
#if UINTPTR_MAX > 0xffffffffu
  uintptr_t boundary = (uintptr_t)0x7f04 << 32; /* a multiple of 16 GiB */
#else
  uintptr_t boundary = (uintptr_t)1 << 31;
#endif
  uintptr_t older = boundary, younger = boundary - JW_ROOT;
  CHECK(jw_root_rank((void *)older) < jw_root_rank((void *)younger), "root rank: across a 16 GiB boundary the older (higher) root ranks first");
  CHECK(jw_rq_key((jw_rq_node *)older, JW_ROOT_SHIFT) < jw_rq_key((jw_rq_node *)younger, JW_ROOT_SHIFT),
        "queue key: across a 16 GiB boundary the older (higher) root comes first");
  CHECK(jw_root_rank((void *)(older + JW_ROOT)) < jw_root_rank((void *)older), "root rank: within a region, higher first");
}

int main(void) {
  check_region_boundary();
  jw_rq_node *q = NULL;
  unsigned members = 0;
  unsigned long clock = 0;
  const long ops = 300000;
  for (long op = 0; op < ops; op++) {
    size_t i = (size_t)(next_rand() % N);
    unsigned kind = (unsigned)(next_rand() % 4);
    if (!seq[i] && kind != 0) {
      jw_rq_add(&q, &node[i], SHIFT);
      seq[i] = ++clock, members++;
    } else if (seq[i]) {
      jw_rq_remove(&q, &node[i], SHIFT);
      seq[i] = 0, members--;
    } else if (q) { /* a refill takes the head */
      size_t h = (size_t)(q - node);
      jw_rq_remove(&q, q, SHIFT);
      seq[h] = 0, members--;
    }
    check_list(q, members, op);
    if (test_failures()) return 1;
  }
  printf("root_queue: %ld operations, head always the oldest of the lowest root\n", ops);
  return 0;
}
