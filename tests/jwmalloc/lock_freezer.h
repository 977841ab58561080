/* Freezes a lock holder through the lock test hook (JW_TEST_HOOKS builds):
 * the first thread with may_freeze set that takes a lock of freeze_kind
 * stays in the hook, holding it, until release_holder is set; `frozen` says
 * it is there. Shared by test_huge_cache.c (kept direct mappings' lock),
 * test_large_ranges.c and test_placement_guard.c (backend lock). Install with
 * jw_test_set_lock_hook(freeze_hook) after setting freeze_kind. */
#ifndef JW_TESTS_LOCK_FREEZER_H
#define JW_TESTS_LOCK_FREEZER_H

#include <stdatomic.h>
#include <unistd.h>

#include "common/lock.h"
#include "jwmalloc.h"

static atomic_int frozen, release_holder;
static __thread int may_freeze;
static jw_lock_kind freeze_kind;

static void freeze_hook(jw_lock_kind k) {
  if (!may_freeze || k != freeze_kind) return;
  int exp = 0;
  if (!atomic_compare_exchange_strong(&frozen, &exp, 1)) return;
  while (!atomic_load(&release_holder)) usleep(1000);
}

/* A thread body that freezes holding the backend lock (freeze_kind =
 * JW_LK_BACKEND, the hook installed): its 2 MiB allocation takes the lock
 * and stays in the hook until release_holder is set. */
static inline void *freeze_backend_holder(void *arg) {
  (void)arg;
  may_freeze = 1;
  jw_free(jw_malloc((size_t)2 << 20));
  return NULL;
}

#endif
