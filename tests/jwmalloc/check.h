/* Checks of the jwmalloc tests: test_support.h's CHECK, FAIL and REQUIRE,
 * going on after a failed check (the first 20 printed, all counted; a
 * test's result is test_failures() != 0). Its threads keep their state
 * consistent, so later checks still say something. */
#ifndef JW_TEST_CHECK_H
#define JW_TEST_CHECK_H

#define TEST_CONTINUE_AFTER_FAILURE
#include "test_support.h"

#endif
