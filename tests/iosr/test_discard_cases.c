/* The app changing its memory while IOSR writes it out (issue 22): what the
 * app gets is what the kernel would give it, and nothing waits forever.
 *
 *   madv-free      MADV_FREE over pages write-protected for swap-out, then a
 *                  write to one of them: the write completes
 *   mlock          an mlock'ed part of a region stays resident, whether it
 *                  was locked before the reclaim or while a drop was under
 *                  way (the dropper's madvise then fails part-way)
 *   munmap         munmap of part of a drop's range before the dropper runs
 *                  it: the app's pages outside the hole keep their data
 *   mremap-merged  one mremap moving 100 adjacent regions (one VMA, 100
 *                  spans): every page follows, no slot leaks
 *   mremap-drop    pages of a drop's range moved away with mremap before the
 *                  dropper runs it, one part moved back at once, one kept
 *                  away until the drop is done: both keep their data
 *   mremap-discard pages of a drop's range moved away while the dropper
 *                  runs it (it finds nothing there), moved back and
 *                  discarded by the app before the daemon reads the
 *                  confirmation: they read zero, as the kernel gives
 *   mremap-into    a drop's pages moved away before the dropper runs it, and
 *                  other (resident) pages moved to their addresses: the
 *                  dropper discards by address, and must leave those alone
 *   mremap-into-after-check  the same after the dropper chose what to
 *                  discard: its madvise takes the pages moved in, and each
 *                  gives SIGBUS, never zero
 *   mremap-writing pages being written out moved into a waiting drop's
 *                  addresses after its dropper chose what to discard there,
 *                  then written by the app: the write waits for the drop
 *                  and lands, nothing reads zero
 *   split-during-drop  the app splits a run into three VMAs (mprotect of its
 *                  middle) while the dropper's madvise waits for its REMOVE
 *                  to be read: the kernel then zaps VMA by VMA and sends a
 *                  REMOVE for each remaining part, and those are the
 *                  dropper's, not the app's: every page keeps its data
 *   mlockall       the app locks all it has after connecting (libiosr's own
 *                  mappings too, the dropper's marks among them), then a
 *                  region is made and reclaimed: every page is swapped out
 *                  and reads back its data
 *   mlockall-future  mlockall(MCL_CURRENT | MCL_FUTURE) before the region is
 *                  made (the kernel populates it before it is registered):
 *                  locked, no page goes; after munlockall every page is
 *                  swapped out and reads back its data
 *
 * In-process engine; the dropper is held where a case needs it (gate.h).
 * Those cases run with IOSR_MOVEOUT=0: a page moved out never reaches the
 * dropper, and these are the dropper's path, taken by every page the kernel
 * will not move (a fork's shared page, a locked VMA). */
#include "gate.h"
#include "util.h"
#include "uffd/vmas.h"

#include <poll.h>

static iosr_engine *eng;
static iosr_test_env env;

static void *reclaimer(void *arg) {
  iosr_ctl *c = iosr_ctl_open_engine(eng);
  uint64_t got;
  CHECK(c);
  iosr_ctl_reclaim(c, (const char *)arg, 0, &got); /* kept pages make it fail: the checks are the caller's */
  iosr_ctl_close(c);
  return NULL;
}

static uint64_t slots_used(void) { return iosr_test_stat(env.ctl, "\"used\":"); }
static iosr_app_stats stats(void) {
  iosr_app_stats st;
  CHECK(iosr_ctl_app_stats(env.ctl, "disc", &st) == 0);
  return st;
}
/* pages holding a slot: on the swap area only, or clean (design note section 3) */
static uint64_t held(void) {
  iosr_app_stats st = stats();
  return st.swapped_pages + st.clean_pages;
}

static void *late_writer(void *arg) {
  iosr_fill(arg, 61, 5, 1);
  return NULL;
}

static void madv_free(uint8_t *p, uint64_t n) {
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 1) == 0);
  pthread_t t, w;
  CHECK(pthread_create(&t, NULL, reclaimer, "disc") == 0);
  iosr_test_wait_queued(env.ctl, 1); /* pages write-protected, writes queued */
  CHECK(madvise(p, n * 4096, MADV_FREE) == 0);
  CHECK(pthread_create(&w, NULL, late_writer, p + 5 * 4096) == 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 60;
  CHECK(pthread_timedjoin_np(w, NULL, &ts) == 0, "a write after MADV_FREE did not complete within 60 s");
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 0) == 0);
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  for (uint64_t i = 0; i < n; i++) {
    const uint8_t *q = p + i * 4096;
    if (i == 5) CHECK(iosr_check(q, 61, 5, 1), "the page written after MADV_FREE lost the write");
    else CHECK(iosr_is_zero(q) || iosr_check(q, 61, i, 0), "MADV_FREE'd page %llu holds other bytes",
               (unsigned long long)i);
  }
  printf("madv-free: the write after MADV_FREE completed; freed pages read zero or their old data\n");
}

/* The range of the drop held at the gate. */
static void held_range(uint64_t *start, uint64_t *len) {
  pthread_mutex_lock(&env.ctx->mu);
  *start = env.ctx->cur.start;
  *len = env.ctx->cur.len;
  pthread_mutex_unlock(&env.ctx->mu);
  CHECK(*len >= 3 * 4096, "the held drop covers %llu bytes", (unsigned long long)*len);
}

/* A reclaim whose drop is held at the gate (its range in *s, *len): the
 * starting point of the cases that act on DROPPING pages. */
static pthread_t held_drop(uint64_t *s, uint64_t *len) {
  gate_close(0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reclaimer, "disc") == 0);
  gate_wait(60);
  held_range(s, len);
  return t;
}

static void verify(const uint8_t *p, uint64_t n, uint64_t hole_lo, uint64_t hole_hi, uint64_t seed, const char *what) {
  for (uint64_t i = 0; i < n; i++)
    if (i < hole_lo || i >= hole_hi)
      CHECK(iosr_check(p + i * 4096, seed, i, 0), "%s: page %llu holds other bytes", what, (unsigned long long)i);
}

typedef struct lock_range {
  uint64_t start, len;
  int rc;
} lock_range;

static void *locker(void *arg) {
  lock_range *l = arg;
  l->rc = mlock((void *)(uintptr_t)l->start, l->len);
  return NULL;
}

static int range_locked(uint64_t addr) {
  iosr_vma *v = NULL;
  long n = iosr_vmas_flagged(getpid(), addr >> 12, (addr >> 12) + 1, IOSR_VMA_LOCKED, &v);
  free(v);
  return n > 0;
}

static void mlocked(uint8_t *p, uint64_t n) {
  /* locked before the reclaim: not a candidate */
  CHECK(mlock(p + 128 * 4096, 128 * 4096) == 0);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reclaimer, "disc") == 0);
  pthread_join(t, NULL);
  iosr_app_stats st = stats();
  CHECK(st.resident_pages == 128 && st.swapped_pages == n - 128, "locked part: resident %llu swapped %llu",
        (unsigned long long)st.resident_pages, (unsigned long long)st.swapped_pages);
  verify(p, n, 0, 0, 61, "after reclaim with a locked part");
  CHECK(munlock(p + 128 * 4096, 128 * 4096) == 0);
  /* locked while a drop waits: its madvise discards up to the locked VMA */
  uint64_t s, len;
  t = held_drop(&s, &len);
  uint64_t third = len / 3 & ~4095ull;
  /* mlock write-faults every page it locks, and these wait for the drop: it
   * runs on its own thread, the dropper goes on once the VMA is locked */
  lock_range lr = {s + third, third, 0};
  pthread_t lt;
  CHECK(pthread_create(&lt, NULL, locker, &lr) == 0);
  for (int i = 0; i < 6000 && !range_locked(s + third); i++) usleep(10000);
  CHECK(range_locked(s + third), "the range did not show as locked in smaps");
  gate_open();
  pthread_join(t, NULL);
  pthread_join(lt, NULL);
  CHECK(lr.rc == 0);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  verify(p, n, 0, 0, 61, "after a drop refused part-way by mlock");
  CHECK(slots_used() == held(), "slots used %llu, swapped + clean %llu", (unsigned long long)slots_used(),
        (unsigned long long)held());
  CHECK(munlock((void *)(uintptr_t)(s + third), third) == 0);
  printf("mlock: locked pages stayed resident, a drop refused part-way lost nothing\n");
}

static void unmapped(uint8_t *p, uint64_t n) {
  uint64_t s, len;
  pthread_t t = held_drop(&s, &len);
  uint64_t third = len / 3 & ~4095ull, hole = s + third;
  CHECK(munmap((void *)(uintptr_t)hole, third) == 0);
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  uint64_t lo = (hole - (uintptr_t)p) / 4096, hi = lo + third / 4096;
  verify(p, n, lo, hi, 61, "munmap inside a drop");
  CHECK(slots_used() == held(), "slots used %llu, swapped + clean %llu", (unsigned long long)slots_used(),
        (unsigned long long)held());
  printf("munmap: pages %llu-%llu unmapped inside a drop; every other page kept its data\n", (unsigned long long)lo,
         (unsigned long long)hi - 1);
}

/* mremap of DROPPING pages: the dropper discards at the old addresses. */
static void remap_drop(uint8_t *p, uint64_t n) {
  uint8_t *away = mmap(NULL, 2 * 64 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(away != MAP_FAILED);
  uint64_t s, len;
  pthread_t t = held_drop(&s, &len);
  uint64_t third = len / 3 & ~4095ull;
  if (third > 64 * 4096) third = 64 * 4096;
  uint8_t *back = (uint8_t *)(uintptr_t)s, *kept = back + third, *kept_at = away + 64 * 4096;
  /* moved away and back before the dropper runs: it finds them there */
  CHECK(mremap(back, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
  CHECK(mremap(away, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, back) == back);
  /* moved away until the drop is done: the dropper finds nothing there */
  CHECK(mremap(kept, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, kept_at) == kept_at);
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  uint64_t lo = (uint64_t)(kept - p) / 4096, hi = lo + third / 4096;
  for (uint64_t i = lo; i < hi; i++)
    CHECK(iosr_check(kept_at + (i - lo) * 4096, 61, i, 0), "page %llu, kept away during the drop, holds other bytes",
          (unsigned long long)i);
  CHECK(mremap(kept_at, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, kept) == kept);
  verify(p, n, 0, 0, 61, "mremap inside a drop");
  CHECK(slots_used() == held(), "slots used %llu, swapped + clean %llu", (unsigned long long)slots_used(),
        (unsigned long long)held());
  printf("mremap-drop: %llu pages of a drop moved away and back, %llu kept away during it: every page kept its data\n",
         (unsigned long long)third / 4096, (unsigned long long)third / 4096);
}

/* mlockall(MCL_CURRENT) after iosr_connect: what libiosr mapped is locked;
 * the region, made after, is not. */
static void locked_all(uint8_t *p, uint64_t n) {
  uint64_t got;
  CHECK(iosr_ctl_reclaim(env.ctl, "disc", 0, &got) == 0);
  iosr_app_stats st = stats();
  CHECK(st.swapped_pages == n && got == n * 4096, "after mlockall: %llu pages swapped of %llu",
        (unsigned long long)st.swapped_pages, (unsigned long long)n);
  verify(p, n, 0, 0, 61, "reclaimed after mlockall");
  CHECK(munlockall() == 0);
  printf("mlockall: libiosr's locked mappings did not stop the reclaim; every page came back\n");
}

/* mlockall(MCL_CURRENT | MCL_FUTURE) before the region was made: the kernel
 * populated it before it was registered (design note section 3, "Pages
 * present at registration"). */
static void locked_future(uint8_t *p, uint64_t n) {
  uint64_t got;
  iosr_app_stats st = stats();
  CHECK(st.resident_pages >= n, "a region populated at registration: %llu of %llu pages counted resident",
        (unsigned long long)st.resident_pages, (unsigned long long)n);
  CHECK(iosr_ctl_reclaim(env.ctl, "disc", 0, &got) == 0 || errno == EIO);
  st = stats();
  CHECK(st.swapped_pages == 0, "locked: %llu pages swapped out", (unsigned long long)st.swapped_pages);
  verify(p, n, 0, 0, 61, "reclaimed while locked");
  CHECK(munlockall() == 0);
  /* a graveyard page the lock populated refuses the first moves (design
   * note section 3, "Moved out"): those pages go at the next reclaim */
  for (int i = 0; i < 3 && stats().swapped_pages < n; i++) CHECK(iosr_ctl_reclaim(env.ctl, "disc", 0, &got) == 0);
  st = stats();
  CHECK(st.swapped_pages == n, "after munlockall: %llu pages swapped of %llu", (unsigned long long)st.swapped_pages,
        (unsigned long long)n);
  verify(p, n, 0, 0, 61, "reclaimed after munlockall");
  printf("mlockall-future: a region populated when made stayed while locked, and went out after munlockall; every "
         "page came back\n");
}

/* The dropper is held after its run mark; the engine stops reading events,
 * the dropper's madvise sends its REMOVE over the whole run and waits; the
 * app then splits the run into three VMAs (a middle part read-only) and the
 * engine reads again. The kernel zaps the first VMA's part, then sends a
 * REMOVE over the middle part and one over the last (repeating what the
 * first covered): none of them is the app's discard. */
static void split_during_drop(uint8_t *p, uint64_t n) {
  uint64_t s, len;
  gate_close(3);
  pthread_t t;
  CHECK(pthread_create(&t, NULL, reclaimer, "disc") == 0);
  gate_wait(60);
  held_range(&s, &len);
  CHECK(len >= 16 * 4096, "the held drop covers %llu bytes", (unsigned long long)len);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_HOLD_EVENTS, 1) == 0);
  gate_open();
  /* the dropper's REMOVE is pending once the userfaultfd is readable */
  struct pollfd pf = {env.ctx->uffd, POLLIN, 0};
  CHECK(poll(&pf, 1, 60000) == 1, "the dropper's madvise made no event within 60 s");
  uint8_t *mid = (uint8_t *)(uintptr_t)(s + len / 3 / 4096 * 4096);
  size_t mlen = len / 3 / 4096 * 4096;
  CHECK(mprotect(mid, mlen, PROT_READ) == 0);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_HOLD_EVENTS, 0) == 0);
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  CHECK(mprotect(mid, mlen, PROT_READ | PROT_WRITE) == 0);
  CHECK(held() > 0, "nothing was swapped out");
  verify(p, n, 0, 0, 61, "split during the drop");
  printf("split-during-drop: the kernel's REMOVE per split part was the dropper's; every page kept its data\n");
}

/* A drop runs while part of its range is away; the app moves the part back
 * and discards it before the confirmation is read: the only REMOVE over
 * those pages is the app's, and they must read zero. */
static void remap_discard(uint8_t *p, uint64_t n) {
  uint8_t *away = mmap(NULL, 64 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(away != MAP_FAILED);
  uint64_t s, len;
  pthread_t t = held_drop(&s, &len);
  uint64_t third = len / 3 & ~4095ull;
  if (third > 64 * 4096) third = 64 * 4096;
  uint8_t *part = (uint8_t *)(uintptr_t)s;
  CHECK(mremap(part, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
  gate_move(1); /* the dropper runs the drop (over a hole there) and waits before confirming */
  gate_wait(60);
  CHECK(mremap(away, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, part) == part);
  CHECK(madvise(part, third, MADV_DONTNEED) == 0);
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  uint64_t lo = (uint64_t)(part - p) / 4096, hi = lo + third / 4096;
  for (uint64_t i = lo; i < hi; i++)
    CHECK(iosr_is_zero(p + i * 4096), "page %llu, discarded by the app after its drop ran elsewhere, is not zero",
          (unsigned long long)i);
  verify(p, n, lo, hi, 61, "mremap and discard inside a drop");
  CHECK(slots_used() == held(), "slots used %llu, swapped + clean %llu", (unsigned long long)slots_used(),
        (unsigned long long)held());
  printf("mremap-discard: %llu pages moved away during their drop, back, then discarded: they read zero\n",
         (unsigned long long)third / 4096);
}

/* After pages of region `other` (filled with `seed`, page 0 written once
 * more when `wrote0`) were moved to `at`, over a held drop's pages that were
 * moved `away`: each holds its own bytes; both moves undone, the drop's pages
 * read right and the slots in use are the pages that hold one. */
static void check_moved_in(uint8_t *p, uint64_t n, iosr_region *other, uint8_t *at, uint8_t *away, uint64_t len,
                           unsigned seed, int wrote0) {
  uint8_t *o = iosr_region_base(other);
  for (uint64_t i = 0; i < len / 4096; i++)
    CHECK(iosr_check(at + i * 4096, seed, i, wrote0 && i == 0), "page %llu moved into a drop's addresses holds other bytes (%s)",
          (unsigned long long)i, iosr_is_zero(at + i * 4096) ? "zero: the dropper discarded it" : "not zero");
  uint64_t lo = (uint64_t)(at - p) / 4096;
  for (uint64_t i = 0; i < len / 4096; i++)
    CHECK(iosr_check(away + i * 4096, 61, lo + i, 0), "page %llu of the drop, moved away, holds other bytes",
          (unsigned long long)(lo + i));
  CHECK(mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, o) == o);
  CHECK(mremap(away, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at);
  verify(p, n, 0, 0, 61, "moved back");
  CHECK(iosr_region_destroy(other) == 0);
  CHECK(slots_used() == held(), "slots used %llu, swapped + clean %llu", (unsigned long long)slots_used(),
        (unsigned long long)held());
}

/* The addresses of a drop held before it runs get other pages: its own are
 * moved away, pages of a region made after the reclaim began (resident, not
 * being swapped out) are moved in. */
/* A drop held before it runs (its first pages at *at, *len bytes, at most
 * 64 pages), a scratch range for them (*away), and a new region *other of as
 * many resident pages, filled with seed. */
static pthread_t held_drop_other(uint8_t **at, uint8_t **away, uint64_t *len, iosr_region **other, unsigned seed) {
  *away = mmap(NULL, 64 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(*away != MAP_FAILED);
  uint64_t s;
  pthread_t t = held_drop(&s, len);
  if (*len > 64 * 4096) *len = 64 * 4096;
  *other = iosr_region_create(env.ctx, *len);
  CHECK(*other);
  uint8_t *o = iosr_region_base(*other);
  for (uint64_t i = 0; i < *len / 4096; i++) iosr_fill(o + i * 4096, seed, i, 0);
  *at = (uint8_t *)(uintptr_t)s;
  return t;
}

static void remap_into(uint8_t *p, uint64_t n) {
  uint8_t *at, *away;
  uint64_t len;
  iosr_region *other;
  pthread_t t = held_drop_other(&at, &away, &len, &other, 63);
  uint8_t *o = iosr_region_base(other);
  CHECK(mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
  CHECK(mremap(o, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at);
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  check_moved_in(p, n, other, at, away, len, 63, 0);
  printf("mremap-into: %llu resident pages moved into a waiting drop's addresses kept their data\n",
         (unsigned long long)len / 4096);
}

static void *page_writer(void *arg) {
  iosr_fill(arg, 64, 0, 1);
  return NULL;
}

/* Pages of a second region, being written out (their writes held), are
 * moved where a held drop's pages were; the dropper chooses them to discard
 * (they are write-protected), and then the app writes one of them. */
static void remap_writing(uint8_t *p, uint64_t n) {
  uint8_t *away = mmap(NULL, 64 * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(away != MAP_FAILED);
  uint64_t s, len;
  pthread_t t = held_drop(&s, &len);
  uint64_t third = len / 3 & ~4095ull;
  if (third > 16 * 4096) third = 16 * 4096;
  iosr_region *other = iosr_region_create(env.ctx, third);
  CHECK(other);
  uint8_t *o = iosr_region_base(other), *at = (uint8_t *)(uintptr_t)s;
  for (uint64_t i = 0; i < third / 4096; i++) iosr_fill(o + i * 4096, 64, i, 0);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 1) == 0);
  pthread_t t2;
  CHECK(pthread_create(&t2, NULL, reclaimer, "disc") == 0);
  iosr_test_wait_queued(env.ctl, 1); /* the other region's pages: WRITING */
  CHECK(mremap(at, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
  CHECK(mremap(o, third, third, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at);
  gate_move(2); /* the dropper reads which pages to discard: those, protected */
  gate_wait(60);
  uint64_t wp0 = stats().wp_faults;
  pthread_t w;
  CHECK(pthread_create(&w, NULL, page_writer, at) == 0);
  for (int i = 0; i < 5000 && stats().wp_faults == wp0; i++) usleep(1000);
  CHECK(stats().wp_faults > wp0, "the write did not fault on the page being written out");
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_test(env.ctl, IOSR_TEST_PAUSE, 0) == 0);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  ts.tv_sec += 60;
  CHECK(pthread_timedjoin_np(w, NULL, &ts) == 0, "the write did not complete within 60 s");
  pthread_join(t2, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  check_moved_in(p, n, other, at, away, third, 64, 1);
  printf("mremap-writing: a write to a page being written out, moved into a waiting drop's addresses, landed\n");
}

/* Resident pages of a second region moved where a held drop's pages were
 * after the dropper chose what to discard there (its pagemap check saw the
 * drop's own pages, protected): its madvise discards by address and takes
 * them, and their bytes are nowhere else. Each gives SIGBUS, never zero or
 * other bytes; the drop's own pages, moved away, keep theirs. */
static void remap_into_after_check(uint8_t *p, uint64_t n) {
  uint8_t *at, *away;
  uint64_t len;
  iosr_region *other;
  pthread_t t = held_drop_other(&at, &away, &len, &other, 65);
  uint8_t *o = iosr_region_base(other);
  gate_move(2); /* the dropper reads which pages to discard: the drop's own, protected */
  gate_wait(60);
  CHECK(mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, away) == away);
  CHECK(mremap(o, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at);
  gate_open();
  pthread_join(t, NULL);
  CHECK(iosr_ctl_wait_idle(env.ctl) == 0);
  uint64_t lo = (uint64_t)(at - p) / 4096, bus = 0;
  iosr_catch_bus(1);
  for (uint64_t i = 0; i < len / 4096; i++) {
    int b = iosr_touch_bus(at + i * 4096);
    CHECK(b || iosr_check(at + i * 4096, 65, i, 0), "page %llu moved in after the check holds %s", (unsigned long long)i,
          iosr_is_zero(at + i * 4096) ? "zero" : "other bytes");
    bus += b;
  }
  iosr_catch_bus(0);
  CHECK(bus == len / 4096, "%llu of %llu pages moved in after the check gave SIGBUS: the dropper discarded them all",
        (unsigned long long)bus, (unsigned long long)len / 4096);
  for (uint64_t i = 0; i < len / 4096; i++)
    CHECK(iosr_check(away + i * 4096, 61, lo + i, 0), "page %llu of the drop, moved away, holds other bytes",
          (unsigned long long)(lo + i));
  /* the lost pages are discarded (the poison goes), the drop's moved back */
  CHECK(madvise(at, len, MADV_DONTNEED) == 0);
  CHECK(mremap(at, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, o) == o);
  CHECK(mremap(away, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, at) == at);
  verify(p, n, 0, 0, 61, "moved back");
  CHECK(iosr_region_destroy(other) == 0);
  printf("mremap-into-after-check: %llu resident pages the dropper discarded gave SIGBUS, none read zero\n",
         (unsigned long long)bus);
}

#define NREG 100u
#define REGP 4u

static int by_base(const void *x, const void *y) {
  uintptr_t a = (uintptr_t)iosr_region_base(*(iosr_region *const *)x);
  uintptr_t b = (uintptr_t)iosr_region_base(*(iosr_region *const *)y);
  return a < b ? -1 : a > b;
}

static void merged_remap(void) {
  /* adjacent regions merge into one VMA; other mappings made meanwhile
   * (libiosr's record pages, malloc arenas) may fall between some, so more
   * are made and a run of NREG adjacent ones is used */
  enum { MADE = 3 * NREG };
  iosr_region *all[MADE];
  for (unsigned i = 0; i < MADE; i++) CHECK((all[i] = iosr_region_create_aligned(env.ctx, REGP * 4096, 4096)));
  qsort(all, MADE, sizeof all[0], by_base);
  unsigned first = 0, run = 1;
  for (unsigned i = 1; i < MADE && run < NREG; i++) {
    if ((uint8_t *)iosr_region_base(all[i]) == (uint8_t *)iosr_region_base(all[i - 1]) + REGP * 4096) {
      run++;
    } else {
      first = i;
      run = 1;
    }
  }
  CHECK(run >= NREG, "no %u adjacent regions among %u made: cannot build one VMA of %u regions", NREG, MADE, NREG);
  iosr_region **rs = all + first;
  for (unsigned i = 0; i < MADE; i++)
    if (i < first || i >= first + NREG) CHECK(iosr_region_destroy(all[i]) == 0);
  uint8_t *lo = iosr_region_base(rs[0]);
  const uint64_t n = NREG * REGP;
  for (uint64_t i = 0; i < n; i++) iosr_fill(lo + i * 4096, 62, i, 0);
  uint64_t got;
  CHECK(iosr_ctl_reclaim(env.ctl, "disc", 0, &got) == 0 && got == n * 4096);
  uint8_t *dst = mmap(NULL, n * 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  CHECK(dst != MAP_FAILED);
  /* one mremap of the one VMA the adjacent regions merged into */
  CHECK(mremap(lo, n * 4096, n * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, dst) == dst,
        "mremap over %u regions: %s (not merged into one VMA?)", NREG, strerror(errno));
  for (uint64_t i = 0; i < n; i++)
    CHECK(iosr_check(dst + i * 4096, 62, i, 0), "page %llu (region %llu) after the move", (unsigned long long)i,
          (unsigned long long)(i / REGP));
  CHECK(iosr_ctl_reclaim(env.ctl, "disc", 0, &got) == 0);
  CHECK(slots_used() == held() && stats().swapped_pages == n, "slots used %llu, swapped %llu",
        (unsigned long long)slots_used(), (unsigned long long)stats().swapped_pages);
  CHECK(mremap(dst, n * 4096, n * 4096, MREMAP_MAYMOVE | MREMAP_FIXED, lo) == lo);
  for (uint64_t i = 0; i < n; i++) CHECK(iosr_check(lo + i * 4096, 62, i, 0), "page %llu moved back", (unsigned long long)i);
  for (unsigned i = 0; i < NREG; i++) CHECK(iosr_region_destroy(rs[i]) == 0);
  CHECK(slots_used() == 0, "%llu slots leaked", (unsigned long long)slots_used());
  printf("mremap of %u merged regions: every page followed, no slot leaked\n", NREG);
}

int main(int argc, char **argv) {
  const char *k = argc == 2 ? argv[1] : "";
  int mf = !strcmp(k, "madv-free"), ml = !strcmp(k, "mlock"), mu = !strcmp(k, "munmap"), mr = !strcmp(k, "mremap-merged");
  int md = !strcmp(k, "mremap-drop"), ma = !strcmp(k, "mlockall"), mx = !strcmp(k, "mremap-discard");
  int mi = !strcmp(k, "mremap-into"), mw = !strcmp(k, "mremap-writing"), sd = !strcmp(k, "split-during-drop");
  int mc = !strcmp(k, "mremap-into-after-check"), mff = !strcmp(k, "mlockall-future");
  if (!mf && !ml && !mu && !mr && !md && !ma && !mx && !mi && !mw && !sd && !mc && !mff) {
    fprintf(stderr, "usage: test_discard_cases madv-free|mlock|munmap|mremap-merged|mremap-drop|mremap-discard|"
                    "mremap-into|mremap-into-after-check|mremap-writing|split-during-drop|mlockall|mlockall-future\n");
    return 2;
  }
  iosr_test_require();
  /* the cases that hold a drop of the app's pages: the dropper's path, which
   * pages the kernel will not move out take (design note section 3) */
  int dropper = ml || mu || md || mx || mi || mw || sd || mc;
  iosr_test_inproc(&env, 32u << 20, dropper ? "test_hooks=1,reclaim_batch=128,moveout=0" : "test_hooks=1,reclaim_batch=128",
                   "disc");
  eng = env.eng;
  if (mr) {
    merged_remap();
  } else {
    const uint64_t n = 512;
    if (ma) CHECK(mlockall(MCL_CURRENT) == 0, "mlockall: %s", strerror(errno));
    if (mff) CHECK(mlockall(MCL_CURRENT | MCL_FUTURE) == 0, "mlockall: %s", strerror(errno));
    iosr_region *r = iosr_region_create(env.ctx, n * 4096);
    CHECK(r);
    uint8_t *p = iosr_region_base(r);
    for (uint64_t i = 0; i < n; i++) iosr_fill(p + i * 4096, 61, i, 0);
    if (mf) madv_free(p, n);
    else if (ml) mlocked(p, n);
    else if (md) remap_drop(p, n);
    else if (ma) locked_all(p, n);
    else if (mff) locked_future(p, n);
    else if (mx) remap_discard(p, n);
    else if (mi) remap_into(p, n);
    else if (mc) remap_into_after_check(p, n);
    else if (mw) remap_writing(p, n);
    else if (sd) split_during_drop(p, n);
    else unmapped(p, n);
    CHECK(iosr_region_destroy(r) == 0);
  }
  iosr_test_inproc_end(&env);
  iosr_test_cleanup();
  return 0;
}
