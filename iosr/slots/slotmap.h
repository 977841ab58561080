/* Slot map of the swap area (design note section 5): per slot a reference
 * count (a forked child shares its parent's slots), an in-flight I/O count, a
 * "free when the I/O completes" flag and a bad flag; per 256-slot cluster an
 * owner (free, global, or the app that holds it as part of an extent) and a
 * use count; and a reverse map slot -> (app, virtual page) of the primary
 * owner, which read-ahead and the layout test read.
 *
 * Brief: "Slot allocation" (Linux: 256-slot clusters in reclaim order; SIOR:
 * process-oriented extents). Not thread-safe: owned by the engine thread.
 */
#ifndef IOSR_SLOTS_SLOTMAP_H
#define IOSR_SLOTS_SLOTMAP_H

#include <stddef.h>
#include <stdint.h>

#define IOSR_NO_SLOT UINT32_MAX
#define IOSR_CLUSTER_SLOTS 256u
#define IOSR_EXTENT_SLOTS 512u  /* 2 MiB: one 2 MiB chunk of an app's address space */
#define IOSR_EXTENT_SHIFT 9u

enum { IOSR_CL_FREE = 0, IOSR_CL_GLOBAL = 1 }; /* owner values >= 2: app id + 2 */

typedef struct iosr_slotmap {
  uint64_t nslots;
  uint32_t *st;         /* per slot: refs (bits 0-15), busy (16-23), zombie (24), bad (25) */
  uint64_t *rev;        /* per slot: app << 48 | vpn of the primary owner; 0 = none */
  uint32_t nclusters;
  uint32_t *cl_owner;
  uint32_t *cl_used;    /* slots of the cluster that are referenced, busy-zombie or bad */
  uint64_t used;        /* referenced slots */
  uint64_t bad;
  uint64_t spills;      /* process-policy pages that found no extent */
  uint64_t holes;       /* process policy: times an app went back to its own extents' free slots */
  /* global policy: the current cluster and the next slot to try in it */
  uint32_t gcl;
  uint32_t gnext;
  uint32_t cl_cursor;   /* where the search for a free cluster resumes */
  uint32_t ext_cursor;  /* where the search for a free extent resumes */
  uint64_t slot_cursor; /* where the search for any free slot resumes */
} iosr_slotmap;

int iosr_slotmap_init(iosr_slotmap *m, uint64_t nslots);
void iosr_slotmap_destroy(iosr_slotmap *m);

static inline uint32_t iosr_slot_refs(const iosr_slotmap *m, uint64_t s) { return m->st[s] & 0xffffu; }
static inline int iosr_slot_busy(const iosr_slotmap *m, uint64_t s) { return (m->st[s] >> 16) & 0xffu; }
static inline int iosr_slot_is_bad(const iosr_slotmap *m, uint64_t s) { return (m->st[s] >> 25) & 1u; }
/* Free for allocation: no refs, no I/O, not bad, not waiting to be freed. */
static inline int iosr_slot_free(const iosr_slotmap *m, uint64_t s) { return m->st[s] == 0; }

static inline uint64_t iosr_rev_pack(uint32_t app, uint64_t vpn) { return (uint64_t)app << 48 | vpn; }
static inline uint32_t iosr_rev_app(uint64_t r) { return (uint32_t)(r >> 48); }
static inline uint64_t iosr_rev_vpn(uint64_t r) { return r & ((1ull << 48) - 1); }

/* `global`: the next free slot of the current cluster, taking a new free
 * cluster when it is used up, any free slot when no cluster is free.
 * Records (app, vpn) as owner. IOSR_NO_SLOT when the area is full. */
uint32_t iosr_slot_alloc_global(iosr_slotmap *m, uint32_t app, uint64_t vpn);

/* Per-app allocation state of the `process` policy: the extent the app is
 * filling and the next slot in it. */
typedef struct iosr_extmap {
  uint32_t cur;   /* extent being filled, UINT32_MAX: none */
  uint32_t next;  /* next offset in it */
} iosr_extmap;
void iosr_extmap_init(iosr_extmap *x);
void iosr_extmap_destroy(iosr_extmap *x);

/* `process`: the next slot of the app's current extent of 512 slots (2 MiB);
 * when it is full, a new extent (the one right after it when free, else the
 * first free one). Callers hand in each batch's pages in address order, so an
 * app's pages lie in address order inside its extents and every batch is one
 * contiguous write. When no extent is free, the free slots of the app's own
 * extents, extent after extent (counted in holes); a single free slot
 * anywhere only when the app has none left (counted in spills). IOSR_NO_SLOT
 * when the area is full. */
uint32_t iosr_slot_alloc_process(iosr_slotmap *m, iosr_extmap *x, uint32_t app, uint64_t vpn);

/* Adds a reference (a forked child shares the slot). 0, or -1 when the
 * count would overflow. */
int iosr_slot_ref(iosr_slotmap *m, uint64_t s);
/* Drops a reference; the slot becomes free when the last goes and no I/O is
 * in flight (else when the I/O completes). */
void iosr_slot_put(iosr_slotmap *m, uint64_t s);
void iosr_slot_io_begin(iosr_slotmap *m, uint64_t s);
void iosr_slot_io_end(iosr_slotmap *m, uint64_t s);
/* Marks a slot bad after a write error: never handed out again. The caller
 * still drops its reference. */
void iosr_slot_mark_bad(iosr_slotmap *m, uint64_t s);
/* Resume after a restart: claims slot s for (app, vpn). 0, or -1 when it is
 * already claimed, bad or out of range. The cluster takes the app as owner
 * when process is set and the cluster is not shared. */
int iosr_slot_claim(iosr_slotmap *m, int process, uint64_t s, uint32_t app, uint64_t vpn);

#endif
