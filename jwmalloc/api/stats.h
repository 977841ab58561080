/* Statistics: gathering (jw_stats_get), printing without stdio, and the
 * exit-time report of JWMALLOC_STATS=1 (docs/design/api.md "Statistics"). */
#ifndef JW_API_STATS_H
#define JW_API_STATS_H

#include "../../include/jwmalloc.h"

/* At exit: one human-readable report on stderr, or one machine-readable
 * line appended to JWMALLOC_STATS_FILE ("jwmalloc-stats v1 key=value ..."). */
void jw_stats_emit_at_exit(void);
/* At start-up (global initialization, JWMALLOC_STATS=1 without a stats
 * file): keeps a close-on-exec copy of stderr for the exit report. */
void jw_stats_at_start(void);

#endif
