/* See os_swap.h and docs/design/stack.md. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif
#include "os_swap.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../common/atomic.h"
#include "../common/log.h"
#include "iosr.h"

typedef iosr_ctx *(*connect_fn)(const iosr_connect_opts *);
typedef iosr_region *(*create_fn)(iosr_ctx *, size_t, size_t);
typedef void *(*base_fn)(const iosr_region *);
typedef int (*destroy_fn)(iosr_region *);

/* Written once by the constructor before `ready` is released; read after an
 * acquire of `ready`. */
static create_fn p_create;
static base_fn p_base;
static destroy_fn p_destroy;
static iosr_ctx *ctx;
static jw_atomic_u64 ready; /* the pid of the process that connected; 0: off */

/* Root base -> region, fixed size: 4096 roots are 16 GiB of heap. A slot is
 * claimed by a CAS of its base from 0; the region pointer is stored before
 * the base is published (release), read after the base (acquire). */
#define SWAP_ROOTS 4096
static jw_atomic_uptr bases[SWAP_ROOTS];
static jw_atomic_uptr regions[SWAP_ROOTS];

void *jw_os_swap_map(size_t size, size_t align) {
  uint64_t pid = jw_load(&ready, JW_ACQUIRE);
  if (pid == 0 || pid != (uint64_t)getpid()) return NULL; /* off, or a fork child (ECHILD) */
  iosr_region *r = p_create(ctx, size, align);
  if (r == NULL) return NULL;
  uintptr_t b = (uintptr_t)p_base(r);
  for (size_t i = 0; i < SWAP_ROOTS; i++) {
    uintptr_t zero = 0;
    if (jw_load(&bases[i], JW_RELAXED) != 0) continue;
    jw_store(&regions[i], (uintptr_t)r, JW_RELAXED);
    /* Release: the region pointer above is seen by whoever reads this base. */
    if (jw_cas(&bases[i], &zero, b, JW_RELEASE, JW_RELAXED)) return (void *)b;
  }
  p_destroy(r); /* table full: this root comes from mmap */
  return NULL;
}

int jw_os_swap_unmap(void *p, size_t size) {
  (void)size;
  if (jw_load(&ready, JW_RELAXED) == 0 || p == NULL) return 0;
  for (size_t i = 0; i < SWAP_ROOTS; i++) {
    if (jw_load(&bases[i], JW_ACQUIRE) != (uintptr_t)p) continue;
    iosr_region *r = (iosr_region *)jw_load(&regions[i], JW_RELAXED);
    jw_store(&bases[i], 0, JW_RELEASE);
    if (jw_load(&ready, JW_RELAXED) == (uint64_t)getpid()) p_destroy(r);
    else return 0; /* a fork child: its copy of the mapping is plain memory to unmap */
    return 1;
  }
  return 0;
}

/* Runs after ld.so has loaded everything: dlopen and iosr_connect may
 * allocate (their roots come from mmap) and start threads. */
__attribute__((constructor)) static void swap_start(void) {
  const char *name = getenv("JWMALLOC_SWAP");
  if (name == NULL || *name == 0) return;
  const char *lib = getenv("JWMALLOC_SWAP_LIB");
  void *h = dlopen(lib && *lib ? lib : "libiosr.so", RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: cannot open libiosr.so; the heap is not swappable\n");
    return;
  }
  connect_fn p_connect = (connect_fn)dlsym(h, "iosr_connect");
  p_create = (create_fn)dlsym(h, "iosr_region_create_aligned");
  p_base = (base_fn)dlsym(h, "iosr_region_base");
  p_destroy = (destroy_fn)dlsym(h, "iosr_region_destroy");
  if (!p_connect || !p_create || !p_base || !p_destroy) {
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: libiosr.so lacks the region calls; the heap is not swappable\n");
    return;
  }
  iosr_connect_opts o;
  memset(&o, 0, sizeof o);
  o.app_name = name;
  ctx = p_connect(&o);
  if (ctx == NULL && errno == EEXIST) {
    /* A fork child that exec'd while its parent holds NAME. */
    static char alt[IOSR_NAME_MAX];
    snprintf(alt, sizeof alt, "%.30s.%d", name, (int)getpid());
    o.app_name = alt;
    ctx = p_connect(&o);
  }
  if (ctx == NULL) {
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: cannot connect to iosrd; the heap is not swappable\n");
    return;
  }
  jw_store(&ready, (uint64_t)getpid(), JW_RELEASE);
}
