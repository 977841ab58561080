/* jwmalloc's atomics in a verification build (-DJW_VERIFY): the same macro
 * names as jwmalloc/common/atomic.h, each a call into the model checker.
 *
 * Every macro is a scheduling point: the checker may run other threads first,
 * and a load may return any value the memory model allows for its order
 * (docs/design/verification.md). Values travel as uint64_t; the wrapper
 * type's member `v` (1, 4 or 8 bytes) gives size and type. The site (file,
 * line, function) is kept for the failing-execution printout.
 * Included by atomic.h only; never include directly.
 */
#ifndef JW_VRF_ATOMIC_H
#define JW_VRF_ATOMIC_H

#include <stdbool.h>
#include <stdint.h>

typedef struct vrf_site {
  const char *file;
  int line;
  const char *func;
} vrf_site;

enum { VRF_RMW_ADD, VRF_RMW_SUB, VRF_RMW_OR, VRF_RMW_AND, VRF_RMW_XCHG, VRF_RMW_XOR, VRF_RMW_NAND };

uint64_t vrf_atomic_load(void *p, unsigned size, int mo, const vrf_site *s);
void vrf_atomic_store(void *p, unsigned size, uint64_t v, int mo, const vrf_site *s);
uint64_t vrf_atomic_rmw(void *p, unsigned size, int op, uint64_t v, int mo, const vrf_site *s);
bool vrf_atomic_cas(void *p, unsigned size, uint64_t *expected, uint64_t desired, bool weak, int mo_ok,
                    int mo_fail, const vrf_site *s);
void vrf_atomic_fence(int mo, const vrf_site *s);
void vrf_spin_relax(const vrf_site *s);
/* The one validated racy read (jw_fast_tag): see verification.md. */
uint64_t vrf_validated_load(const void *p, unsigned size, const vrf_site *s);

#define VRF_SITE                                                      \
  ({                                                                  \
    static const vrf_site vrf_site_ = {__FILE__, __LINE__, __func__}; \
    &vrf_site_;                                                       \
  })

/* Bit-exact conversions between a member's type and uint64_t (little-endian
 * targets only, which is all jwmalloc supports). */
#define VRF_TO_U64(x)                                     \
  ({                                                      \
    __typeof__(x) vrf_x_ = (x);                           \
    uint64_t vrf_u_ = 0;                                  \
    __builtin_memcpy(&vrf_u_, &vrf_x_, sizeof vrf_x_);    \
    vrf_u_;                                               \
  })
#define VRF_FROM_U64(T, u)                    \
  ({                                          \
    uint64_t vrf_u2_ = (u);                   \
    T vrf_r_;                                 \
    __builtin_memcpy(&vrf_r_, &vrf_u2_, sizeof vrf_r_); \
    vrf_r_;                                   \
  })

#define jw_load(a, mo)                                                              \
  ({                                                                                \
    __typeof__(a) vrf_a_ = (a);                                                     \
    VRF_FROM_U64(__typeof__(vrf_a_->v),                                             \
                 vrf_atomic_load(&vrf_a_->v, sizeof(vrf_a_->v), (mo), VRF_SITE));   \
  })
#define jw_store(a, x, mo)                                                          \
  ({                                                                                \
    __typeof__(a) vrf_a_ = (a);                                                     \
    __typeof__(vrf_a_->v) vrf_v_ = (x);                                             \
    vrf_atomic_store(&vrf_a_->v, sizeof(vrf_a_->v), VRF_TO_U64(vrf_v_), (mo), VRF_SITE); \
  })
#define VRF_RMW_(a, op, x, mo)                                                      \
  ({                                                                                \
    __typeof__(a) vrf_a_ = (a);                                                     \
    __typeof__(vrf_a_->v) vrf_v_ = (__typeof__(vrf_a_->v))(x);                      \
    VRF_FROM_U64(__typeof__(vrf_a_->v),                                             \
                 vrf_atomic_rmw(&vrf_a_->v, sizeof(vrf_a_->v), (op), VRF_TO_U64(vrf_v_), (mo), \
                                VRF_SITE));                                         \
  })
#define jw_xchg(a, x, mo) VRF_RMW_(a, VRF_RMW_XCHG, x, mo)
#define jw_fetch_add(a, x, mo) VRF_RMW_(a, VRF_RMW_ADD, x, mo)
#define jw_fetch_sub(a, x, mo) VRF_RMW_(a, VRF_RMW_SUB, x, mo)
#define jw_fetch_or(a, x, mo) VRF_RMW_(a, VRF_RMW_OR, x, mo)
#define jw_fetch_and(a, x, mo) VRF_RMW_(a, VRF_RMW_AND, x, mo)

#define VRF_CAS_(a, expp, x, weak, mo_ok, mo_fail)                                  \
  ({                                                                                \
    __typeof__(a) vrf_a_ = (a);                                                     \
    __typeof__(vrf_a_->v) *vrf_e_ = (expp);                                         \
    __typeof__(vrf_a_->v) vrf_n_ = (x);                                             \
    uint64_t vrf_eu_ = VRF_TO_U64(*vrf_e_);                                         \
    bool vrf_ok_ = vrf_atomic_cas(&vrf_a_->v, sizeof(vrf_a_->v), &vrf_eu_, VRF_TO_U64(vrf_n_), \
                                  (weak), (mo_ok), (mo_fail), VRF_SITE);            \
    if (!vrf_ok_) *vrf_e_ = VRF_FROM_U64(__typeof__(vrf_a_->v), vrf_eu_);           \
    vrf_ok_;                                                                        \
  })
#define jw_cas(a, expp, x, mo_ok, mo_fail) VRF_CAS_(a, expp, x, false, mo_ok, mo_fail)
#define jw_cas_weak(a, expp, x, mo_ok, mo_fail) VRF_CAS_(a, expp, x, true, mo_ok, mo_fail)

#define jw_fence(mo) vrf_atomic_fence((mo), VRF_SITE)

/* One iteration of a busy-wait loop: the checker's "await" (the thread sleeps
 * until another thread writes what this iteration read). Call it once per
 * iteration of every loop that waits for another thread. */
#define jw_cpu_relax() vrf_spin_relax(VRF_SITE)

#endif
