/* See page_tag.h and docs/design/frontend.md ("The tag table"). */
#include "page_tag.h"

#include "../os/os_mem.h"

jw_atomic_ptr jw_tag_dir[JW_TAG_DIR_SIZE];
static jw_atomic_u64 table_bytes;

#define TABLE_BYTES (JW_TAG_WORDS * sizeof(jw_atomic_u64))

void jw_tag_prepare(uintptr_t page) {
  jw_atomic_ptr *slot = &jw_tag_dir[(page >> JW_TAG_GIB_SHIFT) & (JW_TAG_DIR_SIZE - 1)];
  if (jw_load(slot, JW_RELAXED) != NULL) return;
  void *fresh = jw_os_map(TABLE_BYTES, 4096);
  if (fresh == NULL) return;
  void *expected = NULL;
  /* Release, paired with the acquire loads of jw_tag_slot and jw_tag_cache
   * (the only ways to the words): the table's mmap (its zeroed words)
   * happens before every access through the pointer. The early return
   * above may be relaxed: it reads no word. */
  if (jw_cas(slot, &expected, fresh, JW_RELEASE, JW_RELAXED)) jw_fetch_add(&table_bytes, TABLE_BYTES, JW_RELAXED);
  else jw_os_unmap(fresh, TABLE_BYTES);
}

uint64_t jw_tag_table_bytes(void) { return jw_load(&table_bytes, JW_RELAXED); }
