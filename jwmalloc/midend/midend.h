/* The midend: process-wide slabs for 2017-16384 bytes (and small requests of
 * threads without a thread cache).
 *
 * Brief: "Tiers" (2-16 KiB: process-wide, slab-style), "Non-blocking
 * interface". Design, class table and slab sizes: docs/design/midend.md.
 * A midend slab is a page-source range of kind MID_SLAB; this header sits at
 * its start, blocks of one class follow from offset 64 (64-byte aligned).
 *
 * Thread-safe; no call waits for a lock holder (try-lock, deferred list,
 * fallback). Never allocates through malloc.
 */
#ifndef JW_MIDEND_MIDEND_H
#define JW_MIDEND_MIDEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../backend/page_source.h"
#include "../common/asan.h"
#include "../common/atomic.h"

#define JW_MID_NCLASSES 13
#define JW_MID_HEADER 64u
/* Slab waste (header + tail) cap: 1/16 of the slab. */
#define JW_MID_WASTE_DIV 16

extern const uint16_t jw_mid_class_size[JW_MID_NCLASSES];
extern const uint8_t jw_mid_class_granules[JW_MID_NCLASSES];

/* Class for n <= 16384 (every n <= 2048 maps to class 0). */
static inline unsigned jw_mid_class_of(size_t n) {
  extern const uint8_t jw_mid_class_of_table[32];
  return n <= 512 ? 0 : jw_mid_class_of_table[(n - 1) >> 9];
}

static inline unsigned jw_mid_class_blocks(unsigned mc) {
  return ((unsigned)jw_mid_class_granules[mc] * 4096u - JW_MID_HEADER) / jw_mid_class_size[mc];
}

typedef struct jw_mid_slab {
  jw_atomic_u64 zero;            /* always 0: no thread's slab tag */
  jw_block *free;                /* class lock: freed blocks */
  struct jw_mid_slab *next, *prev; /* class lock: partial list */
  jw_atomic_u32 bump;            /* blocks [bump, capacity) never handed out; written under the class lock */
  uint32_t nfree;                /* class lock: free blocks (list + never used) */
  uint32_t capacity;
  uint32_t granules; /* the range as the page source gave it (it may round up) */
  uint8_t cls;
  uint8_t on_partial; /* class lock */
} jw_mid_slab;

_Static_assert(sizeof(jw_mid_slab) <= JW_MID_HEADER, "midend slab header fits its 64 bytes");

/* One block of class mc, or NULL: *fallback is set when the class lock was
 * busy and no larger cached block was found (the caller serves the request
 * as a page range); otherwise NULL means ENOMEM (errno set). The block is
 * still poisoned (ASan) and carries a stale key. */
jw_block *jw_mid_alloc(unsigned mc, bool *fallback);

/* True when p is a handed-out-able block start of the MID_SLAB range info. */
bool jw_mid_is_block(const jw_range_info *info, const void *p);

/* Frees block p of the MID_SLAB range `info` (validated, not yet marked
 * free; the caller checked its key). */
void jw_mid_free(const jw_range_info *info, jw_block *p);

/* Usable bytes of a midend block of range info. */
size_t jw_mid_usable(const jw_range_info *info);

/* Gives cached blocks back to their slabs and empty slabs to the page
 * source (classes whose lock is free); true when pages were given back. */
bool jw_mid_trim(void);

/* Reclaimer (the aging pass, docs/design/reclamation.md section 6): each
 * class without a malloc or free since the previous pass gives its cached
 * blocks back to their slabs and its empty slabs and spare back to the page
 * source as aged ranges; class locks are only tried. Returns about the bytes
 * the midend still caches (non-zero while a class could age). */
uint64_t jw_mid_age(void);

/* fork: take every class lock / release them / reset them in the child. */
void jw_mid_atfork_prepare(void);
void jw_mid_atfork_parent(void);
void jw_mid_atfork_child(void);

typedef struct jw_mid_totals {
  uint64_t mallocs, frees, fallbacks;
  uint64_t slabs_aged; /* slabs the reclaimer's aging passes gave back */
} jw_mid_totals;
void jw_mid_totals_get(jw_mid_totals *out);

#endif
