/* Litmus tests with known outcomes under RC11 (C++20's memory model; see
 * docs/design/verification.md): each is built as its own client with
 * -DLITMUS_<NAME>, and the checker asserts that the set of outcomes over all
 * executions is exactly the allowed set below. Variables are written through
 * jwmalloc's atomic.h, as the allocator writes them. Thread results are plain
 * globals read by finish() after the joins. */
#include "common/atomic.h"
#include "vrf.h"

jw_atomic_u32 x, y, flag;
uint32_t r1, r2, r3, r4, data;

#define RLX JW_RELAXED
#define ACQ JW_ACQUIRE
#define REL JW_RELEASE
#define SC JW_SEQ_CST

#define LITMUS(NAME, ABOUT, ...)                                                             \
  static const char *const allowed[] = {__VA_ARGS__, NULL};                                 \
  VRF_CLIENT(.name = "litmus_" NAME, .about = ABOUT, .bound = "the litmus program, exhaustive", \
             .threads = {t1, t2, T3, T4}, .finish = finish, .outcomes = allowed)
#define T3 NULL
#define T4 NULL

__attribute__((unused)) static void out2(void) { vrf_outcome("r1=%u r2=%u", r1, r2); }

#if defined(LITMUS_MP_RA) || defined(LITMUS_MP_RLX)
#ifdef LITMUS_MP_RA
#define WMO REL
#define RMO ACQ
#else
#define WMO RLX
#define RMO RLX
#endif
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
  jw_store(&flag, 1, WMO);
}
static void t2(void *a) {
  (void)a;
  r1 = jw_load(&flag, RMO);
  r2 = jw_load(&x, RLX);
}
static void finish(void) { out2(); }
#ifdef LITMUS_MP_RA
LITMUS("mp_ra", "message passing with release/acquire: r1=1 r2=0 (stale data) is forbidden", "r1=0 r2=0",
       "r1=0 r2=1", "r1=1 r2=1");
#else
LITMUS("mp_rlx", "message passing, all relaxed: the stale read r1=1 r2=0 is allowed", "r1=0 r2=0", "r1=0 r2=1",
       "r1=1 r2=0", "r1=1 r2=1");
#endif

#elif defined(LITMUS_MP_FENCES) || defined(LITMUS_MP_REL_FENCE_ONLY)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
  jw_fence(REL);
  jw_store(&flag, 1, RLX);
}
static void t2(void *a) {
  (void)a;
  r1 = jw_load(&flag, RLX);
#ifdef LITMUS_MP_FENCES
  jw_fence(ACQ);
#endif
  r2 = jw_load(&x, RLX);
}
static void finish(void) { out2(); }
#ifdef LITMUS_MP_FENCES
LITMUS("mp_fences", "message passing, relaxed accesses with release and acquire fences: r1=1 r2=0 is forbidden",
       "r1=0 r2=0", "r1=0 r2=1", "r1=1 r2=1");
#else
LITMUS("mp_rel_fence_only", "message passing with a release fence but no acquire side: r1=1 r2=0 is allowed",
       "r1=0 r2=0", "r1=0 r2=1", "r1=1 r2=0", "r1=1 r2=1");
#endif

#elif defined(LITMUS_SB_SC) || defined(LITMUS_SB_RA) || defined(LITMUS_SB_SC_FENCES) || \
    defined(LITMUS_SB_SC_STORE_RLX_LOAD)
#if defined(LITMUS_SB_SC)
#define WMO SC
#define RMO SC
#elif defined(LITMUS_SB_RA)
#define WMO REL
#define RMO ACQ
#elif defined(LITMUS_SB_SC_FENCES)
#define WMO RLX
#define RMO RLX
#define FENCE jw_fence(SC)
#else
#define WMO SC
#define RMO RLX
#endif
#ifndef FENCE
#define FENCE
#endif
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, WMO);
  FENCE;
  r1 = jw_load(&y, RMO);
}
static void t2(void *a) {
  (void)a;
  jw_store(&y, 1, WMO);
  FENCE;
  r2 = jw_load(&x, RMO);
}
static void finish(void) { out2(); }
#if defined(LITMUS_SB_SC)
LITMUS("sb_sc", "store buffering, seq_cst: both loads reading 0 is forbidden", "r1=0 r2=1", "r1=1 r2=0", "r1=1 r2=1");
#elif defined(LITMUS_SB_RA)
LITMUS("sb_ra", "store buffering, release/acquire: both loads reading 0 is allowed", "r1=0 r2=0", "r1=0 r2=1",
       "r1=1 r2=0", "r1=1 r2=1");
#elif defined(LITMUS_SB_SC_FENCES)
LITMUS("sb_sc_fences", "store buffering, relaxed accesses separated by seq_cst fences: r1=r2=0 is forbidden",
       "r1=0 r2=1", "r1=1 r2=0", "r1=1 r2=1");
#else
LITMUS("sb_sc_store_rlx_load",
       "store buffering with seq_cst stores but relaxed loads: r1=r2=0 is allowed (as on ARMv8: stlr; ldr)",
       "r1=0 r2=0", "r1=0 r2=1", "r1=1 r2=0", "r1=1 r2=1");
#endif

#elif defined(LITMUS_LB_RLX)
static void t1(void *a) {
  (void)a;
  r1 = jw_load(&x, RLX);
  jw_store(&y, 1, RLX);
}
static void t2(void *a) {
  (void)a;
  r2 = jw_load(&y, RLX);
  jw_store(&x, 1, RLX);
}
static void finish(void) { out2(); }
LITMUS("lb_rlx", "load buffering, relaxed: r1=r2=1 needs a po+rf cycle, which RC11 (our model) forbids",
       "r1=0 r2=0", "r1=0 r2=1", "r1=1 r2=0");

#elif defined(LITMUS_CORR2)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
}
static void t2(void *a) {
  (void)a;
  jw_store(&x, 2, RLX);
}
static void t3_(void *a) {
  (void)a;
  r1 = jw_load(&x, RLX);
  r2 = jw_load(&x, RLX);
}
#undef T3
#define T3 t3_
static void finish(void) { vrf_outcome("a=%u b=%u x=%u", r1, r2, jw_load(&x, RLX)); }
/* Reads of one thread follow mo (CoRR), which both orders of the writes allow. */
LITMUS("corr2", "read-read coherence with two writers: reads follow the final modification order",
       "a=0 b=0 x=2", "a=0 b=1 x=2", "a=0 b=2 x=2", "a=1 b=1 x=2", "a=1 b=2 x=2", "a=2 b=2 x=2", "a=0 b=0 x=1",
       "a=0 b=2 x=1", "a=0 b=1 x=1", "a=2 b=2 x=1", "a=2 b=1 x=1", "a=1 b=1 x=1");

#elif defined(LITMUS_COWR)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
  r1 = jw_load(&x, RLX);
}
static void t2(void *a) {
  (void)a;
  jw_store(&x, 2, RLX);
}
static void finish(void) { vrf_outcome("r=%u x=%u", r1, jw_load(&x, RLX)); }
LITMUS("cowr", "write-read coherence: a thread never reads older than its own write", "r=1 x=1", "r=1 x=2",
       "r=2 x=2");

#elif defined(LITMUS_CORW)
static void t1(void *a) {
  (void)a;
  r1 = jw_load(&x, RLX);
  jw_store(&x, 1, RLX);
}
static void t2(void *a) {
  (void)a;
  jw_store(&x, 2, RLX);
}
static void finish(void) { vrf_outcome("r=%u x=%u", r1, jw_load(&x, RLX)); }
LITMUS("corw", "read-write coherence: a write goes after what its thread read", "r=0 x=1", "r=0 x=2", "r=2 x=1");

#elif defined(LITMUS_COWW)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
  jw_store(&x, 2, RLX);
}
static void t2(void *a) {
  (void)a;
  r1 = jw_load(&x, RLX);
}
static void finish(void) { vrf_outcome("r=%u x=%u", r1, jw_load(&x, RLX)); }
LITMUS("coww", "write-write coherence: program order of writes to one location is mo", "r=0 x=2", "r=1 x=2",
       "r=2 x=2");

#elif defined(LITMUS_IRIW_ACQ) || defined(LITMUS_IRIW_SC)
#ifdef LITMUS_IRIW_ACQ
#define WMO REL
#define RMO ACQ
#else
#define WMO SC
#define RMO SC
#endif
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, WMO);
}
static void t2(void *a) {
  (void)a;
  jw_store(&y, 1, WMO);
}
static void t3_(void *a) {
  (void)a;
  r1 = jw_load(&x, RMO);
  r2 = jw_load(&y, RMO);
}
static void t4_(void *a) {
  (void)a;
  r3 = jw_load(&y, RMO);
  r4 = jw_load(&x, RMO);
}
#undef T3
#undef T4
#define T3 t3_
#define T4 t4_
static void finish(void) { vrf_outcome("%u%u%u%u", r1, r2, r3, r4); }
#ifdef LITMUS_IRIW_ACQ
LITMUS("iriw_acq", "independent reads of independent writes, acquire loads: the readers may disagree (1010)",
       "0000", "0001", "0010", "0011", "0100", "0101", "0110", "0111", "1000", "1001", "1010", "1011", "1100",
       "1101", "1110", "1111");
#else
LITMUS("iriw_sc", "independent reads of independent writes, seq_cst: the readers agree (1010 forbidden)", "0000",
       "0001", "0010", "0011", "0100", "0101", "0110", "0111", "1000", "1001", "1011", "1100", "1101", "1110",
       "1111");
#endif

#elif defined(LITMUS_RMW_ATOMIC)
static void t1(void *a) {
  (void)a;
  r1 = jw_fetch_add(&x, 1, RLX);
}
static void t2(void *a) {
  (void)a;
  r2 = jw_fetch_add(&x, 1, RLX);
}
static void finish(void) { vrf_outcome("r1=%u r2=%u x=%u", r1, r2, jw_load(&x, RLX)); }
LITMUS("rmw_atomic", "two relaxed fetch_adds never lose an update", "r1=0 r2=1 x=2", "r1=1 r2=0 x=2");

#elif defined(LITMUS_RMW_RELEASE_SEQ)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, RLX);
  jw_store(&flag, 1, REL);
}
static void t2(void *a) {
  (void)a;
  jw_fetch_add(&flag, 1, RLX);
}
static void t3_(void *a) {
  (void)a;
  r1 = jw_load(&flag, ACQ);
  r2 = jw_load(&x, RLX);
}
#undef T3
#define T3 t3_
static void finish(void) { out2(); }
/* r1=2 means T2's RMW read T1's release store: the release sequence carries
 * it, so x=1 must be seen. r1=1 can also be T2's RMW reading 0 (no sync). */
LITMUS("rmw_release_seq", "a relaxed RMW continues a release sequence: r1=2 r2=0 is forbidden", "r1=0 r2=0",
       "r1=0 r2=1", "r1=1 r2=0", "r1=1 r2=1", "r1=2 r2=1");

#elif defined(LITMUS_CAS_STRONG_WEAK)
static void t1(void *a) {
  (void)a;
  uint32_t e = 0;
  r1 = jw_cas(&x, &e, 1, RLX, RLX);
}
static void t2(void *a) {
  (void)a;
  uint32_t e = 0;
  r2 = jw_cas_weak(&y, &e, 1, RLX, RLX);
}
static void finish(void) { out2(); }
static const char *const allowed[] = {"r1=1 r2=1", "r1=1 r2=0", NULL};
VRF_CLIENT(.name = "litmus_cas_strong_weak",
           .about = "uncontended: a strong CAS always succeeds, a weak CAS may fail spuriously",
           .bound = "the litmus program, exhaustive, 1 spurious failure", .threads = {t1, t2}, .finish = finish,
           .outcomes = allowed, .spurious = 1);

#elif defined(LITMUS_2P2W)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, REL);
  jw_store(&y, 2, REL);
}
static void t2(void *a) {
  (void)a;
  jw_store(&y, 1, REL);
  jw_store(&x, 2, REL);
}
static void finish(void) { vrf_outcome("x=%u y=%u", jw_load(&x, RLX), jw_load(&y, RLX)); }
/* x=1 y=1 needs mo against program order on both locations (no execution
 * order produces it): allowed for release stores, shows mo is not execution order. */
LITMUS("2p2w", "2+2W with release stores: x=1 y=1 is allowed (mo need not follow execution order)", "x=1 y=1",
       "x=1 y=2", "x=2 y=1", "x=2 y=2");

#elif defined(LITMUS_WRC_RA)
static void t1(void *a) {
  (void)a;
  jw_store(&x, 1, REL);
}
static void t2(void *a) {
  (void)a;
  r1 = jw_load(&x, ACQ);
  jw_store(&y, 1, REL);
}
static void t3_(void *a) {
  (void)a;
  r2 = jw_load(&y, ACQ);
  r3 = jw_load(&x, RLX);
}
#undef T3
#define T3 t3_
static void finish(void) { vrf_outcome("%u%u%u", r1, r2, r3); }
LITMUS("wrc_ra", "write-to-read causality with release/acquire: 110 (causality broken) is forbidden", "000", "001",
       "010", "011", "100", "101", "111");

#elif defined(LITMUS_MP_PLAIN) || defined(LITMUS_MP_PLAIN_RLX)
#ifdef LITMUS_MP_PLAIN
#define WMO REL
#define RMO ACQ
#else
#define WMO RLX
#define RMO RLX
#endif
static void t1(void *a) {
  (void)a;
  data = 42;
  jw_store(&flag, 1, WMO);
}
static void t2(void *a) {
  (void)a;
  r1 = jw_load(&flag, RMO);
  if (r1) r2 = data; /* a plain read: a data race unless the flag synchronizes */
}
static void finish(void) { out2(); }
#ifdef LITMUS_MP_PLAIN
LITMUS("mp_plain", "message passing of plain data with release/acquire: no race, data always seen", "r1=0 r2=0",
       "r1=1 r2=42");
#else
static const char *const allowed[] = {"r1=0 r2=0", "r1=1 r2=42", NULL};
VRF_CLIENT(.name = "litmus_mp_plain_rlx",
           .about = "message passing of plain data with a relaxed flag: the data race must be reported",
           .bound = "the litmus program, exhaustive", .threads = {t1, t2}, .finish = finish, .outcomes = allowed,
           .expect = "data race");
#endif

#else
#error "define one LITMUS_<NAME>"
#endif
