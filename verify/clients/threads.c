/* Real code: thread creation and exit with cached memory
 * (jwmalloc/api/runtime.c: a thread's first malloc attaches a thread cache,
 * the pthread-key destructor releases it at exit; frontend/thread_cache.c:
 * jw_tc_acquire adopts a FREE cache from the registry or creates and
 * publishes one, jw_tc_release hands back bins, slabs and pool, abandoning
 * slabs with blocks still out). Brief: "Frontend: uniform, pooled slabs"
 * (thread caches recycled) and "Bounded verification" (thread creation and
 * exit).
 *
 * T1 allocates a block, hands it to T2 and exits with the block still out
 * (its slab is abandoned, or empty if T2's free came first). T2 frees T1's
 * block (remote free onto an active or abandoned slab; the last free of an
 * abandoned slab gives the page back, or, if T2 has a cache, adopts it into
 * T2's pool) and exits. --param 2 (beyond the budget, not run by make verify):
 * T2 first allocates its own block
 * (attaching a cache: adopting T1's released one if T1 is gone, else creating
 * one, racing T1's registration) and frees it last. --param 1: T1, before
 * exiting, creates T3 (pthread_create inside the program), which allocates
 * and frees a block and exits (adopting a released cache or creating one),
 * and joins it.
 *
 * Checked: blocks keep their contents while live, caches and slabs are
 * handed over without a race (the release store of FREE and the acquire CAS
 * that adopts), memory safety, termination (an exit waiting for a notifier),
 * and at the end no page is lost: the backend's live bytes are back to what
 * they were after setup (every slab of the exited threads was given back,
 * directly or through the adopting thread's pool). */
#include <pthread.h>

#include "pages/page_source.h"
#include "jw_client.h"

#define SZ 64

static jwv_box box;
static uint64_t live_at_setup;

static void *t3_main(void *a) {
  (void)a;
  char *p = jwv_malloc(SZ);
  jwv_fill(p, SZ, 0x33);
  jwv_check(p, SZ, 0x33);
  jwv_free(p);
  return NULL;
}

static void t1(void *a) {
  (void)a;
  char *p = jwv_malloc(SZ);
  jwv_fill(p, SZ, 0x11);
  jwv_send(&box, p);
  if (vrf_param()) {
    pthread_t t;
    VRF_ASSERT(pthread_create(&t, NULL, t3_main, NULL) == 0);
    VRF_ASSERT(pthread_join(t, NULL) == 0);
  }
}

static void t2(void *a) {
  (void)a;
  char *q = NULL;
  if (vrf_param() == 2) {
    q = jwv_malloc(SZ);
    jwv_fill(q, SZ, 0x22);
  }
  char *p = jwv_receive(&box);
  jwv_check(p, SZ, 0x11);
  jwv_free(p);
  if (q) {
    jwv_check(q, SZ, 0x22);
    jwv_free(q);
  }
}

static void setup(void) {
  jwv_option("RECLAIM", 0);
  jwv_free(jwv_malloc(SZ)); /* global initialization; T0's own cache */
  jwv_free(jwv_malloc(32 << 10));
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  live_at_setup = st.live_bytes;
}

static void finish(void) {
  jwv_free(jwv_malloc(32 << 10)); /* a range: takes the backend lock, deferred frees drained */
  jw_pages_stats st;
  vrf_enter_allocator();
  jw_pages_get_stats(&st);
  vrf_leave_allocator();
  if (st.live_bytes != live_at_setup)
    vrf_fail("backend live bytes %lu after every thread exited, expected %lu", (unsigned long)st.live_bytes,
             (unsigned long)live_at_setup);
}

VRF_CLIENT(.name = "threads", .about = "jwmalloc thread caches: attach (adopt or create), exit with a block out, "
                                       "remote free onto the exited thread's slab",
           .bound = "T1 allocates a block and exits, T2 frees it; param 1: T1 also creates and joins T3, which "
                    "allocates and frees; param 2 (beyond the budget): T2 first allocates one, frees it last",
           .setup = setup, .threads = {t1, t2}, .finish = finish);
