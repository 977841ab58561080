/* Busy-wait loops (jw_cpu_relax) and loop bounds:
 *   -DSPIN_LOCK      correct test-and-set lock guarding a plain counter
 *   -DSPIN_FOREVER   waits for a value no thread writes (planted bug: no progress)
 *   -DSPIN_CAS_LOOP  a CAS retry loop that can never succeed (planted bug: loop bound) */
#include "common/atomic.h"
#include "vrf.h"

jw_atomic_u32 lock, flag, word;
int counter;

#if defined(SPIN_LOCK)
static void lock_acquire(void) {
  /* Acquire: the critical section sees the previous holder's writes. */
  while (jw_xchg(&lock, 1, JW_ACQUIRE) != 0)
    while (jw_load(&lock, JW_RELAXED) != 0) jw_cpu_relax();
}
static void lock_release(void) { jw_store(&lock, 0, JW_RELEASE); /* publishes the critical section */ }
/* --param 1: two threads, one round each (cross-checks the exploration modes). */
static int rounds_of(int t) {
  if (vrf_param() == 1) return t < 2 ? 1 : 0;
  return vrf_level() && t == 0 ? 2 : 1;
}
static void worker(void *a) {
  int rounds = rounds_of((int)(intptr_t)a);
  for (int i = 0; i < rounds; i++) {
    lock_acquire();
    counter++;
    lock_release();
  }
}
static void finish(void) { VRF_ASSERT(counter == rounds_of(0) + rounds_of(1) + rounds_of(2)); }
VRF_CLIENT(.name = "spinlock", .about = "test-and-test-and-set lock guarding a plain counter: no race, no lost update",
           .bound = "3 threads x 1 lock/increment/unlock (full: the first thread twice)",
           .threads = {worker, worker, worker}, .args = {(void *)0, (void *)1, (void *)2}, .finish = finish);

#elif defined(SPIN_FOREVER)
static void waiter(void *a) {
  (void)a;
  while (jw_load(&flag, JW_ACQUIRE) != 2) jw_cpu_relax(); /* BUG: nobody writes 2 */
}
static void setter(void *a) {
  (void)a;
  jw_store(&flag, 1, JW_RELEASE);
}
VRF_CLIENT(.name = "spin_forever", .about = "a spin loop waiting for a value no thread writes (planted bug)",
           .bound = "2 threads", .threads = {waiter, setter}, .expect = "no progress");

#else
static void claimer(void *a) {
  (void)a;
  uint32_t e;
  do {
    e = 5; /* BUG: the word never holds 5 */
  } while (!jw_cas(&word, &e, 6, JW_ACQ_REL, JW_RELAXED));
}
static void other(void *a) {
  (void)a;
  jw_store(&word, 1, JW_RELAXED);
}
VRF_CLIENT(.name = "spin_cas_loop", .about = "a CAS retry loop that can never succeed (planted bug)",
           .bound = "2 threads, at most 50 atomic operations per thread", .threads = {claimer, other},
           .max_events = 50, .expect = "loop bound");
#endif
