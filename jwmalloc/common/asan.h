/* AddressSanitizer support: in the ASan variant (compiled with
 * -fsanitize=address) free blocks and unused slab space are poisoned with the
 * ASan interface, so a use after free or an allocator bug touching free
 * memory is reported. In every other build these are no-ops.
 *
 * Free-block links are read and written only through jw_block_* below, which
 * unpoison the two words around the access and poison them again. Their
 * precondition: the block is free, or being freed by the caller (except
 * jw_block_key, which only reads).
 */
#ifndef JW_COMMON_ASAN_H
#define JW_COMMON_ASAN_H

#include <stddef.h>
#include <stdint.h>

#if defined(__SANITIZE_ADDRESS__)
#define JW_ASAN 1
#include <sanitizer/asan_interface.h>
#define jw_poison(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define jw_unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#define JW_NO_ASAN __attribute__((no_sanitize_address))
#else
#define JW_ASAN 0
#define jw_poison(p, n) ((void)(p), (void)(n))
#define jw_unpoison(p, n) ((void)(p), (void)(n))
#define JW_NO_ASAN
#endif

/* A free block: the first word links it into a free list, the second holds
 * FREE_KEY while it is free (double-free detection). Every block is at least
 * 16 bytes. */
typedef struct jw_block {
  struct jw_block *next;
  uint64_t key;
} jw_block;

static inline jw_block *jw_block_next(jw_block *b) {
  jw_unpoison(b, sizeof *b);
  jw_block *n = b->next;
  jw_poison(b, sizeof *b);
  return n;
}

static inline void jw_block_set_next(jw_block *b, jw_block *n) {
  jw_unpoison(b, sizeof *b);
  b->next = n;
  jw_poison(b, sizeof *b);
}

/* The key word of a block that may be free (poisoned) or live: read
 * without touching its poisoning. */
#if JW_ASAN
/* Out of line and out of interprocedural optimization (noipa): GCC 12 turns
 * the pointer argument into the loaded value (IPA-SRA), which moves the load
 * into the instrumented caller, so a double free was reported as ASan's
 * use-after-poison at this check instead of as a double free. */
#if defined(__clang__)
static __attribute__((noinline, unused)) JW_NO_ASAN uint64_t jw_block_key(const jw_block *b) { return b->key; }
#else
static __attribute__((noipa, unused)) JW_NO_ASAN uint64_t jw_block_key(const jw_block *b) { return b->key; }
#endif
#else
static inline uint64_t jw_block_key(const jw_block *b) { return b->key; }
#endif

/* Marks b free: key and link in one go. */
static inline void jw_block_set_free(jw_block *b, jw_block *n, uint64_t key) {
  jw_unpoison(b, sizeof *b);
  b->next = n;
  b->key = key;
  jw_poison(b, sizeof *b);
}

#endif
