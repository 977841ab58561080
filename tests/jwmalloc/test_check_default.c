/* The built library's default of the backend's invariant checks: what
 * JWMALLOC_CHECK is when the environment does not set it, as configured with
 * -DJWMALLOC_CHECK_DEFAULT=ON|OFF (the options table's CHECK row,
 * common/option_table.h; jwmalloc/sources.cmake; README, "jwmalloc backend").
 * CMake passes the expected value (0 or 1) and links this program to one
 * variant of the library: jwmalloc_api (the release objects, the same ones
 * libjwmalloc.so and libjwmalloc.a are linked from), the test-hooks, ASan and
 * TSan variants, or the standalone backend. The variable is removed first and
 * the backend initialized after (its first range), so the value read is the
 * compiled-in default. Usage: test_check_default_<variant> 0|1 */
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "pages/page_source.h"

int main(int argc, char **argv) {
  REQUIRE(argc == 2 && (argv[1][0] == '0' || argv[1][0] == '1') && argv[1][1] == 0,
          "usage: test_check_default_<variant> 0|1 (the configured JWMALLOC_CHECK_DEFAULT)");
  int want = argv[1][0] - '0';
  unsetenv("JWMALLOC_CHECK");
  void *p = jw_pages_alloc(1, JW_KIND_LARGE, NULL, NULL); /* reads the backend's options */
  REQUIRE(p != NULL, "jw_pages_alloc of one granule");
  int got = jw_pages_checking() ? 1 : 0;
  jw_pages_free(p);
  printf("JWMALLOC_CHECK default: %d (configured %d)\n", got, want);
  CHECK(got == want, "the built default of JWMALLOC_CHECK is %d, configured %d", got, want);
  return test_failures() != 0;
}
