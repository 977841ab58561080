/* Closed sibling tree of one root (jwmalloc/backend/tree.h), on its own:
 * the worked examples of docs/design/backend.md, the named edge cases, a
 * random differential run against a page map on roots of several sizes (the
 * code is parametric in the root size, as the model checker uses it), and an
 * exhaustive exploration of every reachable state of roots up to 12 granules.
 * The full tree invariant is checked after every operation.
 *
 * Usage: test_backend_tree [RANDOM_OPS [EXHAUSTIVE_MAX_ROOT]] (20000, 12) */
#include <string.h>

#include "backend/tree.h"
#include "tb.h"

#define FREE JW_RS_FREE_BUF0
#define LIVE JW_RS_LIVE_LARGE

typedef struct root {
  jw_tree t;
  jw_rec rec[1024];
  uint8_t live[1024]; /* reference page map: 1 = granule in a live range */
} root;

static void root_init(root *r, uint32_t granules) {
  memset(r, 0, sizeof *r);
  r->t.rec = r->rec;
  r->t.granules = granules;
  jw_tree_init(&r->t, FREE, 1);
}

static const char *dump(root *r) {
  static char buf[16384];
  jw_tree_dump(&r->t, buf, sizeof buf);
  return buf;
}

static void check(root *r, const char *what) {
  char err[256];
  REQUIRE(jw_tree_check(&r->t, 1, err, sizeof err) == 0, "%s: %s\n  tree: %s", what, err, dump(r));
  /* Records against the page map. */
  for (uint32_t g = 0; g < r->t.granules;) {
    uint32_t tag = jw_tree_tag(&r->t, g), n = jw_tree_leaf_granules(&r->t, g);
    int live = jw_state_is_live(jw_tag_state(tag));
    for (uint32_t i = g; i < g + n; i++)
      REQUIRE(r->live[i] == live, "%s: granule %u live=%d, records say %d\n  tree: %s", what, i, r->live[i],
              live, dump(r));
    g += n;
  }
}

static int absorb_none(void *ctx, uint32_t pos, uint32_t tag) {
  (void)ctx, (void)pos, (void)tag;
  return 1; /* lists are the test's own: nothing to take out */
}

/* Smallest free leaf of class >= c; the pick-th one among equals. */
static uint32_t find_free(root *r, uint32_t c, uint32_t pick) {
  uint32_t best = JW_TREE_NONE, best_n = 0, seen = 0;
  for (uint32_t g = 0; g < r->t.granules; g += jw_tree_leaf_granules(&r->t, g)) {
    uint32_t n = jw_tree_leaf_granules(&r->t, g);
    if (!jw_state_in_list(jw_tag_state(jw_tree_tag(&r->t, g))) || n < c) continue;
    if (best == JW_TREE_NONE || n < best_n) best = g, best_n = n, seen = 0;
    if (n == best_n && seen++ <= pick) best = g;
  }
  return best;
}

static uint32_t tree_alloc(root *r, uint32_t c, uint32_t pick, unsigned *npieces) {
  uint32_t g = find_free(r, c, pick);
  if (g == JW_TREE_NONE) return g;
  jw_tree_piece pieces[JW_TREE_MAX_PIECES];
  unsigned np = 0;
  if (jw_tree_leaf_granules(&r->t, g) == c)
    jw_tree_tag_update(&r->t, g, JW_REC_STATE_MASK | JW_REC_ZEROED_MASK, LIVE);
  else
    g = jw_tree_split(&r->t, g, c, LIVE, pieces, &np);
  uint32_t sum = c;
  for (unsigned i = 0; i < np; i++) {
    sum += pieces[i].granules;
    CHECK(jw_is_class(pieces[i].granules), "remainder %u", pieces[i].granules);
    CHECK(jw_tree_leaf_granules(&r->t, pieces[i].pos) == pieces[i].granules, "piece record");
  }
  for (uint32_t i = g; i < g + c; i++) {
    REQUIRE(!r->live[i], "granule %u handed out twice", i);
    r->live[i] = 1;
  }
  if (npieces) *npieces = np;
  return g;
}

static uint64_t tree_free(root *r, uint32_t g) {
  uint32_t n = jw_tree_leaf_granules(&r->t, g);
  for (uint32_t i = g; i < g + n; i++) r->live[i] = 0;
  jw_tree_tag_update(&r->t, g, JW_REC_STATE_MASK, FREE);
  uint64_t merges = 0;
  jw_tree_coalesce(&r->t, g, &n, absorb_none, NULL, &merges);
  return merges;
}

static void expect(root *r, const char *want, const char *what) {
  CHECK(strcmp(dump(r), want) == 0, "%s\n  got:  %s\n  want: %s", what, dump(r), want);
}

/* docs/design/backend.md, worked examples 1-3. */
static void worked_examples(void) {
  root *r = calloc(1, sizeof *r);
  root_init(r, 1024);
  unsigned np;
  /* 1: 3 granules (12 KiB) from a fresh root: 1021 is not a class; the
   * multi-step split cuts 128 | 896, 16 | 112, 4 | 12, 3 | 1. */
  CHECK(tree_alloc(r, 3, 0, &np) == 0 && np == 4, "example 1");
  expect(r, "0+3:large@4 3+1:free0z@4 4+12:free0z@3 16+112:free0z@2 128+896:free0z@1 ", "example 1");
  check(r, "example 1");
  /* 2: another 3 takes the 12 (smallest class that fits); 4 | 8 flattens
   * into the parent [4, 12] -> [4, 4, 8], the 3 | 1 nests. */
  CHECK(tree_alloc(r, 3, 0, &np) == 4 && np == 2, "example 2");
  expect(r, "0+3:large@4 3+1:free0z@4 4+3:large@4 7+1:free0z@4 8+8:free0z@3 16+112:free0z@2 128+896:free0z@1 ",
         "example 2");
  check(r, "example 2");
  /* The tag words the design note spells out for this state. */
  CHECK(jw_tree_tag(&r->t, 0) == 0x11800044u, "tag 0: %#x", jw_tree_tag(&r->t, 0));
  CHECK(jw_tree_tag(&r->t, 4) == 0x01861844u, "tag 4: %#x", jw_tree_tag(&r->t, 4));
  CHECK(jw_tree_tag(&r->t, 7) == 0x00042019u, "tag 7: %#x", jw_tree_tag(&r->t, 7));
  CHECK(jw_tree_tag(&r->t, 5) == 0 && jw_tree_tag(&r->t, 6) == 0, "interior of a large range");
  /* 3: freeing the first 3 merges it with its sibling 1 into a 4, whose
   * right sibling [4, 8) is internal: it stays. */
  CHECK(tree_free(r, 0) == 1, "example 3 merges");
  expect(r, "0+4:free0@3 4+3:large@4 7+1:free0z@4 8+8:free0z@3 16+112:free0z@2 128+896:free0z@1 ", "example 3");
  check(r, "example 3");
  /* Freeing the other 3 merges everything back into the root: with its 1,
   * then the 4 and the 8 (one node of three siblings), then up the chain. */
  CHECK(tree_free(r, 4) == 5, "all merged");
  expect(r, "0+1024:free0@0 ", "back to one root");
  check(r, "example 3 end");

  /* 4: equal 128-granule allocations flatten into one node of eight
   * siblings, and any two adjacent free ones merge (640 | 384 here). */
  root_init(r, 1024);
  for (int i = 0; i < 8; i++) CHECK(tree_alloc(r, 128, 0, NULL) == (uint32_t)i * 128, "128 #%d", i);
  check(r, "eight 128s");
  CHECK(tree_free(r, 128) == 0 && tree_free(r, 256) == 1, "adjacent 128s merge");
  expect(r, "0+128:large@1 128+256:free0@1 384+128:large@1 512+128:large@1 640+128:large@1 768+128:large@1 "
            "896+128:large@1 ",
         "example 4");
  check(r, "example 4");
  free(r);
}

/* Edge cases by name (issue 3). */
static void edge_cases(void) {
  root *r = calloc(1, sizeof *r);
  /* The root itself: a leaf with no sibling on either side. */
  for (uint32_t R = 1; R <= 1024; R++) {
    if (!jw_is_class(R)) continue;
    root_init(r, R);
    CHECK(jw_tree_depth(&r->t, 0, R) == 0, "root depth");
    CHECK(jw_tree_left_leaf(&r->t, 0, R) == JW_TREE_NONE, "root of %u has a left sibling", R);
    CHECK(jw_tree_right_leaf(&r->t, 0, R) == JW_TREE_NONE, "root of %u has a right sibling", R);
    /* A range that fills the root exactly: no split, and freeing it merges
     * with nothing. */
    unsigned np = 9;
    CHECK(tree_alloc(r, R, 0, &np) == 0 && np == 0, "fill root %u", R);
    check(r, "filled");
    CHECK(tree_free(r, 0) == 0, "root free merged");
    check(r, "root freed");
  }
  /* First and last child: [1 | 1023 is not a class] -> the first child of a
   * fresh root is the piece cut first; the last child is its remainder. */
  root_init(r, 1024);
  uint32_t a = tree_alloc(r, 512, 0, NULL), b = tree_alloc(r, 512, 0, NULL);
  CHECK(a == 0 && b == 512, "two halves");
  CHECK(jw_tree_left_leaf(&r->t, a, 512) == JW_TREE_NONE, "first child has no left sibling");
  CHECK(jw_tree_right_leaf(&r->t, a, 512) == 512, "first child's right sibling");
  CHECK(jw_tree_right_leaf(&r->t, b, 512) == JW_TREE_NONE, "last child has no right sibling");
  CHECK(jw_tree_left_leaf(&r->t, b, 512) == 0, "last child's left sibling");
  CHECK(tree_free(r, b) == 0, "last child alone");
  CHECK(tree_free(r, a) == 1, "first child merges right");
  expect(r, "0+1024:free0@0 ", "halves merged");
  /* The last granule of a root as a 1-granule last child, and the first. */
  root_init(r, 1024);
  for (int i = 0; i < 1024; i++) REQUIRE(tree_alloc(r, 1, 0, NULL) != JW_TREE_NONE, "1-granule #%d", i);
  check(r, "1024 single granules");
  CHECK(find_free(r, 1, 0) == JW_TREE_NONE, "root full");
  CHECK(tree_free(r, 1023) == 0, "last granule has no free sibling");
  CHECK(tree_free(r, 0) == 0, "first granule has no free sibling");
  check(r, "edges freed");
  for (uint32_t g = 1; g < 1023; g++) tree_free(r, g);
  expect(r, "0+1024:free0@0 ", "all singles merged");
  /* The largest class below the root next to the smallest. */
  root_init(r, 1024);
  CHECK(tree_alloc(r, 896, 0, NULL) == 0, "896");
  CHECK(tree_alloc(r, 1, 0, NULL) == 896, "1 after 896");
  check(r, "largest below root");
  tree_free(r, 0);
  tree_free(r, 896);
  expect(r, "0+1024:free0@0 ", "largest merged");
  free(r);
}

/* Random allocate/free against the page map on one root of R granules. */
static void random_run(uint32_t R, uint64_t seed, uint32_t ops, uint64_t *splits, uint64_t *merges) {
  root *r = calloc(1, sizeof *r);
  root_init(r, R);
  tb_rng rng = {seed};
  uint32_t heads[1024], nheads = 0;
  unsigned maxc = jw_class_index(R);
  for (uint32_t op = 0; op < ops; op++) {
    if (nheads > 0 && (tb_below(&rng, 100) < 45 || find_free(r, 1, 0) == JW_TREE_NONE)) {
      uint32_t i = tb_below(&rng, nheads);
      *merges += tree_free(r, heads[i]);
      heads[i] = heads[--nheads];
    } else {
      /* Small classes more often, as real size mixes are. */
      unsigned ci = tb_below(&rng, 3) ? tb_below(&rng, maxc / 2 + 1) : tb_below(&rng, maxc + 1);
      uint32_t c = jw_class_granules[ci];
      unsigned np = 0;
      uint32_t g = tree_alloc(r, c, tb_below(&rng, 4), &np);
      if (g != JW_TREE_NONE) heads[nheads++] = g;
      *splits += np;
    }
    check(r, "random op");
  }
  while (nheads) *merges += tree_free(r, heads[--nheads]);
  check(r, "drained");
  CHECK(jw_tree_leaf_granules(&r->t, 0) == R, "root %u not whole after freeing all: %s", R, dump(r));
  free(r);
}

/* Every reachable state of a root of R granules (R <= 12): from the fresh
 * root, every split of every free leaf into every smaller class and every
 * free of every live leaf, breadth first, each new state checked once. A
 * state is the root's tag words (links play no part in the tree). */
typedef struct xstate {
  uint32_t tag[12];
} xstate;

typedef struct xset {
  xstate *v;
  size_t n, cap;
  uint32_t *slot; /* 1-based indices into v; open addressing */
  size_t nslots;
} xset;

static int xset_add(xset *x, const xstate *s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned i = 0; i < 12; i++) h = (h ^ s->tag[i]) * 1099511628211ull;
  size_t k = h & (x->nslots - 1);
  for (; x->slot[k]; k = (k + 1) & (x->nslots - 1))
    if (!memcmp(&x->v[x->slot[k] - 1], s, sizeof *s)) return 0;
  if (x->n == x->cap) {
    x->cap = x->cap ? 2 * x->cap : 1024;
    x->v = realloc(x->v, x->cap * sizeof *x->v);
    REQUIRE(x->v != NULL, "realloc");
  }
  x->v[x->n++] = *s;
  x->slot[k] = (uint32_t)x->n;
  REQUIRE(x->n < x->nslots / 2, "state table full");
  return 1;
}

static void x_load(root *r, const xstate *s) {
  for (uint32_t i = 0; i < r->t.granules; i++) jw_store(&r->rec[i].tag, s->tag[i], JW_RELAXED);
}

static void x_visit(xset *x, root *r, const char *op, uint32_t g, uint32_t c) {
  char err[256];
  REQUIRE(jw_tree_check(&r->t, 1, err, sizeof err) == 0, "R=%u after %s %u at %u: %s\n  tree: %s", r->t.granules,
          op, c, g, err, dump(r));
  int any_live = 0;
  for (uint32_t h = 0; h < r->t.granules; h += jw_tree_leaf_granules(&r->t, h))
    any_live |= jw_state_is_live(jw_tag_state(jw_tree_tag(&r->t, h)));
  REQUIRE(any_live || jw_tree_leaf_granules(&r->t, 0) == r->t.granules, "R=%u: all free but not whole: %s",
          r->t.granules, dump(r));
  xstate s = {{0}};
  for (uint32_t i = 0; i < r->t.granules; i++) s.tag[i] = jw_tree_tag(&r->t, i);
  xset_add(x, &s);
}

static size_t exhaustive(uint32_t R, size_t *transitions) {
  root *r = calloc(1, sizeof *r);
  xset x = {0};
  x.nslots = (size_t)1 << 21;
  x.slot = calloc(x.nslots, sizeof *x.slot);
  root_init(r, R);
  jw_tree_tag_update(&r->t, 0, JW_REC_ZEROED_MASK, 0);
  x_visit(&x, r, "init", 0, R);
  for (size_t q = 0; q < x.n; q++) {
    xstate cur = x.v[q];
    for (uint32_t g = 0; g < R;) {
      uint32_t tag = cur.tag[g], n = jw_class_granules[jw_tag_class(tag)];
      if (jw_state_in_list(jw_tag_state(tag))) {
        for (unsigned ci = 0; ci < JW_NCLASSES && jw_class_granules[ci] <= n; ci++) {
          uint32_t c = jw_class_granules[ci];
          x_load(r, &cur);
          jw_tree_piece pieces[JW_TREE_MAX_PIECES];
          unsigned np;
          if (c == n)
            jw_tree_tag_update(&r->t, g, JW_REC_STATE_MASK, LIVE);
          else
            jw_tree_split(&r->t, g, c, LIVE, pieces, &np);
          x_visit(&x, r, "split", g, c);
          (*transitions)++;
        }
      } else {
        x_load(r, &cur);
        jw_tree_tag_update(&r->t, g, JW_REC_STATE_MASK, FREE);
        uint32_t m = n;
        jw_tree_coalesce(&r->t, g, &m, absorb_none, NULL, NULL);
        x_visit(&x, r, "free", g, n);
        (*transitions)++;
      }
      g += n;
    }
  }
  size_t n = x.n;
  free(x.v);
  free(x.slot);
  free(r);
  return n;
}

int main(int argc, char **argv) {
  uint32_t ops = argc > 1 ? (uint32_t)atoi(argv[1]) : 20000;
  uint32_t exhaustive_max = argc > 2 ? (uint32_t)atoi(argv[2]) : 12;
  worked_examples();
  edge_cases();
  static const uint32_t roots[] = {1, 2, 3, 7, 8, 12, 16, 56, 64, 112, 1024};
  uint64_t splits = 0, merges = 0;
  for (unsigned i = 0; i < sizeof roots / sizeof roots[0]; i++)
    for (uint64_t seed = 1; seed <= 4; seed++) random_run(roots[i], seed, roots[i] < 64 ? ops / 4 : ops, &splits, &merges);
  for (uint32_t R = 1; R <= exhaustive_max && R <= 12; R++) {
    if (!jw_is_class(R)) continue;
    size_t transitions = 0, states = exhaustive(R, &transitions);
    printf("tree: root of %2u granules: all %zu reachable states checked (%zu transitions)\n", R, states,
           transitions);
  }
  if (test_failures()) return 1;
  printf("tree: ok (%llu random splits, %llu merges checked)\n", (unsigned long long)splits, (unsigned long long)merges);
  return 0;
}
