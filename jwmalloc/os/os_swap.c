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

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>

#include "../common/atomic.h"
#include "../common/backoff.h"
#include "../common/log.h"
#include "../common/options.h"
#include "iosr.h"

typedef iosr_ctx *(*connect_fn)(const iosr_connect_opts *);
typedef iosr_region *(*create_fn)(iosr_ctx *, size_t, size_t);
typedef void *(*base_fn)(const iosr_region *);
typedef int (*destroy_fn)(iosr_region *);
typedef int (*trim_done_fn)(iosr_ctx *, uint64_t);

/* Written once by the constructor before `ready` is released; read after an
 * acquire of `ready`. */
static create_fn p_create;
static base_fn p_base;
static destroy_fn p_destroy;
static trim_done_fn p_trim_done;
static iosr_ctx *ctx;
static jw_atomic_u64 ready; /* the pid of the process that connected; 0: off */

/* Region base -> region and size, fixed size (no allocation): 4096 regions
 * are 16 GiB of roots, fewer when huge blocks take slots. A slot is claimed
 * by a CAS of its base from 0 to CLAIMED, filled, and published by a release
 * store of the base; readers acquire the base, then read the rest. A region
 * the table has no room for is destroyed and the caller maps with mmap. */
#define SWAP_SLOTS 4096
#define CLAIMED ((uintptr_t)1) /* never a base: bases are page-aligned */
static jw_atomic_uptr bases[SWAP_SLOTS];
static jw_atomic_uptr regions[SWAP_SLOTS];
static jw_atomic_u64 sizes[SWAP_SLOTS];

static int connected_here(void) {
  uint64_t pid = jw_load(&ready, JW_ACQUIRE);
  return pid != 0 && pid == (uint64_t)getpid(); /* a fork child may not create regions (ECHILD) */
}

void *jw_os_swap_map(size_t size, size_t align, int committed) {
  if (!connected_here()) return NULL;
  if (committed) {
    /* a region is MAP_NORESERVE: the kernel's overcommit check, as a direct
     * mapping has it, by a mapping that is charged and given back at once */
    void *probe = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (probe == MAP_FAILED) return NULL;
    munmap(probe, size);
  }
  iosr_region *r = p_create(ctx, size, align);
  if (r == NULL) return NULL;
  uintptr_t b = (uintptr_t)p_base(r);
  for (size_t i = 0; i < SWAP_SLOTS; i++) {
    uintptr_t zero = 0;
    if (jw_load(&bases[i], JW_RELAXED) != 0) continue;
    if (!jw_cas(&bases[i], &zero, CLAIMED, JW_RELAXED, JW_RELAXED)) continue; /* ours alone from here */
    jw_store(&regions[i], (uintptr_t)r, JW_RELAXED);
    jw_store(&sizes[i], (uint64_t)size, JW_RELAXED);
    jw_store(&bases[i], b, JW_RELEASE); /* publishes the two stores above */
    return (void *)b;
  }
  p_destroy(r); /* table full: the caller maps with mmap */
  return NULL;
}

/* The slot whose region holds p, or -1; *base and *size of that region. */
static long find(uintptr_t p, uintptr_t *base, size_t *size) {
  if (jw_load(&ready, JW_RELAXED) == 0) return -1; /* nothing was ever put in the table */
  for (size_t i = 0; i < SWAP_SLOTS; i++) {
    uintptr_t b = jw_load(&bases[i], JW_ACQUIRE); /* pairs with the publishing store */
    if (b <= CLAIMED) continue;
    size_t s = (size_t)jw_load(&sizes[i], JW_RELAXED);
    if (p >= b && p - b < s) {
      *base = b;
      *size = s;
      return (long)i;
    }
  }
  return -1;
}

size_t jw_os_swap_size(const void *p) {
  uintptr_t b;
  size_t s;
  return find((uintptr_t)p, &b, &s) >= 0 && b == (uintptr_t)p ? s : 0;
}

int jw_os_swap_unmap(void *p, size_t size) {
  uintptr_t b;
  size_t s;
  long i = find((uintptr_t)p, &b, &s);
  if (i < 0) return 0;
  if ((uintptr_t)p != b) {
    /* part of a region (a huge block's tail): a munmap would leave libiosr a
     * region with a hole that another mapping may fill, which destroying the
     * region would then unmap; the pages are discarded instead, the region
     * goes whole with its base */
    size_t n = size < s - ((uintptr_t)p - b) ? size : s - ((uintptr_t)p - b);
    madvise(p, n, MADV_DONTNEED);
    return 1;
  }
  /* The region is read while the slot is still ours: once the CAS below
   * frees the slot, another thread's map may claim it and store its own
   * region there, which this unmap would then destroy under that thread's
   * live block. Relaxed: ordered by find's acquire of the base. */
  iosr_region *r = (iosr_region *)jw_load(&regions[i], JW_RELAXED);
  uintptr_t want = b;
  /* Acq_rel: one of two racing unmaps of the same base takes the region;
   * the other has nothing to unmap (a munmap of the range could hit a
   * mapping made there since). */
  if (!jw_cas(&bases[i], &want, 0, JW_ACQ_REL, JW_RELAXED)) return 1;
  if (connected_here()) p_destroy(r);
  else munmap((void *)b, s); /* a fork child: its copy is its own memory, unmapped whole */
  return 1;
}

/* ---- trims (docs/design/stack.md, "Free memory is not written") ---- */

/* The API layer's purge, registered at its initialization (acquire/release:
 * the trimmer calls what was stored). */
static jw_atomic_ptr trim_fn;
/* The daemon's latest trim request not yet answered (0: none), and a
 * generation the trimmer sleeps on: every request or background notice
 * bumps it. */
static jw_atomic_u64 trim_asked;
static jw_atomic_u32 trim_gen;
static jw_atomic_u64 trims_done;
static jw_atomic_u32 trimmer_on; /* 0: no trimmer thread; requests are answered at once */

void jw_os_swap_set_trim(void (*fn)(void)) { jw_store(&trim_fn, (void *)fn, JW_RELEASE); }

uint64_t jw_os_swap_trims(void) { return jw_load(&trims_done, JW_RELAXED); }

static void trim_kick(void) {
  jw_fetch_add(&trim_gen, 1, JW_RELEASE);
  jw_futex_wake(&trim_gen, 1);
}

/* libiosr's agent thread: must return at once, so the purge runs on the
 * trimmer. A newer id replaces an older one: one answer after a purge that
 * began after both requests answers the newer, the daemon ignores the older. */
static void on_trim(iosr_ctx *c, uint64_t id, void *arg) {
  (void)arg;
  if (!jw_load(&trimmer_on, JW_ACQUIRE)) {
    p_trim_done(c, id); /* nothing to give back without the thread: write what is there */
    return;
  }
  jw_store(&trim_asked, id, JW_RELAXED); /* published by the generation's release */
  trim_kick();
}

static void on_foreground(iosr_ctx *c, int fg, void *arg) {
  (void)c, (void)arg;
  if (!fg) trim_kick(); /* sent to the background: what is free goes now */
}

/* The trimmer: sleeps until a request, purges (every tier's free memory:
 * page pools, empty slabs, free backend ranges, reclamation buffers, the
 * huge-block cache, given back with MADV_DONTNEED, which IOSR sees as
 * REMOVE events: those pages are dropped, never written), then answers. */
static void *trimmer(void *arg) {
  (void)arg;
  uint32_t seen = jw_load(&trim_gen, JW_ACQUIRE);
  for (;;) {
    uint32_t now = jw_load(&trim_gen, JW_ACQUIRE);
    if (now == seen) {
      jw_futex_wait(&trim_gen, seen, NULL); /* woken by trim_kick; a spurious return looks again */
      continue;
    }
    seen = now;
    uint64_t id = jw_xchg(&trim_asked, 0, JW_RELAXED); /* ordered by the generation's acquire */
    void (*fn)(void) = (void (*)(void))jw_load(&trim_fn, JW_ACQUIRE);
    if (fn) fn();
    jw_fetch_add(&trims_done, 1, JW_RELAXED);
    if (id) p_trim_done(ctx, id);
  }
  return NULL;
}

/* JWMALLOC_SWAP_TRIM=0: never trim (the heap is swapped out as it is). */
static int trim_wanted(void) { return jw_opt(JW_OPT_SWAP_TRIM) != 0; }

static int start_trimmer(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old); /* the program's handlers never run on it */
  pthread_attr_t a;
  pthread_t t;
  int rc = pthread_attr_init(&a);
  if (rc == 0) {
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    rc = pthread_create(&t, &a, trimmer, NULL);
    pthread_attr_destroy(&a);
  }
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  return rc;
}

/* Runs after ld.so has loaded everything: dlopen and iosr_connect may
 * allocate (their roots come from mmap) and start threads. */
__attribute__((constructor)) static void swap_start(void) {
  jw_options_init(); /* this constructor may run before the library's */
  const char *name = jw_opt_str(JW_OPT_SWAP);
  if (name == NULL) return;
  const char *lib = jw_opt_str(JW_OPT_SWAP_LIB); /* default libiosr.so */
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (h == NULL) {
    const char *why = dlerror();
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: cannot open %s (%s); the heap is not swappable\n", lib ? lib : "libiosr.so",
               why ? why : "no reason given");
    return;
  }
  connect_fn p_connect = (connect_fn)dlsym(h, "iosr_connect");
  p_create = (create_fn)dlsym(h, "iosr_region_create_aligned");
  p_base = (base_fn)dlsym(h, "iosr_region_base");
  p_destroy = (destroy_fn)dlsym(h, "iosr_region_destroy");
  p_trim_done = (trim_done_fn)dlsym(h, "iosr_trim_done");
  if (!p_connect || !p_create || !p_base || !p_destroy) {
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: %s lacks the region calls; the heap is not swappable\n", lib ? lib : "libiosr.so");
    return;
  }
  iosr_connect_opts o;
  memset(&o, 0, sizeof o);
  o.app_name = name;
  if (p_trim_done && trim_wanted()) {
    o.on_trim = on_trim;
    o.on_foreground = on_foreground;
  }
  ctx = p_connect(&o);
  if (ctx == NULL && errno == EEXIST) {
    /* A fork child that exec'd while its parent holds NAME. */
    static char alt[IOSR_NAME_MAX];
    snprintf(alt, sizeof alt, "%.30s.%d", name, (int)getpid());
    o.app_name = alt;
    ctx = p_connect(&o);
  }
  if (ctx == NULL) {
    jw_dprintf(2, "jwmalloc: JWMALLOC_SWAP: cannot connect to iosrd: %s; the heap is not swappable\n", strerror(errno));
    return;
  }
  jw_store(&ready, (uint64_t)getpid(), JW_RELEASE);
  /* After the connection: the trimmer uses ctx. Without it on_trim answers
   * at once and nothing is trimmed. */
  if (o.on_trim && start_trimmer() == 0) jw_store(&trimmer_on, 1, JW_RELEASE);
}
