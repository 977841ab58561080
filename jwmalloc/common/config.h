/* Tier boundaries and small helpers shared by every tier.
 *
 * Brief: "Tiers". Sizes in bytes. See docs/design/api.md for why the
 * frontend stops at 2016 bytes (two blocks and a 64-byte header per page).
 */
#ifndef JW_COMMON_CONFIG_H
#define JW_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "page.h"

#define JW_SMALL_MAX ((size_t)2016)        /* frontend: 0..2016 */
#define JW_MID_MAX ((size_t)16384)         /* midend: 2017..16384 */
#define JW_LARGE_MAX ((size_t)4 << 20)     /* page ranges: 16385..4 MiB */
/* The logical page (page.h): what valloc, pvalloc and direct mappings align
 * to. A run-time value: never in the fast paths. */
#define JW_PAGE (jw_page.size)
#define JW_MIN_ALIGN ((size_t)16)
/* Bits of a user-space address: 47 on x86-64 (and arm64 without a hint
 * asking for more), the whole word on a 32-bit target. JW_ABOVE_VA(a) is
 * nonzero for an address beyond them (never on 32-bit; the same shift as
 * before on 64-bit, where uint64_t is uintptr_t). */
#if UINTPTR_MAX > 0xffffffffu
#define JW_VA_BITS 47
#else
#define JW_VA_BITS 32
#endif
#define JW_ABOVE_VA(a) ((uint64_t)(a) >> JW_VA_BITS)

#define JW_LIKELY(x) __builtin_expect(!!(x), 1)
#define JW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define JW_EXPORT __attribute__((visibility("default")))
/* On the declaration of a global that several of the library's files share:
 * they address it directly, as the file that defines it does, instead of
 * through the GOT (a default-visibility declaration costs that load in the
 * library's position-independent code). */
#define JW_HIDDEN __attribute__((visibility("hidden")))
#define JW_NOINLINE __attribute__((noinline))
#define JW_COLD __attribute__((cold, noinline))

static inline size_t jw_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
static inline int jw_is_pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

#endif
