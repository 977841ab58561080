/* glibc's own allocator entry points (exported by libc.so.6 under these
 * names), for preloads that wrap glibc's malloc without going through dlsym:
 * the trace recorder, and the test allocator of tests/bench. */
#ifndef JWB_GLIBC_MALLOC_H
#define JWB_GLIBC_MALLOC_H

#include <stddef.h>

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

#endif
