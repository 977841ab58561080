/* The backend's options (backend.h, "Options"; README, "jwmalloc backend"):
 * read once, at the first backend call, by jw_backend_init_once. */
#include <stdlib.h>

#include "../common/log.h"
#include "ahead.h"
#include "backend_internal.h"
#include "upcalls.h"

#ifndef JWMALLOC_CHECK_DEFAULT
#define JWMALLOC_CHECK_DEFAULT 0
#endif

/* A JWMALLOC_* number of the backend, at most `max`: a bad value gets one
 * line on stderr (unless the tiers' option table reports it: `report` 0) and
 * the default (README, "Options"). */
static unsigned env_uint(const char *name, unsigned dflt, unsigned max, int report) {
  const char *s = getenv(name); /* reads environ only: no allocation */
  if (s == NULL) return dflt;
  unsigned v = 0;
  const char *d = s;
  while (*d >= '0' && *d <= '9' && v <= max) v = v * 10 + (unsigned)(*d++ - '0');
  if (d == s || *d != 0 || v > max) {
    if (report)
      jw_dprintf(2, "jwmalloc: %s=%s: expected a whole number from 0 to %u; default %u kept\n", name, s, max, dflt);
    return dflt;
  }
  return v;
}

void jw_backend_init_once(void) {
  /* Acquire pairs with the release below: options are read before use. Two
   * threads may both read the environment; they store the same values. */
  if (jw_load(&jw_be.inited, JW_ACQUIRE)) return;
  jw_store(&jw_be.check, env_uint("JWMALLOC_CHECK", JWMALLOC_CHECK_DEFAULT, 1, 1) ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_be.retain_roots, env_uint("JWMALLOC_RETAIN_ROOTS", 1, 1u << 20, 1), JW_RELAXED);
  jw_ahead_set_target(env_uint("JWMALLOC_AHEAD_ROOTS", 2, JW_AHEAD_MAX, 1)); /* section 7a, "Roots mapped ahead" */
  /* The tiers' option too (common/options.h, which reports a bad value). */
  jw_store(&jw_be.lock_yield, env_uint("JWMALLOC_LOCK_YIELD", 0, 1, 0), JW_RELAXED);
  /* The same variable as the tiers' (common/options.h, README "Options"):
   * read here too because the backend also runs without the tiers (tests),
   * where it defaults to off; the library's options set it first (default
   * auto), and then this leaves it alone. */
  if (jw_load(&jw_be.place_mode, JW_RELAXED) == JW_PLACE_UNSET) {
    const char *pm = getenv("JWMALLOC_PLACEMENT"); /* reads environ only: no allocation */
    unsigned mode = pm && pm[0] == 'a' && pm[1] == 'u' && pm[2] == 't' && pm[3] == 'o' && pm[4] == 0
                        ? JW_PLACE_AUTO
                        : env_uint("JWMALLOC_PLACEMENT", 0, 1, 0);
    uint32_t unset = JW_PLACE_UNSET;
    /* Relaxed: a setting; the CAS only keeps a value the tiers set meanwhile. */
    if (jw_cas(&jw_be.place_mode, &unset, mode, JW_RELAXED, JW_RELAXED) && mode == JW_PLACE_ON)
      jw_pages_place_switch(true);
  }
  jw_reclaim_init(); /* its options set the reclamation mode (jw_backend_set_reclaim_mode) */
  jw_store(&jw_be.inited, 1, JW_RELEASE);
}
