/* Two threads increment a plain counter: the data race must be reported. */
#include "vrf.h"

int counter;

static void inc(void *a) {
  (void)a;
  counter++;
}

VRF_CLIENT(.name = "plain_race", .about = "a plain counter incremented by two threads (planted bug)",
           .bound = "2 threads x 1 increment", .threads = {inc, inc}, .expect = "data race");
