/* Root map: from any address to the descriptor of the 4 MiB root holding it.
 *
 * Brief: "Metadata" (found from an address by direct indexing, no search).
 * A two-level radix table over the 47-bit user address space: level 1 is a
 * static array indexed by address bits 46..34 (8192 entries, 64 KiB of BSS),
 * level 2 leaves cover 16 GiB each (4096 roots, 32 KiB) and are mapped on
 * first use and never freed (at most 8192 x 32 KiB over the whole address
 * space; a process with a 1 GiB heap needs one leaf).
 *
 * Thread-safety: lookups are lock-free and may race with set/clear of other
 * roots. Set/clear of one root must not race with each other (the backend
 * serializes them per root). The descriptor is opaque here.
 */
#ifndef JW_PAGES_ROOT_MAP_H
#define JW_PAGES_ROOT_MAP_H

#include <stdint.h>

#include "../common/atomic.h"
#include "../common/config.h"
#include "page_source.h"

/* 64-bit: 8192 leaves of 16 GiB; 32-bit: 64 leaves of 64 MiB (16 roots). */
#if JW_VA_BITS > 32
#define JW_ROOT_MAP_L1_SHIFT 34
#else
#define JW_ROOT_MAP_L1_SHIFT 26
#endif
#define JW_ROOT_MAP_L1_SIZE ((size_t)1 << (JW_VA_BITS - JW_ROOT_MAP_L1_SHIFT))
#define JW_ROOT_MAP_L2_SIZE ((size_t)1 << (JW_ROOT_MAP_L1_SHIFT - JW_ROOT_SHIFT))

extern jw_atomic_ptr jw_root_map_l1[JW_ROOT_MAP_L1_SIZE];

/* Descriptor of the root holding p, or NULL when no root is registered there. */
static inline void *jw_root_map_get(const void *p) {
  uintptr_t a = (uintptr_t)p;
  if (JW_ABOVE_VA(a)) return NULL;
  /* Acquire pairs with the release that published the leaf and the
   * descriptor: the caller reads descriptor fields written before set(). */
  jw_atomic_ptr *leaf = jw_load(&jw_root_map_l1[a >> JW_ROOT_MAP_L1_SHIFT], JW_ACQUIRE);
  if (leaf == NULL) return NULL;
  return jw_load(&leaf[(a >> JW_ROOT_SHIFT) & (JW_ROOT_MAP_L2_SIZE - 1)], JW_ACQUIRE);
}

/* Registers desc for the root at root_base (4 MiB aligned, below 2^47).
 * Returns 0, or -1 with errno=ENOMEM if a leaf could not be mapped, or
 * errno=EINVAL for a bad base. */
int jw_root_map_set(uintptr_t root_base, void *desc);

/* Maps the leaf that will hold root_base's entry, if not there yet, so that
 * a later jw_root_map_set for it maps nothing and cannot fail. Returns 0, or
 * -1 with errno=ENOMEM. Lock-free. */
int jw_root_map_prepare(uintptr_t root_base);

/* Forgets the root at root_base; later lookups there return NULL. */
void jw_root_map_clear(uintptr_t root_base);

/* Bytes of leaves mapped so far (metadata accounting). */
uint64_t jw_root_map_bytes(void);

#endif
