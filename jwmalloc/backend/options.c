/* The backend's options (backend.h, "Options"; README, "jwmalloc backend"):
 * taken from the options table (common/option_table.h) once, at the first
 * backend call, by jw_backend_init_once. */
#include "../common/options.h"
#include "ahead.h"
#include "backend_internal.h"
#include "upcalls.h"

_Static_assert((int)JW_OPT_DEFAULT_PLACEMENT == (int)JW_PLACE_AUTO, "the options table's PLACEMENT default is auto");
_Static_assert(JW_AHEAD_MAX == 4u, "the options table's AHEAD_ROOTS maximum");

void jw_backend_init_once(void) {
  /* Acquire pairs with the release below: options are read before use. Two
   * threads may both initialize; they store the same values. */
  if (jw_load(&jw_be.inited, JW_ACQUIRE)) return;
  jw_options_init(); /* the table's values (common/options.h): once per process, also without the tiers */
  jw_store(&jw_be.check, jw_opt(JW_OPT_CHECK) ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_be.retain_roots, (uint32_t)jw_opt(JW_OPT_RETAIN_ROOTS), JW_RELAXED);
  jw_ahead_set_target((unsigned)jw_opt(JW_OPT_AHEAD_ROOTS)); /* section 7a, "Roots mapped ahead" */
  /* The tiers set the placement mode at their initialization (default
   * auto); the backend alone (tests) takes the variable's value, and off
   * when it is unset or refused. */
  if (jw_load(&jw_be.place_mode, JW_RELAXED) == JW_PLACE_UNSET) {
    unsigned mode = JW_PLACE_OFF;
    if (jw_opt_origin(JW_OPT_PLACEMENT) == JW_ORIGIN_ENV) mode = (unsigned)jw_opt(JW_OPT_PLACEMENT);
    uint32_t unset = JW_PLACE_UNSET;
    /* Relaxed: a setting; the CAS only keeps a value the tiers set meanwhile. */
    if (jw_cas(&jw_be.place_mode, &unset, mode, JW_RELAXED, JW_RELAXED) && mode == JW_PLACE_ON)
      jw_pages_place_switch(true);
  }
  jw_reclaim_init(); /* its options set the reclamation mode (jw_backend_set_reclaim_mode) */
  jw_store(&jw_be.inited, 1, JW_RELEASE);
}
