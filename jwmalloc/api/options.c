/* The public option calls, jw_option_get and jw_option_set
 * (include/jwmalloc.h), on the table (common/option_table.h): a row's WHEN
 * says whether a call reaches it; the tier that holds the value in force
 * answers (docs/design/architecture.md, "Options"). */
#include <errno.h>

#include "../../include/jwmalloc.h"
#include "../pages/page_source.h"
#include "../common/config.h"
#include "../common/options.h"
#include "../common/page.h"
#include "../reclaim/reclaim.h"

/* The row of a name jw_option_get/set reach (WHEN SET or GET); -1 if none. */
static int reachable(const char *name) {
  int id = name ? jw_option_find(name, NULL) : -1;
  if (id < 0) return -1;
  jw_option_when w = jw_option_defs[id].when;
  return w == JW_OW_SET || w == JW_OW_GET ? id : -1;
}

/* Reclamation keeps its options in its own state (reclaim/options.c). */
_Static_assert(JW_OPT_RECLAIM_THREAD - JW_OPT_RECLAIM == 6, "the seven reclamation rows stay together (option_table.h)");
static int reclaim_row(int id) { return id >= JW_OPT_RECLAIM && id <= JW_OPT_RECLAIM_THREAD; }

JW_EXPORT int jw_option_get(const char *name, long *value) {
  jw_options_init(); /* the environment first, also where no tier has started yet */
  int id = reachable(name);
  if (id < 0 || value == NULL) {
    errno = EINVAL;
    return -1;
  }
  if (reclaim_row(id)) return jw_reclaim_option((jw_option_id)id, value, 0);
  if (id == JW_OPT_PLACEMENT)
    *value = (long)jw_pages_place_mode(); /* the mode in force (two concurrent sets may store the table and
                                            the mode in opposite orders) */
  else if (id == JW_OPT_PAGE_SIZE)
    *value = (long)jw_page.size; /* the page in force, the kernel's by default */
  else
    *value = jw_opt((jw_option_id)id);
  return 0;
}

JW_EXPORT int jw_option_set(const char *name, long value) {
  jw_options_init(); /* else a later first parse would overwrite this value with the environment's */
  int id = reachable(name);
  /* GET rows: LOW_MEMORY sizes caches as they are created, PAGE_SIZE every
   * slab and range: start-up only. Every SET row's range is the table's. */
  if (id < 0 || jw_option_defs[id].when != JW_OW_SET || value < 0 || (uint64_t)value < jw_option_defs[id].min ||
      (uint64_t)value > jw_option_defs[id].max) {
    errno = EINVAL;
    return -1;
  }
  if (reclaim_row(id)) return jw_reclaim_option((jw_option_id)id, &value, 1);
  jw_store(&jw_options[id], (uint64_t)value, JW_RELAXED); /* independent setting */
  if (id == JW_OPT_PLACEMENT) jw_pages_set_place_mode((unsigned)value); /* switches at once for 0 and 1 */
  return 0;
}
