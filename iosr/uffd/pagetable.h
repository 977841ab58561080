/* Per-app page table (design note section 3): a memfd the daemon creates and
 * maps and the client holds, so a restarted daemon can recover the slot of
 * every swapped page. Layout: a header page, a directory of spans (one per
 * registered range, sorted by first virtual page), then 16-byte entries.
 * Entry arrays are bump-allocated and never move; splitting or moving a span
 * (munmap, mremap) only edits the directory.
 *
 * Not thread-safe: owned by the engine thread.
 */
#ifndef IOSR_UFFD_PAGETABLE_H
#define IOSR_UFFD_PAGETABLE_H

#include <stddef.h>
#include <stdint.h>

enum iosr_pte_state {
  IOSR_PTE_ZERO = 0,    /* never populated or discarded: first touch maps zero */
  IOSR_PTE_PRESENT = 1,
  IOSR_PTE_WRITING = 2, /* write-protected, write to its slot in flight */
  IOSR_PTE_DROPPING = 3,/* written; the client's dropper is discarding it */
  IOSR_PTE_SWAPPED = 4, /* only in its slot */
  IOSR_PTE_READING = 5, /* swap-in in flight */
  IOSR_PTE_CACHED = 6,  /* swapped, a copy held as a read-ahead probe (aux = probe index) */
  IOSR_PTE_POISONED = 7,/* unreadable: access gives SIGBUS until discarded */
  IOSR_PTE_CLEAN = 8    /* resident, read back and not written since: write-protected, its slot holds it */
};

enum {
  IOSR_PTE_F_RM1 = 1,    /* DROPPING: one REMOVE that may be the dropper's covered it */
  IOSR_PTE_F_RMX = 2,    /* DROPPING: two or more such (the app discarded it too) */
  IOSR_PTE_F_ZEROPG = 4, /* WRITING/DROPPING an all-zero page: no slot */
  IOSR_PTE_F_FAULT = 8,  /* READING: a fault waits on it */
  IOSR_PTE_F_MOVED = 16, /* DROPPING: mremap moved it since its drop was asked for */
  IOSR_PTE_F_RMAPP = 32, /* DROPPING: a REMOVE that is the app's covered it (design note section 9) */
  IOSR_PTE_F_CLEAN = 64, /* WRITING/DROPPING a page that was CLEAN: its slot holds it, nothing written */
};

/* The invariant every transition keeps (design note section 3, "Page
 * states"): `slot` names a slot only while the entry owns one reference to it
 * (iosr_pte_has_slot); whoever drops that reference sets it to
 * IOSR_PTE_NO_SLOT in the same step, so a stale number can never be freed or
 * read again. `crc` is the slot's checksum (design note section 4), valid
 * with the slot. */
#define IOSR_PTE_NO_SLOT UINT32_MAX

typedef struct iosr_pte {
  uint32_t slot;  /* IOSR_PTE_NO_SLOT unless the entry owns a slot reference */
  uint32_t age;   /* engine tick of the last fault-in */
  uint8_t state;
  uint8_t flags;
  uint16_t aux;   /* CACHED: probe index; DROPPING: low bits of its drop's id */
  uint32_t crc;   /* CRC32C of the slot's page ^ a mix of the slot number */
} iosr_pte;

static inline int iosr_pte_has_slot(const iosr_pte *p) {
  return ((p->state >= IOSR_PTE_WRITING && p->state <= IOSR_PTE_CACHED) || p->state == IOSR_PTE_CLEAN) &&
         !(p->flags & IOSR_PTE_F_ZEROPG) && p->slot != IOSR_PTE_NO_SLOT;
}

typedef struct iosr_span {
  uint64_t start;   /* first virtual page */
  uint64_t n;       /* pages */
  uint64_t off;     /* byte offset of the entry of `start` in the memfd */
  uint64_t ra_prev; /* vma read-ahead: previous faulting page */
  uint32_t ra_win, ra_hits;
  uint32_t region;  /* region id given by the client */
  uint32_t ra_state;/* daemon memory: 1 + index of its region's read-ahead state in the app (0: not looked up
                     * yet); cleared on resume, where that memory is gone (engine/ra_region.c) */
} iosr_span;

#define IOSR_PT_MAGIC 0x3154504f5253494full /* "IOSRPT1" */
#define IOSR_PT_VERSION 2u
#define IOSR_PT_MAX_SPANS 32768u

typedef struct iosr_pt_hdr {
  uint64_t magic;
  uint32_t version, nspans; /* version 2: 16-byte entries with a slot checksum */
  uint64_t bump;  /* end of the entries allocated so far */
  uint64_t token; /* the app's resume token */
  char name[48];
} iosr_pt_hdr;

typedef struct iosr_ptable {
  int fd;
  uint8_t *map;
  uint64_t size;   /* ftruncated bytes */
  iosr_pt_hdr *hdr;
  iosr_span *spans;
} iosr_ptable;

int iosr_pt_create(iosr_ptable *pt, uint64_t token, const char *name);
/* Maps an existing page table (resume). -1/EINVAL when it does not validate. */
int iosr_pt_attach(iosr_ptable *pt, int fd);
void iosr_pt_destroy(iosr_ptable *pt);

/* Adds a span of n pages at start, every entry ZERO. NULL with errno EEXIST
 * (overlaps a span), ENOSPC (directory full), ENOMEM. */
iosr_span *iosr_pt_add(iosr_ptable *pt, uint64_t start, uint64_t n, uint32_t region);
/* The span holding vpn, or NULL. */
iosr_span *iosr_pt_find(iosr_ptable *pt, uint64_t vpn);
/* The first span that ends after vpn (for walking a range), or NULL. */
iosr_span *iosr_pt_first_from(iosr_ptable *pt, uint64_t vpn);

static inline iosr_pte *iosr_pt_pte(iosr_ptable *pt, const iosr_span *sp, uint64_t vpn) {
  return (iosr_pte *)(pt->map + sp->off) + (vpn - sp->start);
}
/* Entry of vpn or NULL (lookup + index). */
iosr_pte *iosr_pt_lookup(iosr_ptable *pt, uint64_t vpn, iosr_span **span);

typedef void (*iosr_pt_cb)(void *arg, uint64_t vpn, iosr_pte *p);
/* Removes [start, start+n) from the table, calling cb for every entry
 * removed first. 0, or -1/ENOSPC when a split finds the directory full. */
int iosr_pt_cut(iosr_ptable *pt, uint64_t start, uint64_t n, iosr_pt_cb cb, void *arg);
/* Moves the entries of [from, from+n) to [to, to+n) (mremap), any number
 * of spans; whatever the table had at the destination is removed through cb
 * first. 0, or -1 with errno ENOMEM (nothing moved) or ENOSPC (directory
 * full). */
int iosr_pt_move(iosr_ptable *pt, uint64_t from, uint64_t to, uint64_t n, iosr_pt_cb cb, void *arg);

#endif
