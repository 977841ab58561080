/* The countdown rule: which buffer the backend files a free range in.
 *
 * Brief: "Lifetime-based reclamation": a free range with no mergeable sibling
 * starts a countdown; a merge with a sibling resets it. Design and worked
 * example: docs/design/reclamation.md, section 1.
 *
 * A range is filed after a free, after a merge and after its release. It is
 * made of pieces (itself and each sibling it merged with), each of which was
 * just freed or sat in active, standby or released. The filing buffer is the
 * whole countdown: active (due at the second cycle from now), standby (due at
 * the next cycle) or released (nothing left to give back). No timestamp.
 *
 * The rule is the backend's: it runs under the backend lock wherever a range
 * is filed (backend/free.c, release.c), on the buffers the backend owns.
 * reclaim/ only chooses the policy (JWMALLOC_RECLAIM_POLICY, through
 * jw_backend_set_reclaim_mode) and runs the cycles that empty the buffers.
 *
 * Thread-safety: pure functions.
 */
#ifndef JW_BACKEND_FILING_H
#define JW_BACKEND_FILING_H

/* What the pieces of a filed range were (bit set). */
#define JW_PIECE_FRESH 1u    /* a range just freed */
#define JW_PIECE_ACTIVE 2u   /* a free range from the active buffer */
#define JW_PIECE_STANDBY 4u  /* a free range from the standby buffer */
#define JW_PIECE_RELEASED 8u /* a free range whose pages were given back */

typedef enum jw_filing_policy {
  /* A merge caused by a free (a fresh or active piece) restarts the
   * countdown of the whole merged range. */
  JW_POLICY_LIFETIME = 0,
  /* The baseline: a merged range keeps its oldest piece's countdown
   * ("release everything free for longer than the interval"). */
  JW_POLICY_FIXED_DELAY = 1,
} jw_filing_policy;

typedef enum jw_filing {
  JW_FILE_ACTIVE,
  JW_FILE_STANDBY,
  JW_FILE_RELEASED,
} jw_filing;

/* The buffer for a range made of `pieces` (JW_PIECE_* bits) under `policy`
 * (a jw_filing_policy). */
static inline jw_filing jw_backend_filing(unsigned pieces, unsigned policy) {
  if (pieces == JW_PIECE_RELEASED) return JW_FILE_RELEASED; /* no backed page in it */
  if (policy == JW_POLICY_LIFETIME)
    return pieces & (JW_PIECE_FRESH | JW_PIECE_ACTIVE) ? JW_FILE_ACTIVE : JW_FILE_STANDBY;
  return pieces & (JW_PIECE_STANDBY | JW_PIECE_RELEASED) ? JW_FILE_STANDBY : JW_FILE_ACTIVE;
}

#endif
