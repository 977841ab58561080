/* jwb-replay: replays an allocation trace (format.h) under whatever allocator is
 * preloaded, deterministically (docs/design/bench.md, "Traces").
 *
 *   jwb-replay --trace FILE [--serial] [harness options]
 *
 * Each recorded thread's operations are replayed by one thread, in trace order;
 * an operation on an object another thread allocates waits until that
 * allocation has been replayed (ids follow trace order, so waits never form a
 * cycle). --serial replays everything on one thread in trace order. Blocks are
 * filled and checked like the workloads' (calloc must return zeros, aligned
 * forms their alignment, realloc must keep the contents). The result line adds
 * the counts of each operation, the bytes requested and a hash of the executed
 * sequence: the same for every run and every allocator.
 */
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "format.h"
#include "harness.h"

/* One decoded operation, 16 bytes. */
typedef struct rop {
  uint64_t size : 48;     /* bytes requested (nmemb x size for calloc) */
  uint64_t op : 8;
  uint64_t align_log2 : 8;
  uint32_t id;            /* object created (allocating ops) or freed (free) */
  uint32_t old;           /* realloc: object replaced (0: NULL); calloc: nmemb */
} rop;

/* objs[id].p: NULL until allocated, then the block, FREED after its free, or
 * NULL_BLOCK when the allocator returned NULL for a zero-byte request. */
#define FREED ((void *)1)
#define NULL_BLOCK ((void *)2)

typedef struct obj {
  _Atomic(void *) p;
  uint64_t size;
} obj;

typedef struct tlist {
  rop *ops;
  size_t n, cap;
  uint64_t hash, waits, counts[JWT_NOPS], bytes;
} tlist;

static const char *trace_path;
static int serial;
static tlist *lists;
static unsigned nlists;
static obj *objs;
static uint64_t nobjs, footer_records, footer_counts[JWT_NOPS], footer_unmatched;
static int complete;

static void fatal(const char *what) {
  fprintf(stderr, "jwb-replay: %s: %s\n", trace_path, what);
  exit(2);
}

static void push(unsigned t, rop r) {
  if (t >= nlists) {
    unsigned n = t + 1;
    tlist *g = jwb_meta_alloc(n * sizeof(tlist));
    if (lists) {
      memcpy(g, lists, nlists * sizeof(tlist));
      jwb_meta_free(lists, nlists * sizeof(tlist));
    }
    lists = g;
    nlists = n;
  }
  tlist *l = &lists[t];
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4096;
    rop *g = jwb_meta_alloc(cap * sizeof(rop));
    if (l->ops) {
      memcpy(g, l->ops, l->n * sizeof(rop));
      jwb_meta_free(l->ops, l->cap * sizeof(rop));
    }
    l->ops = g;
    l->cap = cap;
  }
  l->ops[l->n++] = r;
}

static void load(void) {
  int fd = open(trace_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) fatal("cannot open");
  struct stat st;
  if (fstat(fd, &st) || st.st_size < 28) fatal("not a trace (too short)");
  size_t len = (size_t)st.st_size;
  const uint8_t *b = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
  close(fd);
  if (b == MAP_FAILED) fatal("cannot map");
  if (memcmp(b, JWT_MAGIC, 8) != 0) fatal("not a trace (bad magic)");
  uint32_t version, cmdlen;
  memcpy(&version, b + 8, 4);
  memcpy(&cmdlen, b + 24, 4);
  if (version != JWT_VERSION) fatal("unsupported trace version");
  size_t pos = 28 + (size_t)cmdlen;
  if (pos > len) fatal("truncated header");
  uint64_t thread = 0, id = 0;
  while (pos < len) {
    uint8_t head = b[pos++];
    unsigned op = head & 0x0f;
    uint64_t v, a = 0, c = 0;
    if (head & JWT_THREAD_FLAG) {
      if (!jwt_get(b, len, &pos, &thread) || thread > 8191) fatal("bad thread index");
    }
    if (!jwt_get(b, len, &pos, &v)) break;       /* time delta */
    if (op == JWT_END) {
      if (!jwt_get(b, len, &pos, &footer_records)) break;
      for (unsigned k = 1; k < JWT_NOPS; k++)
        if (!jwt_get(b, len, &pos, &footer_counts[k])) break;
      if (!jwt_get(b, len, &pos, &footer_unmatched)) break;
      complete = 1;
      break;
    }
    if (op < JWT_MALLOC || op >= JWT_NOPS) fatal("bad operation code");
    int two = op == JWT_CALLOC || op == JWT_REALLOC || op == JWT_POSIX_MEMALIGN || op == JWT_ALIGNED_ALLOC ||
              op == JWT_MEMALIGN;
    if (!jwt_get(b, len, &pos, &a)) break;
    if (two && !jwt_get(b, len, &pos, &c)) break;
    rop r = {.op = op};
    uint64_t size = 0;
    switch (op) {
      case JWT_FREE:
        if (a == 0 || a > id) fatal("free of an object that does not exist");
        r.id = (uint32_t)(id - a + 1);
        break;
      case JWT_REALLOC:
        if (a > id) fatal("realloc of an object that does not exist");
        r.old = a ? (uint32_t)(id - a + 1) : 0;
        size = c;
        break;
      case JWT_CALLOC:
        if (a > UINT32_MAX || (a && c > (UINT64_C(1) << 48) / a)) fatal("calloc size too large");
        r.old = (uint32_t)a;
        size = a * c;
        break;
      case JWT_POSIX_MEMALIGN:
      case JWT_ALIGNED_ALLOC:
      case JWT_MEMALIGN:
        if (a == 0 || (a & (a - 1))) fatal("alignment not a power of two");
        r.align_log2 = (uint64_t)__builtin_ctzll(a);
        size = c;
        break;
      default:
        size = a;
    }
    if (size >= (UINT64_C(1) << 48)) fatal("size too large (2^48 bytes or more)");
    r.size = size;
    if (jwt_allocates(op)) {
      if (id == UINT32_MAX) fatal("more than 2^32 objects");
      r.id = (uint32_t)++id;
    }
    push(serial ? 0 : (unsigned)thread, r);
  }
  nobjs = id;
  munmap((void *)b, len);
  if (nlists == 0) {                             /* a trace without calls: one idle thread */
    lists = jwb_meta_alloc(sizeof(tlist));
    nlists = 1;
  }
  objs = jwb_meta_alloc((nobjs + 1) * sizeof(obj));
}

static void *wait_for(tlist *l, uint32_t id) {
  void *p;
  unsigned spins = 0;
  /* acquire: the block's contents, written by its allocating thread, are visible */
  while (!(p = atomic_load_explicit(&objs[id].p, memory_order_acquire))) {
    if (++spins > 64) sched_yield();
    if (spins == 1) l->waits++;
  }
  return p;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL + (h >> 29); }

static void publish(uint32_t id, void *p, uint64_t size) {
  objs[id].size = size;
  /* release: contents and size before the pointer */
  atomic_store_explicit(&objs[id].p, p, memory_order_release);
}

static void worker(jwb_thread *t) {
  tlist *l = &lists[t->index];
  for (size_t k = 0; k < l->n; k++) {
    rop *r = &l->ops[k];
    void *p = NULL;
    l->counts[r->op]++;
    uint64_t align = r->op >= JWT_POSIX_MEMALIGN && r->op <= JWT_MEMALIGN ? (uint64_t)1 << r->align_log2 : 0;
    l->hash = mix(mix(mix(l->hash, r->op), r->size ^ (align << 48)), (uint64_t)r->id << 32 | r->old);
    if (r->op != JWT_FREE) l->bytes += r->size;
    switch (r->op) {
      case JWT_FREE: {
        void *q = wait_for(l, r->id);
        if (q == NULL_BLOCK) q = NULL;
        else jwb_check(t, q, objs[r->id].size, jwb_tag(0, r->id), 0);
        jwb_free(t, q);
        atomic_store_explicit(&objs[r->id].p, FREED, memory_order_relaxed);
        continue;
      }
      case JWT_REALLOC: {
        void *q = NULL;
        uint64_t old_size = 0;
        if (r->old) {
          q = wait_for(l, r->old);
          if (q == NULL_BLOCK) q = NULL;
          old_size = objs[r->old].size;
          if (q) jwb_check(t, q, old_size, jwb_tag(0, r->old), 0);
          atomic_store_explicit(&objs[r->old].p, FREED, memory_order_relaxed);
        }
        p = jwb_realloc(t, q, r->size);
        size_t keep = old_size < r->size ? old_size : r->size;
        if (q && p && keep >= 8) {
          uint64_t tag = jwb_tag(0, r->old), head;
          memcpy(&head, p, 8);
          if (jwb.check && head != tag) jwb_fail(t, "realloc did not keep the block's contents");
        }
        break;
      }
      case JWT_MALLOC: p = jwb_malloc(t, r->size); break;
      case JWT_CALLOC: {
        p = jwb_calloc(t, r->old, r->old ? r->size / r->old : 0);
        if (jwb.check && r->size && p) {
          const unsigned char *c = p;
          if (c[0] || c[r->size - 1] || c[r->size / 2]) jwb_fail(t, "calloc returned memory that is not zero");
        }
        break;
      }
      case JWT_POSIX_MEMALIGN:
      case JWT_ALIGNED_ALLOC:
      case JWT_MEMALIGN:
      case JWT_VALLOC:
      case JWT_PVALLOC: {
        if (r->op == JWT_POSIX_MEMALIGN) JWB_TIMED(t, p = jwb_call_memalign(align, r->size));
        else if (r->op == JWT_ALIGNED_ALLOC) JWB_TIMED(t, p = jwb_call_aligned_alloc(align, r->size));
        else if (r->op == JWT_MEMALIGN) JWB_TIMED(t, p = jwb_call_memalign_legacy(align, r->size));
        else if (r->op == JWT_VALLOC) JWB_TIMED(t, p = jwb_call_valloc(r->size));
        else JWB_TIMED(t, p = jwb_call_pvalloc(r->size));
        t->ops++;
        t->allocs++;
        t->bytes += r->size;
        if (!p && r->size) jwb_oom(t, r->size);
        uint64_t want = r->op == JWT_VALLOC || r->op == JWT_PVALLOC ? 4096 : align;
        if (p && ((uintptr_t)p & (want - 1))) {
          char what[160];
          snprintf(what, sizeof what, "%s(%llu, %llu) returned %p, not aligned", jwt_op_name(r->op),
                   (unsigned long long)want, (unsigned long long)r->size, p);
          jwb_fail(t, what);
        }
        break;
      }
      default:
        fatal("bad operation in the decoded trace");
    }
    if (r->size && p) jwb_fill(p, r->size, jwb_tag(0, r->id));
    publish(r->id, p ? p : NULL_BLOCK, r->size);
  }
}

int main(int argc, char **argv) {
  uint64_t serial_opt = 0;
  const jwb_opt opts[] = {
      {"trace", JWB_OPT_STR, &trace_path, "trace file written by libjwtrace.so (required)"},
      {"serial", JWB_OPT_U64, &serial_opt, "1: replay all operations on one thread in trace order (default 0)"},
      {0},
  };
  jwb_init(argc, argv, "replays an allocation trace under the preloaded allocator", opts);
  if (!trace_path) {
    fprintf(stderr, "jwb-replay: --trace FILE is required\n");
    return 2;
  }
  serial = serial_opt != 0;
  load();
  if (!complete)
    fprintf(stderr, "jwb-replay: %s has no footer (the program did not exit normally?): replaying the records present\n",
            trace_path);
  jwb.threads = nlists;
  jwb_run(nlists, worker, -1);
  jwb_region_end();
  /* objects the program never freed */
  jwb_thread *m = jwb_main_ctx();
  uint64_t live = 0;
  for (uint64_t id = 1; id <= nobjs; id++) {
    void *p = atomic_load(&objs[id].p);
    if (p && p != FREED) {
      live++;
      if (p == NULL_BLOCK) continue;
      jwb_check(m, p, objs[id].size, jwb_tag(0, (uint32_t)id), 0);
      jwb_free(m, p);
      atomic_store(&objs[id].p, NULL);
    }
  }
  uint64_t counts[JWT_NOPS] = {0}, hash = 0, waits = 0, bytes = 0, records = 0;
  for (unsigned i = 0; i < nlists; i++) {
    for (unsigned k = 0; k < JWT_NOPS; k++) counts[k] += lists[i].counts[k];
    hash ^= mix(lists[i].hash + i, 0x9e3779b97f4a7c15ULL * (i + 1));
    waits += lists[i].waits;
    bytes += lists[i].bytes;
    records += lists[i].n;
  }
  const char *slash = strrchr(trace_path, '/');
  char extra[768];
  int n = snprintf(extra, sizeof extra, "trace=%s complete=%d records=%" PRIu64 " trace_threads=%u objects=%" PRIu64,
                   slash ? slash + 1 : trace_path, complete, records, nlists, nobjs);
  for (unsigned k = 1; k < JWT_NOPS; k++)
    n += snprintf(extra + n, sizeof extra - (size_t)n, " n_%s=%" PRIu64, jwt_op_name(k), counts[k]);
  if (complete) {
    int agree = footer_records == records;
    for (unsigned k = 1; k < JWT_NOPS; k++) agree &= footer_counts[k] == counts[k];
    n += snprintf(extra + n, sizeof extra - (size_t)n, " footer_agrees=%d unmatched_frees=%" PRIu64, agree,
                  footer_unmatched);
  }
  snprintf(extra + n, sizeof extra - (size_t)n,
           " bytes_requested=%" PRIu64 " live_at_end=%" PRIu64 " seq_hash=%016" PRIx64 " waits=%" PRIu64, bytes, live,
           hash, waits);
  return jwb_report(extra);
}
