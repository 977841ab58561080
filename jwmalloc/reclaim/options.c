/* Reclamation options: JWMALLOC_RECLAIM* (reclaim.h, README), their values
 * from the options table (common/options.h) at start-up, then the
 * configuration in force. */
#include <errno.h>

#include "../backend/backend_internal.h"
#include "../common/options.h"
#include "reclaim_internal.h"

/* The table's ranges of RECLAIM_INTERVAL_MS and RECLAIM_GRACE_MS, which a
 * configuration set at run time keeps too. */
#define INTERVAL_MIN ((uint32_t)jw_option_defs[JW_OPT_RECLAIM_INTERVAL_MS].min)
#define INTERVAL_MAX ((uint32_t)jw_option_defs[JW_OPT_RECLAIM_INTERVAL_MS].max)
#define GRACE_MAX ((uint32_t)jw_option_defs[JW_OPT_RECLAIM_GRACE_MS].max)

_Static_assert(JW_POLICY_LIFETIME == 0 && JW_POLICY_FIXED_DELAY == 1, "the table's RECLAIM_POLICY words");

/* Before jw_reclaim_init: the table's defaults. */
jw_reclaim_state jw_rc = {
    .enabled = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM),
    .interval_ms = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_INTERVAL_MS),
    .thread_on = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_THREAD),
    .watermark = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_WATERMARK),
    .wm_now = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_WATERMARK),
    .watermark_max = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_WATERMARK_MAX),
    .policy = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_POLICY),
    .grace_ms = JW_ATOMIC_INIT(JW_OPT_DEFAULT_RECLAIM_GRACE_MS), /* reclamation.md section 4, "The grace" */
};

static void apply(const jw_reclaim_config *c) {
  /* Relaxed: independent settings, read racily by the reclaim paths. */
  jw_store(&jw_rc.enabled, c->enabled ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_rc.interval_ms, c->interval_ms, JW_RELAXED);
  /* A new floor or ceiling starts the watermark in force at its floor
   * (section 4a); other settings leave it where it adapted to. */
  if (jw_load(&jw_rc.watermark, JW_RELAXED) != c->watermark ||
      jw_load(&jw_rc.watermark_max, JW_RELAXED) != c->watermark_max) {
    jw_store(&jw_rc.wm_now, c->watermark, JW_RELAXED);
    jw_store(&jw_rc.sync_bytes, 0, JW_RELAXED);
  }
  jw_store(&jw_rc.watermark, c->watermark, JW_RELAXED);
  jw_store(&jw_rc.watermark_max, c->watermark_max, JW_RELAXED);
  jw_store(&jw_rc.policy, c->policy, JW_RELAXED);
  jw_store(&jw_rc.thread_on, c->thread ? 1u : 0u, JW_RELAXED);
  jw_store(&jw_rc.grace_ms, c->grace_ms, JW_RELAXED);
  jw_backend_set_reclaim_mode(c->enabled, c->policy);
}

void jw_reclaim_init(void) {
  /* Called from the backend's one-time initialization, after the options'
   * parse; two racing first calls store the same values. */
  jw_reclaim_config c = {
      .enabled = (int)jw_opt(JW_OPT_RECLAIM),
      .interval_ms = (uint32_t)jw_opt(JW_OPT_RECLAIM_INTERVAL_MS),
      .watermark = (uint64_t)jw_opt(JW_OPT_RECLAIM_WATERMARK),
      .policy = (unsigned)jw_opt(JW_OPT_RECLAIM_POLICY),
      .thread = (int)jw_opt(JW_OPT_RECLAIM_THREAD),
      .watermark_max = (uint64_t)jw_opt(JW_OPT_RECLAIM_WATERMARK_MAX),
      .grace_ms = (uint32_t)jw_opt(JW_OPT_RECLAIM_GRACE_MS),
  };
  apply(&c);
  jw_store(&jw_rc.last_cycle_ns, jw_reclaim_now_ns(), JW_RELAXED); /* a statistic-like clock: relaxed */
  jw_store(&jw_rc.inited, 1, JW_RELAXED);
}

int jw_reclaim_enabled(void) { return (int)jw_load(&jw_rc.enabled, JW_RELAXED); } /* a setting */

void jw_reclaim_get_config(jw_reclaim_config *o) {
  o->enabled = (int)jw_load(&jw_rc.enabled, JW_RELAXED);
  o->interval_ms = jw_load(&jw_rc.interval_ms, JW_RELAXED);
  o->watermark = jw_load(&jw_rc.watermark, JW_RELAXED);
  o->watermark_max = jw_load(&jw_rc.watermark_max, JW_RELAXED);
  o->policy = jw_load(&jw_rc.policy, JW_RELAXED);
  o->thread = (int)jw_load(&jw_rc.thread_on, JW_RELAXED);
  o->grace_ms = jw_load(&jw_rc.grace_ms, JW_RELAXED);
}

int jw_reclaim_set_config(const jw_reclaim_config *c) {
  if (c->interval_ms < INTERVAL_MIN || c->interval_ms > INTERVAL_MAX || c->grace_ms > GRACE_MAX ||
      (c->policy != JW_POLICY_LIFETIME && c->policy != JW_POLICY_FIXED_DELAY)) {
    errno = EINVAL;
    return -1;
  }
  jw_backend_init_once(); /* the environment is read first, then overridden */
  apply(c);
  jw_reclaim_thread_wake(JW_WAKE_CYCLE); /* a sleeping thread sees the change now */
  /* A grace that no thread will end (its thread ended while reclamation was
   * off): the caller ends it. Nothing else here releases or moves the
   * watermark in force. Relaxed: settings and a time, read racily. */
  if (c->enabled && jw_load(&jw_rc.over_since_ns, JW_RELAXED) != 0 &&
      jw_load(&jw_rc.thread_state, JW_RELAXED) != JW_THREAD_RUNNING)
    jw_reclaim_grace_end();
  return 0;
}

int jw_reclaim_option(jw_option_id id, long *value, int set) {
  jw_backend_init_once(); /* the environment's values first: a set changes one option, not the others */
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  long v = set ? *value : 0;
  switch (id) {
    case JW_OPT_RECLAIM:
      if (!set) *value = c.enabled;
      c.enabled = (int)v;
      break;
    case JW_OPT_RECLAIM_INTERVAL_MS:
      if (!set) *value = (long)c.interval_ms;
      c.interval_ms = (uint32_t)(v < (long)INTERVAL_MIN || v > (long)INTERVAL_MAX ? 0 : v); /* 0: refused below */
      break;
    case JW_OPT_RECLAIM_WATERMARK:
      if (!set) *value = (long)c.watermark;
      c.watermark = (uint64_t)v;
      break;
    case JW_OPT_RECLAIM_WATERMARK_MAX:
      if (!set) *value = (long)c.watermark_max;
      c.watermark_max = (uint64_t)v;
      break;
    case JW_OPT_RECLAIM_POLICY:
      if (!set) *value = (long)c.policy;
      c.policy = (unsigned)v;
      break;
    case JW_OPT_RECLAIM_GRACE_MS:
      if (!set) *value = (long)c.grace_ms;
      c.grace_ms = v < 0 || v > (long)GRACE_MAX ? GRACE_MAX + 1 : (uint32_t)v; /* GRACE_MAX + 1: refused below */
      break;
    case JW_OPT_RECLAIM_THREAD:
      if (!set) *value = c.thread;
      c.thread = (int)v;
      break;
    default:
      return -2;
  }
  if (!set) return 0;
  if (v < 0 || (v > 1 && (id == JW_OPT_RECLAIM || id == JW_OPT_RECLAIM_THREAD))) {
    errno = EINVAL;
    return -1;
  }
  return jw_reclaim_set_config(&c);
}
