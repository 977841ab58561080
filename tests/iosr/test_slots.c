/* Slot allocation, unit level (brief: "Slot allocation"): global hands out
 * slots in request order from 256-slot clusters; process appends each app's
 * pages to its own 512-slot extents, taking the next extent when free; a slot
 * with I/O in flight is never reused before the I/O ends; bad slots are never
 * handed out; a full area says so; with no free extent an app refills its
 * own extents' holes before it takes another app's slots. */
#include "util.h"

#include "slots/slotmap.h"


int main(void) {
  iosr_slotmap m;
  CHECK(iosr_slotmap_init(&m, 2048) == 0);
  /* global: two apps alternating get alternating consecutive slots */
  for (uint32_t i = 0; i < 300; i++) {
    uint32_t s = iosr_slot_alloc_global(&m, 1 + (i & 1), 1000 + i / 2);
    CHECK(s == i);
    CHECK(iosr_rev_app(m.rev[s]) == 1 + (i & 1) && iosr_rev_vpn(m.rev[s]) == 1000 + i / 2);
  }
  CHECK(m.used == 300 && m.cl_owner[0] == IOSR_CL_GLOBAL && m.cl_owner[1] == IOSR_CL_GLOBAL);
  /* freeing: a slot with I/O in flight comes back only when the I/O ends */
  iosr_slot_io_begin(&m, 5);
  iosr_slot_put(&m, 5);
  CHECK(!iosr_slot_free(&m, 5) && m.used == 299);
  iosr_slot_io_end(&m, 5);
  CHECK(iosr_slot_free(&m, 5));
  /* a shared slot (fork) is freed by its last reference */
  CHECK(iosr_slot_ref(&m, 6) == 0);
  iosr_slot_put(&m, 6);
  CHECK(!iosr_slot_free(&m, 6));
  iosr_slot_put(&m, 6);
  CHECK(iosr_slot_free(&m, 6));
  /* bad slots stay out of use */
  iosr_slot_mark_bad(&m, 7);
  iosr_slot_put(&m, 7);
  CHECK(!iosr_slot_free(&m, 7) && m.bad == 1);
  for (uint32_t i = 0; i < 300; i++)
    if (i != 5 && i != 6 && i != 7) iosr_slot_put(&m, i);
  CHECK(m.used == 0);

  /* process: each app fills its own extent in order (a fresh area: the bad
   * slot above keeps extent 0 from ever being free again) */
  iosr_slotmap_destroy(&m);
  CHECK(iosr_slotmap_init(&m, 2048) == 0);
  iosr_extmap xa, xb;
  iosr_extmap_init(&xa);
  iosr_extmap_init(&xb);
  uint32_t a0 = iosr_slot_alloc_process(&m, &xa, 1, 0), b0 = iosr_slot_alloc_process(&m, &xb, 2, 0);
  CHECK(a0 % IOSR_EXTENT_SLOTS == 0 && b0 % IOSR_EXTENT_SLOTS == 0 && a0 / 512 != b0 / 512);
  for (uint32_t i = 1; i < 600; i++) {
    uint32_t sa = iosr_slot_alloc_process(&m, &xa, 1, i), sb = iosr_slot_alloc_process(&m, &xb, 2, i);
    if (i < 512) CHECK(sa == a0 + i && sb == b0 + i);
    else CHECK(sa / 512 != a0 / 512 && sb / 512 != b0 / 512 && sa / 512 != sb / 512);
  }
  CHECK(m.spills == 0);
  /* the extent after a full one is taken when it is free */
  iosr_extmap xc;
  iosr_extmap_init(&xc);
  iosr_slotmap m2;
  CHECK(iosr_slotmap_init(&m2, 4096) == 0);
  uint32_t c0 = iosr_slot_alloc_process(&m2, &xc, 3, 0);
  for (uint32_t i = 1; i < 1024; i++) CHECK(iosr_slot_alloc_process(&m2, &xc, 3, i) == c0 + i);

  /* process, no free extent left: an app refills the holes its own
   * swapped-in pages left, in its extents and in slot order, before it
   * spills into another app's (the evaluation saw the area otherwise
   * degenerate into single-slot spills: docs/design/iosr-eval.md) */
  iosr_slotmap m5;
  CHECK(iosr_slotmap_init(&m5, 2048) == 0);
  iosr_extmap xe, xf;
  iosr_extmap_init(&xe);
  iosr_extmap_init(&xf);
  uint32_t se[1024], sf[1024];
  for (uint32_t i = 0; i < 1024; i++) {
    se[i] = iosr_slot_alloc_process(&m5, &xe, 5, i);
    sf[i] = iosr_slot_alloc_process(&m5, &xf, 6, i);
    CHECK(se[i] != IOSR_NO_SLOT && sf[i] != IOSR_NO_SLOT);
  }
  CHECK(m5.used == 2048 && m5.spills == 0);
  for (uint32_t i = 0; i < 1024; i += 2) iosr_slot_put(&m5, se[i]); /* app 5's hot half came back in */
  for (uint32_t i = 0; i < 8; i++) iosr_slot_put(&m5, sf[i]);
  uint32_t prev = 0;
  for (uint32_t i = 0; i < 512; i++) {
    uint32_t s = iosr_slot_alloc_process(&m5, &xe, 5, 5000 + i);
    CHECK(s != IOSR_NO_SLOT && iosr_rev_app(m5.rev[s]) == 5);
    CHECK(m5.cl_owner[s / IOSR_CLUSTER_SLOTS] == 5 + 2); /* one of its own extents */
    if (i % 256) CHECK(s > prev);                        /* in slot order within an extent pass */
    prev = s;
  }
  CHECK(m5.spills == 0 && m5.holes > 0);
  /* its own extents are full again: the next page spills into app 6's hole */
  uint32_t sp = iosr_slot_alloc_process(&m5, &xe, 5, 9999);
  CHECK(sp != IOSR_NO_SLOT && m5.cl_owner[sp / IOSR_CLUSTER_SLOTS] == 6 + 2 && m5.spills == 1);
  iosr_slotmap_destroy(&m5);

  /* full area: NO_SLOT, never a slot in use */
  iosr_slotmap m3;
  CHECK(iosr_slotmap_init(&m3, 300) == 0);
  for (uint32_t i = 0; i < 300; i++) CHECK(iosr_slot_alloc_global(&m3, 1, i) != IOSR_NO_SLOT);
  CHECK(iosr_slot_alloc_global(&m3, 1, 999) == IOSR_NO_SLOT);
  iosr_extmap xd;
  iosr_extmap_init(&xd);
  CHECK(iosr_slot_alloc_process(&m3, &xd, 4, 0) == IOSR_NO_SLOT);
  iosr_slot_put(&m3, 17);
  CHECK(iosr_slot_alloc_process(&m3, &xd, 4, 0) == 17 && m3.spills == 1);
  /* resume claims: a slot claimed twice is refused */
  iosr_slotmap m4;
  CHECK(iosr_slotmap_init(&m4, 1024) == 0);
  CHECK(iosr_slot_claim(&m4, 1, 700, 5, 42) == 0 && iosr_slot_claim(&m4, 1, 700, 6, 43) == -1);
  CHECK(iosr_slot_claim(&m4, 1, 5000, 5, 1) == -1 && m4.used == 1);
  iosr_slotmap_destroy(&m);
  iosr_slotmap_destroy(&m2);
  iosr_slotmap_destroy(&m3);
  iosr_slotmap_destroy(&m4);
  printf("slots: ok\n");
  return 0;
}
