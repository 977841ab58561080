/* Tier boundaries and small helpers shared by every tier.
 *
 * Brief: "Tiers". Sizes in bytes. See docs/design/api.md for why the
 * frontend stops at 2016 bytes (two blocks and a 64-byte header per page).
 */
#ifndef JW_COMMON_CONFIG_H
#define JW_COMMON_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define JW_SMALL_MAX ((size_t)2016)        /* frontend: 0..2016 */
#define JW_MID_MAX ((size_t)16384)         /* midend: 2017..16384 */
#define JW_LARGE_MAX ((size_t)4 << 20)     /* page ranges: 16385..4 MiB */
#define JW_PAGE ((size_t)4096)
#define JW_MIN_ALIGN ((size_t)16)

#define JW_LIKELY(x) __builtin_expect(!!(x), 1)
#define JW_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define JW_EXPORT __attribute__((visibility("default")))
#define JW_NOINLINE __attribute__((noinline))
#define JW_COLD __attribute__((cold, noinline))

static inline size_t jw_align_up(size_t n, size_t a) { return (n + a - 1) & ~(a - 1); }
static inline int jw_is_pow2(size_t a) { return a != 0 && (a & (a - 1)) == 0; }

#endif
