/* Android's extensions (android.c, iterate.c): what the rest of the API
 * layer calls. Public forms and semantics: include/jwmalloc.h; design:
 * docs/design/api.md, "Android's extensions". */
#ifndef JW_API_ANDROID_H
#define JW_API_ANDROID_H

#include <malloc.h>
#include <stdint.h>

/* bionic's mallopt parameters (libc/include/malloc.h). */
#define JW_M_DECAY_TIME (-100)
#define JW_M_PURGE (-101)
#define JW_M_PURGE_ALL (-104)

/* Whether malloc is disabled now (between malloc_disable and malloc_enable,
 * from any thread). An acquire load. */
int jw_malloc_is_disabled(void);

/* M_PURGE (all_threads 0): the calling thread's caches, the midend's cached
 * blocks and spare slabs, the kept direct mappings, then every backed free
 * range, given back to the OS now. M_PURGE_ALL (1): every other thread's page
 * pool and block cache too (what the reclaimer's aging can reach). Waits for
 * the reclaimer's locks; never on a malloc or free path. */
void jw_purge(int all_threads);

/* The release settings of M_DECAY_TIME 0, also part of JWMALLOC_LOW_MEMORY:
 * the watermark at one byte (every backend free releases what is cached at
 * once), no page pool, no kept direct mappings. */
void jw_release_immediately(void);

/* JWMALLOC_LOW_MEMORY=1 (docs/design/api.md, "Low-memory configuration"):
 * at initialization, the release settings below, the page pool and the kept
 * direct mappings off, each unless its own JWMALLOC_* variable is set; the
 * tiers' smaller caches follow the option where they are created. */
#ifndef JW_LOW_MEMORY_WATERMARK
#define JW_LOW_MEMORY_WATERMARK ((uint64_t)256 << 10)
#endif
#ifndef JW_LOW_MEMORY_INTERVAL_MS
#define JW_LOW_MEMORY_INTERVAL_MS 100u
#endif
void jw_low_memory_start(void);

/* mallinfo2's fields from counters (no lock, no system call, no walk):
 * arena = bytes of roots, hblks/hblkhd = live direct mappings, uordblks =
 * bytes in live ranges (slabs counted whole) and mappings, fordblks = the
 * rest of the roots, keepcost = backed free ranges, usmblks = peak mapped. */
void jw_mallinfo_fill(struct mallinfo2 *m);

#endif
