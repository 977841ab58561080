/* The range size class set (jwmalloc/backend/size_class.h) against its
 * definition, and the facts docs/design/backend.md relies on, each derived
 * here by brute force rather than taken from the table:
 *   - the classes are exactly the sizes 1..1024 with at most three
 *     significant bits: 36 of them, four per doubling above 8;
 *   - rounding a request up to its class wastes less than 25%;
 *   - the size-friendly split always finds a piece, keeps the largest
 *     remainder, and needs at most 4 steps (JW_TREE_MAX_PIECES is enough);
 *   - a closed sibling list has at most 8 members (JW_TREE_MAX_CHILDREN). */
#include "backend/size_class.h"
#include "backend/tree.h"
#include "tb.h"

static int three_bits(uint32_t n) {
  while (!(n & 1)) n >>= 1;
  return n < 8;
}

/* Longest closed list (every contiguous run sums to a class) with sum <= R,
 * extending `list` of length k. */
static unsigned longest_closed(uint32_t *list, unsigned k, uint32_t sum, uint32_t R) {
  unsigned best = k;
  for (unsigned c = 0; c < JW_NCLASSES; c++) {
    uint32_t w = jw_class_granules[c];
    if (sum + w > R) break;
    uint32_t s = w;
    int ok = 1;
    for (unsigned i = k; i-- > 0 && ok;) ok = jw_is_class(s += list[i]);
    if (!ok) continue;
    list[k] = w;
    unsigned l = longest_closed(list, k + 1, sum + w, R);
    if (l > best) best = l;
  }
  return best;
}

int main(void) {
  unsigned count = 0;
  for (uint32_t n = 1; n <= 1024; n++) {
    int want = three_bits(n);
    CHECK(jw_is_class(n) == want, "jw_is_class(%u)", n);
    if (want) {
      CHECK(count < JW_NCLASSES && jw_class_granules[count] == n, "class %u should be %u", count, n);
      CHECK(jw_class_index(n) == count, "index of %u", n);
      count++;
    }
    unsigned up = jw_class_index_up(n);
    REQUIRE(up < JW_NCLASSES, "no class for %u", n);
    uint32_t c = jw_class_granules[up];
    CHECK(c >= n && (up == 0 || jw_class_granules[up - 1] < n), "round up %u -> %u", n, c);
    CHECK(c * 4 < n * 5, "rounding %u up to %u wastes 25%% or more", n, c);
  }
  CHECK(count == JW_NCLASSES, "%u classes", count);
  CHECK(jw_class_index_up(0) == JW_CLASS_NONE && jw_class_index_up(1025) == JW_CLASS_NONE, "out of range");
  CHECK(!jw_is_class(0) && !jw_is_class(1025) && !jw_is_class(2048), "out of range classes");
  for (unsigned k = 3; k < 10; k++) {
    unsigned per = 0;
    for (uint32_t n = (1u << k) + 1; n <= (1u << (k + 1)); n++) per += jw_is_class(n);
    CHECK(per == 4, "%u classes in (%u, %u]", per, 1u << k, 1u << (k + 1));
  }

  unsigned max_steps = 0;
  for (unsigned i = 0; i < JW_NCLASSES; i++)
    for (unsigned j = 0; j < i; j++) {
      uint32_t s = jw_class_granules[i], c = jw_class_granules[j];
      unsigned steps = 0;
      while (s != c) {
        uint32_t a = jw_class_split_piece(s, c);
        REQUIRE(a >= c && a < s && jw_is_class(a) && jw_is_class(s - a), "split %u toward %u gave %u", s, c, a);
        for (uint32_t b = c; b < a; b++)
          CHECK(!(jw_is_class(b) && jw_is_class(s - b)), "split %u toward %u: %u keeps more than %u", s, c, b, a);
        s = a;
        steps++;
      }
      if (steps > max_steps) max_steps = steps;
    }
  CHECK(max_steps <= JW_TREE_MAX_PIECES && max_steps == 4, "longest split takes %u steps", max_steps);

  uint32_t list[64];
  unsigned longest = longest_closed(list, 0, 0, 1024);
  CHECK(longest == JW_TREE_MAX_CHILDREN, "longest closed sibling list: %u", longest);
  if (test_failures()) return 1;
  printf("size classes: ok (%u classes, splits take at most %u steps, closed lists at most %u long)\n", count,
         max_steps, longest);
  return 0;
}
