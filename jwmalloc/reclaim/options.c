/* Reclamation options: JWMALLOC_RECLAIM* (reclaim.h, README). */
#include <errno.h>
#include <stdlib.h>

#include "../backend/backend_internal.h"
#include "../common/log.h"
#include "../common/options.h"
#include "reclaim_internal.h"

#define DEFAULT_INTERVAL_MS 500u
#define MAX_INTERVAL_MS 600000u
#define DEFAULT_WATERMARK ((uint64_t)64 << 20)
#define DEFAULT_GRACE_MS 50u /* reclamation.md section 4, "The grace" */

jw_reclaim_state jw_rc = {
    .enabled = JW_ATOMIC_INIT(1),
    .interval_ms = JW_ATOMIC_INIT(DEFAULT_INTERVAL_MS),
    .thread_on = JW_ATOMIC_INIT(1),
    .watermark = JW_ATOMIC_INIT(DEFAULT_WATERMARK),
    .wm_now = JW_ATOMIC_INIT(DEFAULT_WATERMARK),
    .grace_ms = JW_ATOMIC_INIT(DEFAULT_GRACE_MS),
};

/* A refused value: the shared one-line message, naming the value kept (the
 * default: init reads the environment once, before any set call) as the
 * README names it (64M, not 67108864). */
static void bad(const char *name, const char *value, const char *want, uint64_t kept) {
  char def[24];
  int shift = kept == 0 ? 0 : kept % (1u << 30) == 0 ? 30 : kept % (1u << 20) == 0 ? 20 : kept % 1024 == 0 ? 10 : 0;
  jw_format(def, sizeof def, "%llu%s", (unsigned long long)(kept >> shift),
            shift == 30 ? "G" : shift == 20 ? "M" : shift == 10 ? "K" : "");
  jw_option_bad(name, value, want, def);
}

/* Decimal number with an optional K, M or G suffix (powers of 1024); -1 if
 * malformed or above 2^50. */
static int64_t parse_size(const char *s, int suffixes) {
  if (*s < '0' || *s > '9') return -1;
  int64_t v = 0;
  for (; *s >= '0' && *s <= '9'; s++)
    if ((v = v * 10 + (*s - '0')) > ((int64_t)1 << 50)) return -1;
  if (suffixes && *s) {
    int shift = (*s == 'K' || *s == 'k') ? 10 : (*s == 'M' || *s == 'm') ? 20 : (*s == 'G' || *s == 'g') ? 30 : -1;
    if (shift < 0 || s[1] != 0 || v > ((int64_t)1 << (50 - shift))) return -1;
    return v << shift;
  }
  return *s ? -1 : v;
}

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
  /* Called from the backend's one-time initialization; two racing first
   * calls read the same environment and store the same values. */
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  const char *s; /* getenv reads environ only: no allocation */
  int64_t v;
  if ((s = getenv("JWMALLOC_RECLAIM")) != NULL) {
    if ((v = parse_size(s, 0)) == 0 || v == 1)
      c.enabled = (int)v;
    else
      bad("RECLAIM", s, "0 or 1", (uint64_t)c.enabled);
  }
  if ((s = getenv("JWMALLOC_RECLAIM_INTERVAL_MS")) != NULL) {
    if ((v = parse_size(s, 0)) >= 1 && v <= MAX_INTERVAL_MS)
      c.interval_ms = (uint32_t)v;
    else
      bad("RECLAIM_INTERVAL_MS", s, "milliseconds, 1 to 600000", (uint64_t)c.interval_ms);
  }
  if ((s = getenv("JWMALLOC_RECLAIM_WATERMARK")) != NULL) {
    if ((v = parse_size(s, 1)) >= 0)
      c.watermark = (uint64_t)v;
    else
      bad("RECLAIM_WATERMARK", s, "bytes with an optional K, M or G suffix", c.watermark);
  }
  if ((s = getenv("JWMALLOC_RECLAIM_WATERMARK_MAX")) != NULL) {
    if ((v = parse_size(s, 1)) >= 0)
      c.watermark_max = (uint64_t)v;
    else
      bad("RECLAIM_WATERMARK_MAX", s, "bytes with an optional K, M or G suffix", c.watermark_max);
  }
  if ((s = getenv("JWMALLOC_RECLAIM_GRACE_MS")) != NULL) {
    if ((v = parse_size(s, 0)) >= 0 && v <= MAX_INTERVAL_MS)
      c.grace_ms = (uint32_t)v;
    else
      bad("RECLAIM_GRACE_MS", s, "milliseconds, 0 to 600000", (uint64_t)c.grace_ms);
  }
  if ((s = getenv("JWMALLOC_RECLAIM_POLICY")) != NULL) {
    if (jw_str_eq(s, "lifetime"))
      c.policy = JW_POLICY_LIFETIME;
    else if (jw_str_eq(s, "fixed-delay"))
      c.policy = JW_POLICY_FIXED_DELAY;
    else
      jw_option_bad("RECLAIM_POLICY", s, "lifetime or fixed-delay",
                    c.policy == JW_POLICY_FIXED_DELAY ? "fixed-delay" : "lifetime");
  }
  if ((s = getenv("JWMALLOC_RECLAIM_THREAD")) != NULL) {
    if ((v = parse_size(s, 0)) == 0 || v == 1)
      c.thread = (int)v;
    else
      bad("RECLAIM_THREAD", s, "0 or 1", (uint64_t)c.thread);
  }
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
  if (c->interval_ms < 1 || c->interval_ms > MAX_INTERVAL_MS || c->grace_ms > MAX_INTERVAL_MS ||
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

int jw_reclaim_option(const char *name, long *value, int set) {
  jw_backend_init_once(); /* the environment's values first: a set changes one option, not the others */
  jw_reclaim_config c;
  jw_reclaim_get_config(&c);
  long v = set ? *value : 0;
  if (jw_str_eq(name, "RECLAIM")) {
    if (!set) *value = c.enabled;
    c.enabled = (int)v;
  } else if (jw_str_eq(name, "RECLAIM_INTERVAL_MS")) {
    if (!set) *value = (long)c.interval_ms;
    c.interval_ms = (uint32_t)(v < 1 || v > (long)MAX_INTERVAL_MS ? 0 : v); /* 0: refused below */
  } else if (jw_str_eq(name, "RECLAIM_WATERMARK")) {
    if (!set) *value = (long)c.watermark;
    c.watermark = (uint64_t)v;
  } else if (jw_str_eq(name, "RECLAIM_WATERMARK_MAX")) {
    if (!set) *value = (long)c.watermark_max;
    c.watermark_max = (uint64_t)v;
  } else if (jw_str_eq(name, "RECLAIM_POLICY")) {
    if (!set) *value = (long)c.policy;
    c.policy = (unsigned)v;
  } else if (jw_str_eq(name, "RECLAIM_GRACE_MS")) {
    if (!set) *value = (long)c.grace_ms;
    c.grace_ms = (uint32_t)(v < 0 || v > (long)MAX_INTERVAL_MS ? MAX_INTERVAL_MS + 1 : (uint32_t)v); /* refused below */
  } else if (jw_str_eq(name, "RECLAIM_THREAD")) {
    if (!set) *value = c.thread;
    c.thread = (int)v;
  } else {
    return -2;
  }
  if (!set) return 0;
  if (v < 0 || (v > 1 && (jw_str_eq(name, "RECLAIM") || jw_str_eq(name, "RECLAIM_THREAD")))) {
    errno = EINVAL;
    return -1;
  }
  return jw_reclaim_set_config(&c);
}
