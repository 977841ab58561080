/* Closed sibling tree of one root, on its per-granule records.
 *
 * Brief: "Backend: size-class-exact ranges" and "Metadata". Design, proofs and
 * worked examples: docs/design/backend.md ("Closed sibling trees", "Splitting",
 * "Merging", "Metadata encoding").
 *
 * A root of R granules (R a class; 1024 in jwmalloc, smaller in tests and in
 * model-checked clients) is a tree whose every node size is a range size class
 * and whose every run of contiguous siblings sums to a class. Its leaves are
 * the ranges (live or free). Nothing but the records (record.h) stores it:
 * parent, siblings and depth are computed from boundary levels and spans.
 *
 * Units: positions and sizes in granules relative to the root start.
 * Thread-safety: the caller owns the tree (the backend lock). Concurrent
 * lock-free readers (jw_pages_lookup) may read tags at any time; every tag
 * write here is a single atomic read-modify-write that keeps the other
 * fields, so such readers never see a torn head. Allocation-free.
 */
#ifndef JW_BACKEND_TREE_H
#define JW_BACKEND_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "../pages/record.h"
#include "size_class.h"

#define JW_TREE_NONE 0xffffffffu
/* Pieces a split can leave behind: the multi-step split takes at most 4 steps
 * over the whole class set (checked in tests/backend/test_size_class.c). */
#define JW_TREE_MAX_PIECES 8
/* Children of one node: at most 8 sizes form a closed list (eight 1s). */
#define JW_TREE_MAX_CHILDREN 8

typedef struct jw_tree {
  jw_rec *rec;       /* R records, one per granule */
  uint32_t granules; /* R: root size, a class */
} jw_tree;

typedef struct jw_tree_piece {
  uint32_t pos, granules;
} jw_tree_piece;

/* Relaxed: the caller owns the tree; lock-free readers only need single-word
 * atomicity (see header comment). */
static inline uint32_t jw_tree_tag(const jw_tree *t, uint32_t g) {
  return jw_load(&t->rec[g].tag, JW_RELAXED);
}

/* Changes the bits `clear` to `set` in the tag of granule g (jw_rec_update). */
static inline void jw_tree_tag_update(const jw_tree *t, uint32_t g, uint32_t clear, uint32_t set) {
  jw_rec_update(&t->rec[g], clear, set);
}

/* Boundary level at position b (0..R): 0 at the root's two ends. */
static inline unsigned jw_tree_level(const jw_tree *t, uint32_t b) {
  return b == 0 || b >= t->granules ? 0 : jw_tag_level(jw_tree_tag(t, b));
}

/* Size in granules of the leaf whose head is at g. */
static inline uint32_t jw_tree_leaf_granules(const jw_tree *t, uint32_t g) {
  return jw_class_granules[jw_tag_class(jw_tree_tag(t, g))];
}

/* Depth of the leaf [g, g+n): 0 for a leaf that is the whole root. */
static inline unsigned jw_tree_depth(const jw_tree *t, uint32_t g, uint32_t n) {
  unsigned a = jw_tree_level(t, g), b = jw_tree_level(t, g + n);
  return a > b ? a : b;
}

/* Makes the all-zero records of a fresh root one leaf covering the root, with
 * head state `state` and zeroed flag `zeroed`. */
void jw_tree_init(const jw_tree *t, unsigned state, unsigned zeroed);

/* Head of the sibling leaf left / right of the leaf [g, g+n), or JW_TREE_NONE
 * when that side has no sibling (the root has none at all; a first child none
 * on the left, a last child none on the right) or the sibling is an internal
 * node. The caller checks the sibling's state. */
uint32_t jw_tree_left_leaf(const jw_tree *t, uint32_t g, uint32_t n);
uint32_t jw_tree_right_leaf(const jw_tree *t, uint32_t g, uint32_t n);

/* Merges two adjacent sibling leaves, heads a < b, into one leaf at a that
 * keeps a's state; zeroed is the AND of both. Closure makes the sum a class.
 * Record b becomes all-zero. Returns the merged size. */
uint32_t jw_tree_join(const jw_tree *t, uint32_t a, uint32_t b);

/* On-demand coalescing of the free leaf at g (size *n): while a sibling leaf
 * on either side is free in a list or a bitmap (jw_state_mergeable),
 * absorb(ctx, pos, tag) takes it out of there and, when it returns nonzero,
 * the two merge (jw_tree_join); absorb returns 0 when it could not take the
 * sibling (a bitmap range claimed by an allocation first: backend/fast.h),
 * and that side does not merge. `tag` is the one read of the sibling's head
 * that found it a leaf of the sibling's size and free: a bitmap sibling may
 * be taken and re-split without the lock meanwhile, so absorb claims by that
 * tag's class, never by a later read (backend.md 7a, "claim"). Returns the
 * merged leaf's head; *n receives its size and *merges (if not NULL) is
 * increased per merge. */
typedef int (*jw_tree_absorb_fn)(void *ctx, uint32_t pos, uint32_t tag);
uint32_t jw_tree_coalesce(const jw_tree *t, uint32_t g, uint32_t *n, jw_tree_absorb_fn absorb, void *ctx,
                          uint64_t *merges);

/* Carves class size c out of the leaf at g (size s > c): the size-friendly
 * multi-step split. Each step cuts the piece jw_class_split_piece() names and
 * makes the two parts siblings of the leaf's own siblings when the parent's
 * list stays closed ("flattened"), else children of the leaf ("nested").
 * The carved leaf's head gets `carved_state`; every remainder keeps the
 * leaf's state and zeroed flag and is written to pieces[] (at most
 * JW_TREE_MAX_PIECES), *npieces set. Returns the carved leaf's position. */
uint32_t jw_tree_split(const jw_tree *t, uint32_t g, uint32_t c, unsigned carved_state,
                       jw_tree_piece *pieces, unsigned *npieces);

/* The same split with every step nested: the pieces become children of the
 * leaf, so every record written lies inside [g, g + size of the leaf) and the
 * parent's sibling list is untouched. The lock-free subdivision of a range
 * owned by the caller uses it (docs/design/backend.md, section 7a). */
uint32_t jw_tree_split_nested(const jw_tree *t, uint32_t g, uint32_t c, unsigned carved_state,
                              jw_tree_piece *pieces, unsigned *npieces);

/* Full invariant check of the tree (docs/design/backend.md, "Invariants"):
 * record format, boundary levels, spans, every node a class, at least two
 * children per internal node, closure of every sibling list, and (when
 * `maximal` is set) no two adjacent sibling leaves both free in lists.
 * Returns 0, or -1 with a one-line reason in err. O(R x depth). */
int jw_tree_check(const jw_tree *t, int maximal, char *err, size_t cap);

/* One line per leaf ("pos+size:state@depth") into buf, for failure messages. */
size_t jw_tree_dump(const jw_tree *t, char *buf, size_t cap);

#endif
