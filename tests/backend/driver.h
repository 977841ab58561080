/* Differential driver for the backend: every operation goes to the backend
 * (jwmalloc/backend) and to a plain reference model (a page map per root plus
 * the list of live ranges), and their answers are compared. Used by the
 * differential test (random operations) and the libFuzzer target (operations
 * decoded from the input). A disagreement prints one line and aborts.
 *
 * Checked on every operation: the size class and alignment of every range,
 * no two live ranges overlap (page map, and a pattern written into each live
 * range that must survive until its free), zeroed ranges read as zero,
 * jw_pages_lookup and jw_backend_classify on the range and on random
 * addresses, bad frees rejected without damage; with JWMALLOC_CHECK the
 * touched root's full tree invariant (closure, maximal merging). Every
 * `check_every` operations and at the end: jw_backend_check_all (lists
 * against records, figures) and the metadata bound. */
#ifndef JW_TESTS_BACKEND_DRIVER_H
#define JW_TESTS_BACKEND_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "pages/page_source.h"

#define BD_MAX_LIVE 4096
#define BD_MAX_ROOTS 1024

typedef struct bd_range {
  uintptr_t start;
  uint32_t granules, id;
  jw_range_kind kind;
  uint32_t marked; /* granule offset registered with mark_interior, 0 = none */
} bd_range;

typedef struct bd_root {
  uintptr_t base;          /* 0 = empty slot */
  uint32_t live_granules;
  uint32_t owner[JW_ROOT_GRANULES_MAX]; /* live range id per granule (JW_ROOT_GRANULES used), 0 = free */
} bd_root;

typedef struct bd {
  bd_range live[BD_MAX_LIVE];
  uint32_t nlive, next_id;
  uint64_t live_granules;
  bd_root *roots; /* BD_MAX_ROOTS, open addressing on base */
  uint64_t ops, allocs, frees, probes, bad_frees, reclaims, zeroed_allocs;
  uint64_t class_allocs[64];
  uint64_t peak_record_bytes, peak_roots;
  uint32_t check_every;
} bd;

void bd_init(bd *d, uint32_t check_every);
void bd_destroy(bd *d);

/* Allocates `granules` (1..1024; other values check the ENOMEM path) of
 * `kind`; returns 0, or -1 when the live table is full. */
int bd_alloc(bd *d, uint32_t granules, jw_range_kind kind);
/* Frees live range number i (mod nlive). */
void bd_free(bd *d, uint32_t i);
/* Registers granule `off` (mod size) of live LARGE range i as interior. */
void bd_mark(bd *d, uint32_t i, uint32_t off);
/* Looks up address `r` (a random number) placed in one of the known roots. */
void bd_probe(bd *d, uint64_t r);
/* Frees an address that is not a live range start (kind of bad input chosen
 * by r); the backend must reject it and change nothing. */
void bd_bad_free(bd *d, uint64_t r);
/* One reclamation step (madvise of standby ranges). */
void bd_reclaim(bd *d);
/* Whole-backend check and figures against the model. */
void bd_check_all(bd *d);
/* Frees every live range, then checks that the backend is back to whole,
 * entirely free roots (at most the retained count) and that the metadata of
 * every other root was returned. */
void bd_free_all(bd *d);

#endif
