/* Allocator metadata memory (thread caches): a lock-free bump allocator over
 * 64 KiB chunks mapped from the OS. Memory is zeroed, 64-byte aligned and
 * never freed (thread caches are recycled instead). Thread-safe; never
 * calls malloc. NULL with errno=ENOMEM when the OS refuses memory. */
#ifndef JW_OS_META_H
#define JW_OS_META_H

#include <stddef.h>

void *jw_os_meta_alloc(size_t size);

#endif
