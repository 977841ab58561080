/* The evaluation app's heap (docs/design/iosr-eval.md, "Apps"): objects of
 * mixed sizes carved from one arena, allocated over epochs with deaths in
 * between, so that hot and cold objects interleave in the address space as
 * in a long-running app. The arena is ordinary memory (kernel swap) or an
 * IOSR region: the carving code is the same, so both heaps have the same
 * layout for the same seed.
 *
 * Every object starts with a header; the hot set is a chain of hot objects in
 * a random order (followed by pointer-chasing: each header holds the next
 * one) plus a list of hot buffers (objects of 64 KiB and more) touched in
 * address order. Object contents are pseudo-random words derived from (seed,
 * object id); the header keeps the sum of the words sampled by a touch, so a
 * touch also checks the data it brought back. Not thread-safe: one app thread.
 */
#ifndef IOSR_BENCH_HEAP_H
#define IOSR_BENCH_HEAP_H

#include <stddef.h>
#include <stdint.h>

#define HEAP_HDR_BYTES 48u       /* object header; smallest object */
#define HEAP_SMALL_MAX 4096u     /* objects up to this come from size-class slabs */
#define HEAP_SLAB_BYTES 65536u   /* slab of one size class */
#define HEAP_BUFFER_MIN 65536u   /* hot objects this large are "buffers", touched in address order */
#define HEAP_LARGE_MAX (1u << 20) /* largest object */
#define HEAP_STRIDE 64u          /* a touch reads one word per 64 bytes (one per cache line) */

typedef struct heap_obj {
  uint64_t tag;               /* HEAP_TAG ^ id: a touch checks it */
  uint64_t id;
  struct heap_obj *next_hot;  /* the pointer-chasing chain */
  uint64_t sum;               /* sum of the sampled content words */
  uint32_t size;              /* bytes, header included */
  uint32_t flags;
  uint64_t visits;            /* written by touches (dirties the page); not in sum */
} heap_obj;

typedef struct heap_params {
  uint64_t seed;
  unsigned epochs;          /* allocation phases (default 32) */
  double hot_epoch_frac;    /* share of epochs whose objects are mostly hot (default 0.35) */
  double hot_in_hot;        /* P(hot) for an object of a hot epoch (0.9) */
  double hot_in_cold;       /* P(hot) for an object of a cold epoch (0.08) */
  double die_frac;          /* share of objects that die 1-4 epochs after birth (0.4) */
} heap_params;

typedef struct heap_stats {
  uint64_t objects, live_objects, live_bytes, arena_used;
  uint64_t hot_chain_objects, hot_chain_bytes, hot_buffers, hot_buffer_bytes, hot_pages;
  uint64_t by_class[4]; /* live objects: <=256 B, <=4 KiB, <64 KiB, >=64 KiB */
} heap_stats;

typedef struct heap {
  uint8_t *base;
  size_t cap, bump;
  heap_params p;
  heap_obj *chain;            /* first hot object of the chain */
  heap_obj **buffers;         /* hot buffers in address order (ordinary memory) */
  size_t nbuffers;
  uint32_t *hot_pages;        /* distinct arena pages of the hot set, ascending (ordinary memory) */
  size_t nhot_pages;
  heap_stats st;
} heap;

typedef struct touch_result {
  uint64_t objects, bytes, bad, written;
} touch_result;

void heap_params_default(heap_params *p, uint64_t seed);

/* Builds the heap in [base, base+cap) (page-aligned; cap >= 16 MiB): epochs of
 * allocation (sizes drawn from the mixed distribution) and deaths until the
 * arena is used up, then the hot chain and buffer list. `progress` (may be
 * NULL) is called after each epoch. 0, or -1 with errno ENOMEM (helper lists). */
int heap_build(heap *h, void *base, size_t cap, const heap_params *p, void (*progress)(unsigned epoch, void *arg),
               void *arg);

/* Touches the hot set: follows the chain reading one word per 64 bytes of each
 * object and checking the sum, then reads the buffers in address order; one
 * in `write_every` chained objects (0: none) gets its visit counter written.
 * Returns the counts; bad = objects whose tag or sum did not match. */
touch_result heap_touch(heap *h, unsigned write_every);

/* Checks every word of every hot object (slow; tests). Returns bad objects. */
uint64_t heap_verify_full(heap *h);

void heap_free_lists(heap *h);

#endif
