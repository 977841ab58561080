/* See tree.h. */
#include "tree.h"

#include "../common/log.h"
#include "../common/test_hooks.h"

static inline unsigned cls(uint32_t n) { return jw_class_index(n); }
static inline uint32_t gran(unsigned c) { return jw_class_granules[c]; }

void jw_tree_init(const jw_tree *t, unsigned state, unsigned zeroed) {
  unsigned rc = cls(t->granules);
  /* Relaxed: a fresh root is published later by the root map's release. */
  jw_store(&t->rec[0].next, 0, JW_RELAXED);
  jw_store(&t->rec[0].prev, 0, JW_RELAXED);
  jw_store(&t->rec[0].tag, jw_tag_head(state, zeroed, rc) | jw_tag_boundary(0, 0, rc), JW_RELAXED);
}

/* The sibling leaves of the leaf [g, g+n) at depth d >= 1 (see tree.h).
 * *stag receives the sibling head's tag: the one read that found the sibling
 * to be a leaf, so that a caller deciding on its state decides on the leaf it
 * tested (jw_tree_coalesce: a bitmap sibling may be taken and re-split by a
 * lock-free allocation between two reads). */
static inline uint32_t left_leaf_at(const jw_tree *t, uint32_t g, unsigned d, uint32_t *stag) {
  uint32_t tag = jw_tree_tag(t, g);
  if (g == 0 || jw_tag_level(tag) != d) return JW_TREE_NONE; /* first child */
  uint32_t ln = gran(jw_tag_spanl(tag));
  uint32_t ls = g - ln;
  /* The record at ls heads the sibling's first leaf; same size: a leaf. */
  *stag = jw_tree_tag(t, ls);
  return gran(jw_tag_class(*stag)) == ln ? ls : JW_TREE_NONE;
}

static inline uint32_t right_leaf_at(const jw_tree *t, uint32_t g, uint32_t n, unsigned d, uint32_t *stag) {
  uint32_t e = g + n;
  if (e >= t->granules) return JW_TREE_NONE; /* last child */
  uint32_t tag = *stag = jw_tree_tag(t, e);
  if (jw_tag_level(tag) != d) return JW_TREE_NONE;
  return gran(jw_tag_class(tag)) == gran(jw_tag_spanr(tag)) ? e : JW_TREE_NONE;
}

uint32_t jw_tree_left_leaf(const jw_tree *t, uint32_t g, uint32_t n) {
  unsigned d = jw_tree_depth(t, g, n);
  uint32_t tag;
  /* The root (depth 0) has no sibling: never read a span at position 0. */
  return d == 0 ? JW_TREE_NONE : left_leaf_at(t, g, d, &tag);
}

uint32_t jw_tree_right_leaf(const jw_tree *t, uint32_t g, uint32_t n) {
  unsigned d = jw_tree_depth(t, g, n);
  uint32_t tag;
  return d == 0 ? JW_TREE_NONE : right_leaf_at(t, g, n, d, &tag); /* the root has no sibling */
}

uint32_t jw_tree_join(const jw_tree *t, uint32_t a, uint32_t b) {
  uint32_t ta = jw_tree_tag(t, a), tb = jw_tree_tag(t, b);
  unsigned d = jw_tag_level(tb); /* b is the boundary between the two siblings */
  uint32_t n = gran(jw_tag_class(ta)) + gran(jw_tag_class(tb));
  unsigned c = cls(n);
  /* b's granule becomes an interior one first, so that a lock-free lookup
   * never sees two heads claiming it. */
  jw_store(&t->rec[b].tag, 0, JW_RELAXED);
  jw_store(&t->rec[b].next, 0, JW_RELAXED);
  jw_store(&t->rec[b].prev, 0, JW_RELAXED);
  uint32_t clear = JW_REC_CLASS_MASK | JW_REC_FREE_FLAGS;
  uint32_t set = ((uint32_t)c << JW_REC_CLASS_SHIFT) |
                 ((uint32_t)(jw_tag_zeroed(ta) & jw_tag_zeroed(tb)) << JW_REC_ZEROED_SHIFT) |
                 ((ta | tb) & JW_REC_GIVEN_BACK_MASK);
  /* Spans name the sibling nodes on each side; a merge that leaves other
   * siblings updates the two boundaries around the merged node. A merge of
   * the last two siblings makes the leaf the parent itself, whose spans at
   * a and at the end already hold its size. */
  if (jw_tag_level(ta) == d && a != 0) {
    clear |= JW_REC_SPANR_MASK;
    set |= (uint32_t)c << JW_REC_SPANR_SHIFT;
  }
  jw_tree_tag_update(t, a, clear, set);
  uint32_t e = a + n;
  if (e < t->granules && jw_tree_level(t, e) == d)
    jw_tree_tag_update(t, e, JW_REC_SPANL_MASK, (uint32_t)c << JW_REC_SPANL_SHIFT);
  return n;
}

/* A sibling leaf's head, read once, is free in a list or a bitmap. The test
 * point stands for the merging lock holder preempted between that read and
 * the claim (tests/backend/test_merge_claim.c). */
static inline int mergeable_sibling(uint32_t tag) {
  if (!jw_state_mergeable(jw_tag_state(tag))) return 0;
  JW_TEST_POINT(JW_TP_BE_SIBLING);
  return 1;
}

uint32_t jw_tree_coalesce(const jw_tree *t, uint32_t g, uint32_t *n, jw_tree_absorb_fn absorb, void *ctx,
                          uint64_t *merges) {
  uint32_t sz = *n;
  for (;;) {
    /* Depth once per step for both sides; the root (depth 0) has no sibling. */
    unsigned d = jw_tree_depth(t, g, sz);
    if (d == 0) break;
    /* One read of the sibling's head decides that it is a leaf of the
     * sibling's size, that it is free, and which class's bitmap a claim
     * scans (tree.h): a claim of that class's slot succeeds only for this
     * very leaf. */
    uint32_t tag = 0, s = left_leaf_at(t, g, d, &tag);
    if (s != JW_TREE_NONE && mergeable_sibling(tag) && absorb(ctx, s, tag)) {
      sz = jw_tree_join(t, s, g);
      g = s;
    } else if ((s = right_leaf_at(t, g, sz, d, &tag)) != JW_TREE_NONE && mergeable_sibling(tag) &&
               absorb(ctx, s, tag)) {
      sz = jw_tree_join(t, g, s);
    } else {
      break;
    }
    if (merges) (*merges)++;
  }
  *n = sz;
  return g;
}

/* Sizes of the siblings of node [g, g+n) at depth d >= 1, walking outwards
 * from it: left[] nearest first via span_l, right[] via span_r. */
static unsigned siblings_left(const jw_tree *t, uint32_t g, unsigned d, uint32_t *out, unsigned cap) {
  unsigned k = 0;
  uint32_t b = g;
  while (b > 0 && k < cap) {
    uint32_t tag = jw_tree_tag(t, b);
    if (jw_tag_level(tag) != d) break;
    uint32_t w = gran(jw_tag_spanl(tag));
    out[k++] = w;
    b -= w;
  }
  return k;
}

static unsigned siblings_right(const jw_tree *t, uint32_t e, unsigned d, uint32_t *out, unsigned cap) {
  unsigned k = 0;
  uint32_t b = e;
  while (b < t->granules && k < cap) {
    uint32_t tag = jw_tree_tag(t, b);
    if (jw_tag_level(tag) != d) break;
    uint32_t w = gran(jw_tag_spanr(tag));
    out[k++] = w;
    b += w;
  }
  return k;
}

/* Would replacing node [g, g+n) (depth d >= 1) by the pieces [p, q] keep its
 * parent's sibling list closed? The list was closed, so only runs that end
 * in p or start in q are new: O(children) class tests. */
static int closed_after(const jw_tree *t, uint32_t g, uint32_t n, unsigned d, uint32_t p, uint32_t q) {
  uint32_t l[JW_TREE_MAX_CHILDREN], r[JW_TREE_MAX_CHILDREN];
  unsigned nl = siblings_left(t, g, d, l, JW_TREE_MAX_CHILDREN);
  unsigned nr = siblings_right(t, g + n, d, r, JW_TREE_MAX_CHILDREN);
  if (nl + nr + 2 > JW_TREE_MAX_CHILDREN) return 0;
  uint32_t s = p;
  for (unsigned i = 0; i < nl; i++)
    if (!jw_is_class(s += l[i])) return 0;
  s = q;
  for (unsigned i = 0; i < nr; i++)
    if (!jw_is_class(s += r[i])) return 0;
  return 1;
}

#ifndef JW_MUTATE_ROOT_SIBLING
#define HAS_PARENT(d) ((d) > 0) /* the root has no parent to flatten into */
#else /* planted bug (docs/design/verification.md): the root treated as a node with siblings */
#define HAS_PARENT(d) 1
#endif

static uint32_t split(const jw_tree *t, uint32_t g, uint32_t c, unsigned carved_state, jw_tree_piece *pieces,
                      unsigned *npieces, int nest_only) {
  uint32_t tag0 = jw_tree_tag(t, g);
  unsigned st = jw_tag_state(tag0), z = jw_tag_zeroed(tag0);
  uint32_t given_back = tag0 & JW_REC_GIVEN_BACK_MASK;
  uint32_t pos = g, sz = gran(jw_tag_class(tag0));
  unsigned k = 0;
  while (sz != c && k < JW_TREE_MAX_PIECES) {
    uint32_t a = jw_class_split_piece(sz, c), r = sz - a;
    unsigned d = jw_tree_depth(t, pos, sz);
    int flat = 0, a_first = 1;
    if (HAS_PARENT(d) && !nest_only) {
      if (closed_after(t, pos, sz, d, a, r))
        flat = 1;
      else if (closed_after(t, pos, sz, d, r, a))
        flat = 1, a_first = 0;
    }
    unsigned lvl = flat ? d : d + 1;
    uint32_t p = a_first ? a : r, q = sz - p, m = pos + p;
    unsigned cp = cls(p), cq = cls(q);
    /* Record m lies inside a free leaf, so it is all-zero and nobody else
     * writes it: a plain atomic store. */
    jw_store(&t->rec[m].tag, jw_tag_head(st, z, cq) | jw_tag_boundary(lvl, cp, cq) | given_back, JW_RELAXED);
    uint32_t clear = JW_REC_CLASS_MASK, set = (uint32_t)cp << JW_REC_CLASS_SHIFT;
    if (flat && pos != 0 && jw_tree_level(t, pos) == d) {
      clear |= JW_REC_SPANR_MASK;
      set |= (uint32_t)cp << JW_REC_SPANR_SHIFT;
    }
    jw_tree_tag_update(t, pos, clear, set);
    uint32_t e = pos + sz;
    if (flat && e < t->granules && jw_tree_level(t, e) == d)
      jw_tree_tag_update(t, e, JW_REC_SPANL_MASK, (uint32_t)cq << JW_REC_SPANL_SHIFT);
    if (a_first) {
      pieces[k++] = (jw_tree_piece){m, r};
    } else {
      pieces[k++] = (jw_tree_piece){pos, r};
      pos = m;
    }
    sz = a;
  }
  jw_tree_tag_update(t, pos, JW_REC_STATE_MASK | JW_REC_FREE_FLAGS, carved_state);
  *npieces = k;
  return pos;
}

uint32_t jw_tree_split(const jw_tree *t, uint32_t g, uint32_t c, unsigned carved_state,
                       jw_tree_piece *pieces, unsigned *npieces) {
  return split(t, g, c, carved_state, pieces, npieces, 0);
}

uint32_t jw_tree_split_nested(const jw_tree *t, uint32_t g, uint32_t c, unsigned carved_state,
                              jw_tree_piece *pieces, unsigned *npieces) {
  return split(t, g, c, carved_state, pieces, npieces, 1);
}

/* ---- invariant check ---------------------------------------------------- */

#define FAIL(...)                        \
  do {                                   \
    if (cap) jw_format(err, cap, __VA_ARGS__); \
    return -1;                           \
  } while (0)

static int check_records(const jw_tree *t, char *err, size_t cap) {
  uint32_t R = t->granules;
  for (uint32_t g = 0; g < R;) {
    uint32_t tag = jw_tree_tag(t, g);
    unsigned st = jw_tag_state(tag), c = jw_tag_class(tag);
    if (!jw_state_is_head(st)) FAIL("granule %u: expected a range head, tag %x", g, tag);
    if (st > JW_RS_DEFERRED_FREE)
      FAIL("granule %u: state %u not used by this backend", g, st);
    if (c >= JW_NCLASSES) FAIL("granule %u: class index %u", g, c);
    uint32_t n = gran(c);
    if (g + n > R) FAIL("range %u+%u passes the root end %u", g, n, R);
    if ((tag & JW_REC_FREE_FLAGS) && !jw_state_is_free(st))
      FAIL("granule %u: zeroed or given-back flag on a non-free range", g);
    if (tag >> (JW_REC_GIVEN_BACK_SHIFT + 1)) FAIL("granule %u: unused tag bits set: %x", g, tag);
    if (g == 0) {
      if (jw_tag_level(tag) != 0 || jw_tag_spanl(tag) != 0 || jw_tag_spanr(tag) != cls(R))
        FAIL("granule 0: root boundary fields %x", tag);
    } else if (jw_tag_level(tag) < 1 || jw_tag_level(tag) > JW_REC_MAX_LEVEL) {
      FAIL("granule %u: head with boundary level %u", g, jw_tag_level(tag));
    }
    int interior_all = st == JW_RS_LIVE_SMALL || st == JW_RS_LIVE_MID;
    /* A live large range's owner may mark interior records (jw_pages_mark_interior)
     * while another thread checks this root: it marks the head first, but this
     * check may have read the head before. Records with the right offset are
     * therefore accepted under an unmarked live large head too. */
    int interior_some = st == JW_RS_LIVE_LARGE || st == JW_RS_LIVE_LARGE_MARKED || jw_state_is_deferred(st);
    for (uint32_t i = g + 1; i < g + n; i++) {
      uint32_t ti = jw_tree_tag(t, i);
      int is_int = jw_tag_state(ti) == JW_RS_INTERIOR && jw_tag_offset(ti) == i - g &&
                   (ti >> (JW_REC_OFFSET_SHIFT + 10)) == 0;
      if (interior_all && !is_int) FAIL("granule %u in slab %u+%u: interior record %x", i, g, n, ti);
      if (!interior_all && ti != 0 && !(interior_some && is_int))
        FAIL("granule %u inside range %u+%u (state %u): stray record %x", i, g, n, st, ti);
    }
    g += n;
  }
  return 0;
}

/* Node [a, b) at depth d: its inner boundaries must start at level d+1 and
 * cut it into at least two children whose every contiguous run is a class. */
static int check_node(const jw_tree *t, uint32_t a, uint32_t b, unsigned d, int maximal, char *err,
                      size_t cap) {
  unsigned minlvl = JW_REC_MAX_LEVEL + 1;
  for (uint32_t h = a + jw_tree_leaf_granules(t, a); h < b; h += jw_tree_leaf_granules(t, h)) {
    unsigned l = jw_tree_level(t, h);
    if (l < minlvl) minlvl = l;
  }
  if (minlvl > JW_REC_MAX_LEVEL) return 0; /* a leaf: the head at a spans it (records pass) */
  if (minlvl != d + 1) FAIL("node %u+%u at depth %u: inner boundary at level %u", a, b - a, d, minlvl);
  uint32_t start[JW_NCLASSES + 1], size[JW_NCLASSES + 1];
  unsigned k = 0;
  uint32_t cs = a;
  for (uint32_t h = a + jw_tree_leaf_granules(t, a);; h += jw_tree_leaf_granules(t, h)) {
    if (h < b && jw_tree_level(t, h) != d + 1) continue;
    if (k >= JW_TREE_MAX_CHILDREN) FAIL("node %u+%u: more than %d children", a, b - a, JW_TREE_MAX_CHILDREN);
    start[k] = cs;
    size[k] = h - cs;
    if (!jw_is_class(size[k])) FAIL("node %u+%u: child %u+%u is not a class", a, b - a, cs, size[k]);
    if (k > 0) {
      uint32_t tag = jw_tree_tag(t, cs);
      if (gran(jw_tag_spanl(tag)) != size[k - 1] || gran(jw_tag_spanr(tag)) != size[k])
        FAIL("boundary %u: spans %u|%u, children %u|%u", cs, gran(jw_tag_spanl(tag)),
             gran(jw_tag_spanr(tag)), size[k - 1], size[k]);
    }
    k++;
    cs = h;
    if (h >= b) break;
  }
  for (unsigned i = 0; i < k; i++) {
    uint32_t s = 0;
    for (unsigned j = i; j < k; j++)
      if (!jw_is_class(s += size[j]))
        FAIL("node %u+%u: siblings %u..%u sum to %u, not a class", a, b - a, i, j, s);
  }
  for (unsigned i = 0; i < k; i++) {
    int leaf = jw_tree_leaf_granules(t, start[i]) == size[i];
    if (maximal && leaf && i + 1 < k && jw_tree_leaf_granules(t, start[i + 1]) == size[i + 1] &&
        jw_state_in_list(jw_tag_state(jw_tree_tag(t, start[i]))) &&
        jw_state_in_list(jw_tag_state(jw_tree_tag(t, start[i + 1]))))
      FAIL("free sibling leaves %u+%u and %u+%u not merged", start[i], size[i], start[i + 1], size[i + 1]);
    if (!leaf && check_node(t, start[i], start[i] + size[i], d + 1, maximal, err, cap) != 0) return -1;
  }
  return 0;
}

int jw_tree_check(const jw_tree *t, int maximal, char *err, size_t cap) {
  if (cap) err[0] = 0;
  if (!jw_is_class(t->granules)) FAIL("root of %u granules is not a class", t->granules);
  if (check_records(t, err, cap) != 0) return -1;
  return check_node(t, 0, t->granules, 0, maximal, err, cap);
}

size_t jw_tree_dump(const jw_tree *t, char *buf, size_t cap) {
  static const char *const names[] = {"none", "int", "small", "mid", "large", "large+", "deferred",
                                      "busy", "fast", "free0", "free1", "released", "deferred-aged"};
  size_t len = 0;
  if (cap) buf[0] = 0;
  for (uint32_t g = 0; g < t->granules && len + 1 < cap;) {
    uint32_t tag = jw_tree_tag(t, g);
    uint32_t n = gran(jw_tag_class(tag) < JW_NCLASSES ? jw_tag_class(tag) : 0);
    unsigned st = jw_tag_state(tag);
    len += jw_format(buf + len, cap - len, "%u+%u:%s%s%s@%u ", g, n, st < sizeof names / sizeof names[0] ? names[st] : "?",
                     jw_tag_zeroed(tag) ? "z" : "", jw_tag_given_back(tag) ? "g" : "", jw_tree_depth(t, g, n));
    g += n ? n : 1;
  }
  return len;
}
