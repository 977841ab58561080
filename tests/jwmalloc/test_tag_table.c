/* Publication of a tag table (frontend/page_tag.h, docs/design/frontend.md
 * "The tag table"): a thread that learns of a GiB's table only through its
 * directory entry, with nothing else ordering it after the thread that
 * mapped the table, writes and reads the table's words. Under
 * ThreadSanitizer each case fails (a race between the mapper's mmap and the
 * word's access) unless the directory entry is read with acquire, pairing
 * with the release of the CAS that publishes it; every build checks what
 * the words hold and that one table per GiB is mapped.
 *
 * Usage: test_tag_table CASE
 *   slot    a thread started before the table exists waits for its
 *           directory entry (jw_tag_slot), then writes the words of the
 *           table's first and last pages; the mapper reads them back
 *   cache   the same through the free path's per-thread cache of a table
 *           (jw_tag_cache): the words of a fresh table read 0
 *   losers  threads map the table of one GiB at once: one table is
 *           published (2 MiB counted once), every thread finds the same one
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frontend/page_tag.h"
#include "thread_test.h"

#define RACERS 4

/* An address in a GiB with no table yet, below 2^47 (a user address): the
 * highest such GiB but the last, which no heap reaches in these tests. */
static uintptr_t fresh_gib(void) {
  for (uintptr_t g = JW_TAG_DIR_SIZE - 2; g > 0; g--) {
    uintptr_t a = g << JW_TAG_GIB_SHIFT;
    if (jw_tag_slot(a) == NULL) return a;
  }
  fprintf(stderr, "no GiB without a tag table\n");
  exit(1);
}

static uintptr_t gib;                         /* set before the threads start */
static const uint64_t word_value = 0x5a5a00u; /* a key (low 8 bits clear) | class 0 */

/* The last 4 KiB page of the GiB: its word is on the table's last page. */
static uintptr_t last_page(void) { return gib + ((uintptr_t)1 << JW_TAG_GIB_SHIFT) - 4096; }

static void *slot_writer(void *arg) {
  (void)arg;
  TEST_WAIT_UNTIL(jw_tag_slot(gib) != NULL);
  jw_store(jw_tag_slot(gib), word_value, JW_RELAXED);
  jw_store(jw_tag_slot(last_page()), word_value, JW_RELAXED);
  return NULL;
}

static void *cache_reader(void *arg) {
  (void)arg;
  uintptr_t last = 0;
  jw_atomic_u64 *words = NULL;
  TEST_WAIT_UNTIL(jw_tag_cache(&last, &words, gib));
  /* As the free fast path reads: words indexed by the page index. */
  uint64_t first = jw_load(&words[gib >> 12], JW_RELAXED);
  uint64_t end = jw_load(&words[last_page() >> 12], JW_RELAXED);
  CHECK(last == (last_page() >> 12), "cache: last page index %#lx, not %#lx", (unsigned long)last,
        (unsigned long)(last_page() >> 12));
  CHECK(first == 0 && end == 0, "cache: a fresh table reads %#llx and %#llx, not 0", (unsigned long long)first,
        (unsigned long long)end);
  return NULL;
}

/* The waiter starts before the table is mapped, so that thread creation
 * orders nothing of the mapping before its accesses. */
static void case_one_waiter(void *(*waiter)(void *), const char *name) {
  gib = fresh_gib();
  uint64_t before = jw_tag_table_bytes();
  pthread_t t;
  pthread_create(&t, NULL, waiter, NULL);
  jw_tag_prepare(gib);
  pthread_join(t, NULL);
  CHECK(jw_tag_table_bytes() - before == JW_TAG_WORDS * sizeof(uint64_t), "%s: %llu bytes of tables mapped, not 2 MiB",
        name, (unsigned long long)(jw_tag_table_bytes() - before));
  if (waiter == slot_writer) {
    uint64_t a = jw_load(jw_tag_slot(gib), JW_RELAXED), b = jw_load(jw_tag_slot(last_page()), JW_RELAXED);
    CHECK(a == word_value && b == word_value, "slot: the words read %#llx and %#llx, not the %#llx written",
          (unsigned long long)a, (unsigned long long)b, (unsigned long long)word_value);
  }
  printf("%s: a thread that learned of the table from its directory entry used it\n", name);
}

static atomic_int go;
static jw_atomic_u64 *seen[RACERS];

static void *racer(void *arg) {
  int id = (int)(intptr_t)arg;
  for (unsigned round = 0; !atomic_load_explicit(&go, memory_order_relaxed); test_backoff(&round)) {
  }
  jw_tag_prepare(gib + (uintptr_t)id * 4096);
  seen[id] = jw_tag_slot(gib);
  /* Each racer writes its own page's word of the table it found. */
  jw_store(jw_tag_slot(gib + (uintptr_t)id * 4096), word_value | (uint64_t)id << 1, JW_RELAXED);
  return NULL;
}

static void case_losers(void) {
  gib = fresh_gib();
  uint64_t before = jw_tag_table_bytes();
  pthread_t t[RACERS];
  for (int i = 0; i < RACERS; i++) pthread_create(&t[i], NULL, racer, (void *)(intptr_t)i);
  atomic_store_explicit(&go, 1, memory_order_relaxed);
  for (int i = 0; i < RACERS; i++) pthread_join(t[i], NULL);
  CHECK(jw_tag_table_bytes() - before == JW_TAG_WORDS * sizeof(uint64_t),
        "losers: %llu bytes of tables counted for one GiB, not 2 MiB", (unsigned long long)(jw_tag_table_bytes() - before));
  for (int i = 0; i < RACERS; i++) {
    CHECK(seen[i] == jw_tag_slot(gib), "losers: racer %d found table %p, not the published %p", i, (void *)seen[i],
          (void *)jw_tag_slot(gib));
    uint64_t w = jw_load(jw_tag_slot(gib + (uintptr_t)i * 4096), JW_RELAXED);
    CHECK(w == (word_value | (uint64_t)i << 1), "losers: racer %d's word reads %#llx", i, (unsigned long long)w);
  }
  printf("losers: %d threads mapped one GiB's table at once; one table published\n", RACERS);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s slot|cache|losers\n", argv[0]);
    return 2;
  }
  (void)rnd;
  check_and_free(make(24, 1)); /* initialized: the page size jw_os_map needs */
  if (!strcmp(argv[1], "slot")) case_one_waiter(slot_writer, "slot");
  else if (!strcmp(argv[1], "cache")) case_one_waiter(cache_reader, "cache");
  else if (!strcmp(argv[1], "losers")) case_losers();
  else {
    fprintf(stderr, "unknown case %s\n", argv[1]);
    return 2;
  }
  return test_failures() ? 1 : 0;
}
