/* The hard memory budget (design note section 9, "Memory budget"): a page
 * enters an app only when the charged pages (resident and being read) leave
 * room for it; a fault with no room is held while a budget reclaim job makes
 * some, and served at the end of an engine turn once there is room. When no
 * budget job can run, faults are served past the budget (counted) rather
 * than held forever.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/log.h"
#include "engine/engine_int.h"

uint64_t iosr_budget_room(const iosr_engine *e) {
  if (!e->set.budget) return UINT64_MAX;
  uint64_t budget = e->set.budget / 4096, charged = e->resident_total + e->reading_total + e->grave_total;
  return charged < budget ? budget - charged : 0;
}

uint64_t iosr_budget_app_charged(const iosr_app *a) { return a->resident + a->reading; }

/* Any reclaim job running makes room when its drops are confirmed: held
 * faults wait for it (an `iosr reclaim` may have taken the pages a budget
 * job would have). */
static int budget_job_runs(const iosr_engine *e) { return e->jobs != NULL; }

int iosr_budget_hold(iosr_engine *e, iosr_app *a, uint64_t vpn, uint64_t flags) {
  if (!e->set.budget || e->budget_force || e->draining || a->forked || iosr_budget_room(e) > 0) return 0;
  /* counted as held while the budget job is sized: its demand includes it */
  e->nheld++;
  iosr_reclaim_check_budget(e);
  if (!budget_job_runs(e)) {
    e->nheld--;
    return 0; /* nothing can make room: served past the budget */
  }
  iosr_retry *r = calloc(1, sizeof *r);
  if (!r) iosr_die("out of memory holding a fault");
  r->app = a->id;
  r->op = IOSR_RETRY_FAULT;
  r->vpn = vpn;
  r->n = 1;
  r->flags = flags;
  if (e->held_tail) e->held_tail->next = r;
  else e->held = r;
  e->held_tail = r;
  e->budget_held_faults++;
  iosr_debug("app %s: fault %#llx held: no room under the budget", a->name, (unsigned long long)(vpn << 12));
  return 1;
}

/* Serves held fault r again (as the retry list does), then frees it. */
static void serve(iosr_engine *e, iosr_retry *r) {
  iosr_app *a = iosr_engine_app(e, r->app);
  if (a && a->uffd >= 0) iosr_fault_again(e, a, r->vpn, r->flags);
  free(r);
}

void iosr_budget_turn(iosr_engine *e) {
  if (!e->held) return;
  if (!budget_job_runs(e)) iosr_reclaim_check_budget(e);
  /* a held app sends nothing that would turn the loop: the job starts now */
  if (budget_job_runs(e)) iosr_reclaim_pump(e);
  int force = !budget_job_runs(e) || !e->set.budget || e->draining;
  for (uint32_t n = e->nheld; n && e->held && (force || iosr_budget_room(e) > 0); n--) {
    iosr_retry *r = e->held;
    e->held = r->next;
    if (!e->held) e->held_tail = NULL;
    e->nheld--;
    r->next = NULL;
    e->budget_force = force;
    serve(e, r);
    e->budget_force = 0;
  }
}

int iosr_budget_check(iosr_engine *e, uint64_t bytes, char *msg, size_t cap) {
  if (!bytes) return 0;
  uint64_t pages = bytes / 4096;
  if (pages < IOSR_BUDGET_FLOOR_PAGES) {
    snprintf(msg, cap, "budget %llu bytes is below the floor of %u pages (%u KiB) that faults in flight need",
             (unsigned long long)bytes, IOSR_BUDGET_FLOOR_PAGES, IOSR_BUDGET_FLOOR_PAGES * 4);
    errno = EINVAL;
    return -1;
  }
  iosr_app *fg = e ? iosr_engine_app(e, e->fg_app) : NULL;
  if (fg && !fg->forked && pages < iosr_budget_app_charged(fg)) {
    snprintf(msg, cap, "budget %llu KiB is below what the foreground app %s needs: %llu KiB resident or being read",
             (unsigned long long)(bytes >> 10), fg->name, (unsigned long long)(iosr_budget_app_charged(fg) * 4));
    errno = EINVAL;
    return -1;
  }
  return 0;
}

void iosr_budget_destroy(iosr_engine *e) {
  while (e->held) {
    iosr_retry *r = e->held;
    e->held = r->next;
    free(r);
  }
  e->held_tail = NULL;
  e->nheld = 0;
}
