/* Library calls of the code under test, redirected here by `ld -r --wrap=...`
 * on the instrumented objects only (the runtime itself calls libc). */
#include <errno.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>

#include "rt.h"

#define RA ((uintptr_t)__builtin_return_address(0))

static bool modelled(void) { return rt_self != NULL && rt.started; }

void *__wrap_memcpy(void *d, const void *s, size_t n) {
  if (modelled() && n) {
    shadow_access(rt_self, (uintptr_t)s, (unsigned)n, false, RA);
    shadow_access(rt_self, (uintptr_t)d, (unsigned)n, true, RA);
  }
  return memcpy(d, s, n);
}

void *__wrap_memmove(void *d, const void *s, size_t n) {
  if (modelled() && n) {
    shadow_access(rt_self, (uintptr_t)s, (unsigned)n, false, RA);
    shadow_access(rt_self, (uintptr_t)d, (unsigned)n, true, RA);
  }
  return memmove(d, s, n);
}

void *__wrap_memset(void *d, int c, size_t n) {
  if (modelled() && n) shadow_access(rt_self, (uintptr_t)d, (unsigned)n, true, RA);
  return memset(d, c, n);
}

/* The allocator's mappings are its own memory; fresh ones have no history. */
void *__wrap_mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
  void *p = mmap(addr, len, prot, flags, fd, off);
  if (p != MAP_FAILED && rt.started) {
    shadow_forget((uintptr_t)p, len);
    model_forget((uintptr_t)p, len);
    vrf_alloc_owned(p, len);
  }
  return p;
}

int __wrap_munmap(void *p, size_t len) {
  if (rt.started) {
    shadow_check_release(rt_self, (uintptr_t)p, len, "unmaps");
    shadow_forget((uintptr_t)p, len);
    model_forget((uintptr_t)p, len);
    regions_disown((uintptr_t)p, len);
  }
  return munmap(p, len);
}

/* MADV_DONTNEED makes the range read as zero: every earlier access must
 * happen before it, and its history starts over. */
int __wrap_madvise(void *p, size_t len, int advice) {
  if (rt.started && advice == MADV_DONTNEED) shadow_check_release(rt_self, (uintptr_t)p, len, "releases (MADV_DONTNEED)");
  int r = madvise(p, len, advice);
  if (r == 0 && rt.started && advice == MADV_DONTNEED) {
    shadow_forget((uintptr_t)p, len);
    model_forget((uintptr_t)p, len);
  }
  return r;
}

/* ---- threads started by the code under test become model threads ---- */

typedef struct padapt {
  void *(*fn)(void *);
  void *arg, *ret;
} padapt_t;
static padapt_t padapt[MAXT];

static void padapt_run(void *p) {
  padapt_t *a = p;
  a->ret = a->fn(a->arg);
}

int __wrap_pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
  if (!modelled()) return pthread_create(th, attr, fn, arg);
  if (!rt.in_child) fail("assertion", 0, 0, "setup must not create threads (pthread_create at %p)", (void *)RA);
  int id = rt.nthreads;
  if (id >= MAXT) return EAGAIN;
  padapt[id] = (padapt_t){fn, arg, NULL};
  *th = (pthread_t)thread_create(padapt_run, &padapt[id]);
  return 0;
}

int __wrap_pthread_join(pthread_t th, void **ret) {
  if ((uintptr_t)th >= MAXT) return pthread_join(th, ret);
  thread_join((int)th);
  if (ret) *ret = padapt[th].ret;
  return 0;
}

/* ---- mutexes: an RMW location (the mutex's first word) that blocks while held ---- */

static int mutex_op(int kind, pthread_mutex_t *m) {
  op_t o = {.kind = kind, .addr = m, .size = 4, .mo = __ATOMIC_ACQ_REL, .pc = RA};
  bool ok = false;
  atomic_op(&o, &ok);
  return ok ? 0 : EBUSY;
}

int __wrap_pthread_mutex_lock(pthread_mutex_t *m) { return modelled() ? mutex_op(OP_LOCK, m) : pthread_mutex_lock(m); }
int __wrap_pthread_mutex_trylock(pthread_mutex_t *m) {
  return modelled() ? mutex_op(OP_TRYLOCK, m) : pthread_mutex_trylock(m);
}
int __wrap_pthread_mutex_unlock(pthread_mutex_t *m) {
  return modelled() ? mutex_op(OP_UNLOCK, m) : pthread_mutex_unlock(m);
}
int __wrap_pthread_mutex_init(pthread_mutex_t *m, const pthread_mutexattr_t *a) {
  if (!modelled()) return pthread_mutex_init(m, a);
  vrf_atomic_store(m, 4, 0, __ATOMIC_RELAXED, NULL);
  return 0;
}
int __wrap_pthread_mutex_destroy(pthread_mutex_t *m) {
  if (!modelled()) return pthread_mutex_destroy(m);
  return 0;
}

/* The checker forks once per execution; those forks are not the program's,
 * so the code under test's fork handlers must not run around them (they
 * would take the allocator's locks in the zygote). No client forks. */
int __wrap_pthread_atfork(void (*prepare)(void), void (*parent)(void), void (*child)(void)) {
  (void)prepare, (void)parent, (void)child;
  return 0;
}

/* Thread-specific-data destructors of the code under test (the allocator's
 * thread-exit hook) are allocator code: they run marked as such, so the
 * memory-safety check applies the allocator's rules to them. */
#define KEY_DTORS 4
static void (*key_dtor[KEY_DTORS])(void *);
#define KEY_TRAMPOLINE(i)                   \
  static void key_trampoline##i(void *arg) { \
    vrf_enter_allocator();                  \
    key_dtor[i](arg);                       \
    vrf_leave_allocator();                  \
  }
KEY_TRAMPOLINE(0)
KEY_TRAMPOLINE(1)
KEY_TRAMPOLINE(2)
KEY_TRAMPOLINE(3)
static void (*const key_trampoline[KEY_DTORS])(void *) = {key_trampoline0, key_trampoline1, key_trampoline2,
                                                          key_trampoline3};

int __wrap_pthread_key_create(pthread_key_t *key, void (*dtor)(void *)) {
  if (dtor == NULL) return pthread_key_create(key, NULL);
  for (int i = 0; i < KEY_DTORS; i++)
    if (key_dtor[i] == NULL) {
      key_dtor[i] = dtor;
      return pthread_key_create(key, key_trampoline[i]);
    }
  return EAGAIN;
}

int __wrap_sched_yield(void) {
  if (modelled()) vrf_spin_relax(NULL);
  else sched_yield();
  return 0;
}

void __wrap___assert_fail(const char *expr, const char *file, unsigned line, const char *func) {
  vrf_assert_fail(expr, file, (int)line, func);
}
