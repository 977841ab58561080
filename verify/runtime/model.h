/* Store histories of atomic locations, shared by model.c and psc.c. */
#ifndef VRF_MODEL_H
#define VRF_MODEL_H

#include "rt.h"

/* One store in a location's modification order. `ts` orders mo and never
 * changes; a store placed between two others gets the midpoint. */
typedef struct msg {
  uint64_t ts, val;
  vc_t rel; /* clock carried for acquirers (release store, release sequence, fence) */
  bool has_rel;
  bool claimed; /* an RMW read it, so nothing can be placed right after it */
  bool sc, plain, init;
  uint8_t tid;
  int32_t ev;    /* event that wrote it; -1: before this execution */
  int32_t avail; /* first step at which it existed (canonical exploration) */
  uint32_t wseq; /* writer's event count when written (execution signature) */
  uint32_t ep; /* writer's epoch */
  int mo;
  const vrf_site *site;
  uintptr_t pc;
} msg_t;

/* What thread u had seen of a location by its epoch `ep` (max timestamp). */
typedef struct seen {
  uint32_t ep;
  uint64_t ts;
} seen_t;

/* An atomic access of this execution, for the seq_cst order check. */
typedef struct pacc {
  uint64_t key;       /* coherence position: 2*ts for a write, 2*ts+1 for a read of ts */
  uint64_t prefences; /* SC fences (psc fence ids) happening before the access */
  uint32_t ep;
  uint8_t tid;
  bool sc;
  int16_t node; /* psc node if sc */
} pacc_t;

typedef struct loc {
  uintptr_t addr;
  uint32_t size;
  bool dead, listed;
  msg_t *m;
  uint32_t nm, cap;
  seen_t *seen[MAXT];
  uint32_t nseen[MAXT], capseen[MAXT];
  uint32_t aw[MAXT], ar[MAXT]; /* last atomic write/read epoch per thread */
  pacc_t *acc;
  uint32_t nacc, capacc;
  struct loc *hnext; /* hash chain */
  struct loc *cnext; /* locations accessed in this execution */
  struct loc *anext; /* all locations */
} loc_t;

#define TS_GAP (1ull << 32)

extern loc_t *model_child_locs;
uint64_t loc_view(vthread_t *t, loc_t *l);

static inline bool mo_acq(int mo) {
  return mo == __ATOMIC_ACQUIRE || mo == __ATOMIC_CONSUME || mo == __ATOMIC_ACQ_REL || mo == __ATOMIC_SEQ_CST;
}
static inline bool mo_rel(int mo) { return mo == __ATOMIC_RELEASE || mo == __ATOMIC_ACQ_REL || mo == __ATOMIC_SEQ_CST; }

#endif
