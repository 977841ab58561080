/* The tag table: one word per 4 KiB page of the address space, saying which
 * thread cache owns the page as a frontend slab and the slab's size class,
 * so that free's fast path decides ownership and finds the class from a
 * dense table instead of the slab's header (docs/design/frontend.md, "The
 * tag table").
 *
 * A directory indexed by address bits 46..30 (131,072 entries, 1 MiB of BSS,
 * an entry touched per GiB in use) points at the table of that GiB: 2^18
 * words of 8 bytes (2 MiB of MAP_NORESERVE address space; a page of it holds
 * the words of 2 MiB of heap), mapped when the first slab of the GiB is
 * formatted and never unmapped. A word is 0, or the owner's key (low 8 bits
 * clear, never 0) | class << 1; it mirrors the slab header's tag
 * (jw_slab_set_tag writes both), so a page that is no slab, or a slab no
 * live thread owns, reads 0.
 *
 * Thread-safety: a word is written only by the thread that owns the slab
 * (or is taking it over), relaxed; readers act only on a word equal to their
 * own key, which only they write. The directory entry is published once
 * with a release CAS (a loser unmaps its table, never published), and every
 * load of it that leads to a word is acquire: the mapping (the zeroed words)
 * happens before any access through the pointer, whichever thread mapped it.
 * Never allocates through malloc.
 */
#ifndef JW_FRONTEND_PAGE_TAG_H
#define JW_FRONTEND_PAGE_TAG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../common/atomic.h"

#define JW_TAG_GIB_SHIFT 30
#define JW_TAG_DIR_SIZE ((size_t)1 << (47 - JW_TAG_GIB_SHIFT))
#define JW_TAG_WORDS ((size_t)1 << (JW_TAG_GIB_SHIFT - 12)) /* pages per GiB */
#define JW_TAG_KEY_MASK (~(uint64_t)0xff)

extern jw_atomic_ptr jw_tag_dir[JW_TAG_DIR_SIZE];

/* The word of the page holding address a, or NULL when its GiB has no table
 * (no slab was ever formatted there). Addresses above 2^47 alias lower
 * ones: only a word equal to the caller's own key is acted on, and such a
 * pointer faults on first use, as it would without the table. */
static inline jw_atomic_u64 *jw_tag_slot(uintptr_t a) {
  /* Acquire, pairing with jw_tag_prepare's release CAS: the table's mmap
   * happens before this thread's accesses to its words, even when nothing
   * else orders this thread after the one that mapped it. (The words' values
   * need no order: a thread acts only on its own key, written by itself.) */
  jw_atomic_u64 *t = jw_load(&jw_tag_dir[(a >> JW_TAG_GIB_SHIFT) & (JW_TAG_DIR_SIZE - 1)], JW_ACQUIRE);
  return t ? &t[(a >> 12) & (JW_TAG_WORDS - 1)] : NULL;
}

/* The word for a slab of class cls (< 64) whose header tag is `tag` (a key,
 * or key | 1 while parked, or 0). */
static inline uint64_t jw_tag_word(uint64_t tag, unsigned cls) {
  return tag ? (tag & JW_TAG_KEY_MASK) | (uint64_t)cls << 1 : 0;
}

/* For a per-thread cache of one GiB's table (the free fast path takes
 * idx = a >> 12, checks *last - idx < JW_TAG_WORDS, then reads
 * words[idx]): fills both for the GiB of address a and returns true, or
 * returns false (nothing changed) when that GiB has no table. *last is the
 * GiB's last page index (so a zeroed cache matches only page 0, which holds
 * no block; a thread keeps one only while it has a key, so that a word of 0
 * never matches), words the table biased by the GiB's first page index, kept as
 * an address (never dereferenced but at a page index of its GiB). */
static inline bool jw_tag_cache(uintptr_t *last, jw_atomic_u64 **words, uintptr_t a) {
  uintptr_t g = (a >> JW_TAG_GIB_SHIFT) & (JW_TAG_DIR_SIZE - 1);
  if (g != a >> JW_TAG_GIB_SHIFT) return false; /* not a user address */
  jw_atomic_u64 *t = jw_load(&jw_tag_dir[g], JW_ACQUIRE); /* see jw_tag_slot */
  if (t == NULL) return false;
  uintptr_t first = g << (JW_TAG_GIB_SHIFT - 12);
  *words = (jw_atomic_u64 *)((uintptr_t)t - first * sizeof(jw_atomic_u64));
  *last = first + JW_TAG_WORDS - 1;
  return true;
}

/* Maps the table of the GiB holding page (best effort: without it the
 * pages of that GiB read as untagged, and their frees take the slow path).
 * Lock-free; one mmap per GiB. */
void jw_tag_prepare(uintptr_t page);

/* Bytes of tables mapped (statistics). */
uint64_t jw_tag_table_bytes(void);

#endif
