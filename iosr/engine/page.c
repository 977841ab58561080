/* A page's state in its app's table and what the state charges (engine_int.h,
 * "page.c"; design note sections 3 and 9): the app's resident, clean,
 * reading and swapped counts, the engine's resident and reading totals
 * (the budget's), and the page's swap slot.
 */
#include "engine/engine_int.h"

/* The entry gives up its slot reference, and with it the slot's number
 * (pagetable.h: a slot number is valid only while it is owned). */
void iosr_page_put_slot(iosr_engine *e, iosr_pte *p) {
  if (iosr_pte_has_slot(p)) iosr_slot_put(&e->slots, p->slot);
  p->slot = IOSR_PTE_NO_SLOT;
}

/* A page leaves the table or becomes ZERO: releases what it holds. */
void iosr_page_release(iosr_engine *e, iosr_app *a, iosr_pte *p) {
  if (p->state == IOSR_PTE_CACHED) iosr_probe_drop(e, a, p, 0);
  iosr_page_put_slot(e, p);
  iosr_page_set_state(e, a, p, IOSR_PTE_ZERO);
  p->flags = 0;
}

void iosr_page_set_state(iosr_engine *e, iosr_app *a, iosr_pte *p, int state) {
  int was_res = p->state == IOSR_PTE_PRESENT || p->state == IOSR_PTE_WRITING || p->state == IOSR_PTE_DROPPING ||
                p->state == IOSR_PTE_CLEAN;
  int is_res = state == IOSR_PTE_PRESENT || state == IOSR_PTE_WRITING || state == IOSR_PTE_DROPPING ||
               state == IOSR_PTE_CLEAN;
  if (p->state == IOSR_PTE_CLEAN && state != IOSR_PTE_CLEAN) a->clean--;
  else if (p->state != IOSR_PTE_CLEAN && state == IOSR_PTE_CLEAN) a->clean++;
  int was_sw = p->state == IOSR_PTE_SWAPPED || p->state == IOSR_PTE_READING || p->state == IOSR_PTE_CACHED;
  int is_sw = state == IOSR_PTE_SWAPPED || state == IOSR_PTE_READING || state == IOSR_PTE_CACHED;
  /* forked children share their pages with the parent until written and
   * are never reclaimed: they do not count against the budget */
  if (was_res && !is_res) {
    a->resident--;
    if (!a->forked) e->resident_total--;
  } else if (!was_res && is_res) {
    a->resident++;
    if (!a->forked && ++e->resident_total > e->resident_peak) e->resident_peak = e->resident_total;
    uint64_t budget = e->set.budget / 4096;
    if (!a->forked && budget && e->resident_total > budget && !e->draining) {
      e->budget_overrun_pages++;
      if (e->resident_total - budget > e->budget_over_peak) e->budget_over_peak = e->resident_total - budget;
    }
  }
  /* a page being read is charged to the budget: the read installs it */
  if (p->state == IOSR_PTE_READING && state != IOSR_PTE_READING) {
    a->reading--;
    if (!a->forked) e->reading_total--;
  } else if (p->state != IOSR_PTE_READING && state == IOSR_PTE_READING) {
    a->reading++;
    if (!a->forked) e->reading_total++;
  }
  if (was_sw && !is_sw) {
    if (--a->swapped == 0) a->swapped_peak = 0;
  } else if (!was_sw && is_sw) {
    if (++a->swapped > a->swapped_peak) a->swapped_peak = a->swapped;
  }
  p->state = (uint8_t)state;
}
