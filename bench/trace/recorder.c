/* libjwtrace.so: records every allocation call of a program into a trace
 * (format.h; docs/design/bench.md, "Traces").
 *
 *   JWTRACE_OUT=FILE LD_PRELOAD=libjwtrace.so PROG ARGS...
 *
 * FILE may contain "%p" (replaced by the pid): then every process of an exec
 * chain records into its own file; otherwise only the first process that
 * creates FILE (O_EXCL) records and the others run unrecorded. A forked child
 * stops recording; a process that execs (execve, execv, execvp, execvpe)
 * completes its trace first, so a wrapper script leaves a complete, short trace
 * (record the real binary, or use %p). The calls are forwarded to glibc's allocator (__libc_*), so
 * the recorder never needs dlsym and cannot recurse.
 *
 * One lock orders all records: an allocation is recorded after it returns and a
 * free before it is made, so the file's order is one the program really had.
 * Bookkeeping (the pointer -> object id table, the output buffer) is mmap'd.
 * Thread-safe; fork-safe (atfork handlers).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "format.h"
#include "glibc_malloc.h"

#define EXPORT __attribute__((visibility("default")))
#define BUF_SIZE (1u << 20)

enum { UNINIT, RECORDING, OFF };

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static int state = UNINIT;       /* read without the lock only as a hint; decided under it */
static int out_fd = -1;
static uint8_t *buf;
static size_t buf_len;
static uint64_t next_id, last_us, records, unmatched;
static uint64_t op_count[JWT_NOPS];
static int last_thread = -1;
static int thread_count;
static __thread int thread_index __attribute__((tls_model("initial-exec"))) = -1;

/* ------------------------------------------------ pointer -> id (linear probing) */

typedef struct slot {
  uintptr_t key;                 /* 0 = empty */
  uint64_t id;
} slot;
static slot *table;
static size_t table_cap, table_used;

static size_t hash_ptr(uintptr_t p) { return (size_t)((p >> 4) * 0x9e3779b97f4a7c15ULL); }

static void table_put(uintptr_t key, uint64_t id);

static int table_grow(void) {
  size_t cap = table_cap ? table_cap * 2 : 1u << 16;
  slot *t = mmap(NULL, cap * sizeof(slot), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (t == MAP_FAILED) return 0;
  slot *old = table;
  size_t old_cap = table_cap;
  table = t;
  table_cap = cap;
  table_used = 0;
  for (size_t i = 0; i < old_cap; i++)
    if (old[i].key) table_put(old[i].key, old[i].id);
  if (old) munmap(old, old_cap * sizeof(slot));
  return 1;
}

static void table_put(uintptr_t key, uint64_t id) {
  if ((table_used + 1) * 2 > table_cap && !table_grow()) {
    state = OFF;                 /* out of memory for bookkeeping: stop, keep the program running */
    return;
  }
  size_t m = table_cap - 1, i = hash_ptr(key) & m;
  while (table[i].key && table[i].key != key) i = (i + 1) & m;
  if (!table[i].key) table_used++;
  table[i] = (slot){key, id};
}

/* Removes key; returns its id or 0. Backward-shift deletion keeps probes short. */
static uint64_t table_take(uintptr_t key) {
  if (!table_cap) return 0;
  size_t m = table_cap - 1, i = hash_ptr(key) & m;
  while (table[i].key != key) {
    if (!table[i].key) return 0;
    i = (i + 1) & m;
  }
  uint64_t id = table[i].id;
  size_t j = i;
  for (;;) {
    j = (j + 1) & m;
    if (!table[j].key) break;
    size_t home = hash_ptr(table[j].key) & m;
    /* move j into the hole i unless its home lies cyclically in (i, j] */
    if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
      table[i] = table[j];
      i = j;
    }
  }
  table[i].key = 0;
  table_used--;
  return id;
}

/* ------------------------------------------------------------------ output */

static void write_all(const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t w = write(out_fd, p, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      state = OFF;               /* disk full or closed: stop recording, keep the program running */
      return;
    }
    p += w;
    n -= (size_t)w;
  }
}

static void flush(void) {
  if (buf_len) write_all(buf, buf_len);
  buf_len = 0;
}

static uint64_t now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000ull + (uint64_t)ts.tv_nsec / 1000;
}

/* Called with the lock held. */
static void start(void) {
  state = OFF;
  const char *path = getenv("JWTRACE_OUT");
  if (!path || !*path) return;
  char name[4096];
  size_t n = 0;
  for (const char *c = path; *c && n + 24 < sizeof name; c++) {
    if (c[0] == '%' && c[1] == 'p') {
      char digits[24];
      int len = 0;
      for (unsigned v = (unsigned)getpid(); v || !len; v /= 10) digits[len++] = (char)('0' + v % 10);
      while (len) name[n++] = digits[--len];
      c++;
    } else {
      name[n++] = *c;
    }
  }
  name[n] = 0;
  out_fd = open(name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (out_fd < 0) return;        /* another process of the chain records (or no access) */
  buf = mmap(NULL, BUF_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (buf == MAP_FAILED) {
    close(out_fd);
    return;
  }
  uint8_t cmd[4096];
  ssize_t clen = 0;
  int cf = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
  if (cf >= 0) {
    clen = read(cf, cmd, sizeof cmd);
    close(cf);
    if (clen < 0) clen = 0;
  }
  struct timespec rt;
  clock_gettime(CLOCK_REALTIME, &rt);
  uint64_t start_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec;
  uint32_t version = JWT_VERSION, pid = (uint32_t)getpid(), len = (uint32_t)clen;
  memcpy(buf, JWT_MAGIC, 8);
  memcpy(buf + 8, &version, 4);
  memcpy(buf + 12, &pid, 4);
  memcpy(buf + 16, &start_ns, 8);
  memcpy(buf + 24, &len, 4);
  memcpy(buf + 28, cmd, len);
  buf_len = 28 + len;
  last_us = now_us();
  state = RECORDING;
}

/* Appends one record; called with the lock held and state == RECORDING. */
static void emit(unsigned op, uint64_t a, uint64_t b, int two) {
  if (buf_len + 48 > BUF_SIZE) flush();
  if (thread_index < 0) thread_index = thread_count++;
  uint8_t *p = buf + buf_len;
  size_t n = 0;
  int switched = thread_index != last_thread;
  p[n++] = (uint8_t)(op | (switched ? JWT_THREAD_FLAG : 0));
  if (switched) n += jwt_put(p + n, (uint64_t)thread_index);
  last_thread = thread_index;
  uint64_t t = now_us();
  n += jwt_put(p + n, t - last_us);
  last_us = t;
  n += jwt_put(p + n, a);
  if (two) n += jwt_put(p + n, b);
  buf_len += n;
  records++;
  op_count[op]++;
}

static int begin(void) {
  if (state == OFF) return 0;
  pthread_mutex_lock(&lock);
  if (state == UNINIT) start();
  if (state != RECORDING) {
    pthread_mutex_unlock(&lock);
    return 0;
  }
  return 1;
}

static void end(void) { pthread_mutex_unlock(&lock); }

static void record_alloc(unsigned op, void *p, uint64_t a, uint64_t b, int two) {
  if (!p || !begin()) return;
  table_put((uintptr_t)p, ++next_id);
  if (state == RECORDING) emit(op, a, b, two);
  end();
}

/* ------------------------------------------------------------- the interface */

EXPORT void *malloc(size_t n) {
  void *p = __libc_malloc(n);
  record_alloc(JWT_MALLOC, p, n, 0, 0);
  return p;
}

EXPORT void *calloc(size_t nmemb, size_t size) {
  void *p = __libc_calloc(nmemb, size);
  record_alloc(JWT_CALLOC, p, nmemb, size, 1);
  return p;
}

EXPORT void free(void *p) {
  if (p && begin()) {
    uint64_t id = table_take((uintptr_t)p);
    if (id) emit(JWT_FREE, next_id - id + 1, 0, 0);
    else unmatched++;
    end();
  }
  __libc_free(p);
}

EXPORT void *realloc(void *p, size_t n) {
  if (!p) {
    void *q = __libc_realloc(NULL, n);
    record_alloc(JWT_REALLOC, q, 0, n, 1);
    return q;
  }
  if (n == 0) {                  /* allocators differ on what realloc(p, 0) returns: record a free */
    free(p);
    return NULL;
  }
  uint64_t old = 0;
  int rec = begin();
  if (rec) {
    old = table_take((uintptr_t)p);
    if (!old) unmatched++;
    end();
  }
  void *q = __libc_realloc(p, n);
  if (rec && begin()) {
    if (q) {
      table_put((uintptr_t)q, ++next_id);
      if (state == RECORDING) emit(JWT_REALLOC, old ? next_id - 1 - old + 1 : 0, n, 1);
    } else if (old) {
      table_put((uintptr_t)p, old); /* failed: the old block stays live */
    }
    end();
  }
  return q;
}

EXPORT void *reallocarray(void *p, size_t nmemb, size_t size) {
  size_t n;
  if (__builtin_mul_overflow(nmemb, size, &n)) {
    errno = ENOMEM;
    return NULL;
  }
  return realloc(p, n);
}

static int pow2(size_t a) { return a && !(a & (a - 1)); }

EXPORT int posix_memalign(void **out, size_t align, size_t n) {
  if (!pow2(align) || align % sizeof(void *)) return EINVAL;
  void *p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  record_alloc(JWT_POSIX_MEMALIGN, p, align, n, 1);
  *out = p;
  return 0;
}

EXPORT void *aligned_alloc(size_t align, size_t n) {
  if (!pow2(align)) {
    errno = EINVAL;
    return NULL;
  }
  void *p = __libc_memalign(align, n);
  record_alloc(JWT_ALIGNED_ALLOC, p, align, n, 1);
  return p;
}

EXPORT void *memalign(size_t align, size_t n) {
  void *p = __libc_memalign(align, n);
  record_alloc(JWT_MEMALIGN, p, align, n, 1);
  return p;
}

EXPORT void *valloc(size_t n) {
  void *p = __libc_valloc(n);
  record_alloc(JWT_VALLOC, p, n, 0, 0);
  return p;
}

EXPORT void *pvalloc(size_t n) {
  void *p = __libc_pvalloc(n);
  record_alloc(JWT_PVALLOC, p, n, 0, 0);
  return p;
}

/* ------------------------------------------------------------ process life */

static void before_fork(void) { pthread_mutex_lock(&lock); }
static void after_fork_parent(void) { pthread_mutex_unlock(&lock); }
static void after_fork_child(void) {
  if (state == RECORDING) {
    state = OFF;                 /* the parent owns the file */
    close(out_fd);
  }
  pthread_mutex_unlock(&lock);
}

__attribute__((constructor)) static void recorder_init(void) {
  pthread_atfork(before_fork, after_fork_parent, after_fork_child);
}

/* Writes the footer and closes the trace; later calls are not recorded. */
static void finish(void) {
  pthread_mutex_lock(&lock);
  if (state == RECORDING) {
    if (buf_len + 200 > BUF_SIZE) flush();
    uint8_t *p = buf + buf_len;
    size_t n = 0;
    p[n++] = JWT_END;
    n += jwt_put(p + n, 0);
    n += jwt_put(p + n, records);
    for (unsigned op = 1; op < JWT_NOPS; op++) n += jwt_put(p + n, op_count[op]);
    n += jwt_put(p + n, unmatched);
    buf_len += n;
    flush();
    close(out_fd);
  }
  state = OFF;
  pthread_mutex_unlock(&lock);
}

__attribute__((destructor)) static void recorder_fini(void) { finish(); }

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execvp_fn)(const char *, char *const[]);
typedef int (*execvpe_fn)(const char *, char *const[], char *const[]);
extern char **environ;

EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
  finish();
  execve_fn real = (execve_fn)dlsym(RTLD_NEXT, "execve");
  return real ? real(path, argv, envp) : (errno = ENOSYS, -1);
}

EXPORT int execv(const char *path, char *const argv[]) { return execve(path, argv, environ); }

EXPORT int execvp(const char *file, char *const argv[]) {
  finish();
  execvp_fn real = (execvp_fn)dlsym(RTLD_NEXT, "execvp");
  return real ? real(file, argv) : (errno = ENOSYS, -1);
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
  finish();
  execvpe_fn real = (execvpe_fn)dlsym(RTLD_NEXT, "execvpe");
  return real ? real(file, argv, envp) : (errno = ENOSYS, -1);
}
