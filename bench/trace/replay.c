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
#include "replay_exec.h"

typedef struct tlist {
  jwr_op *ops;
  size_t n, cap;
  uint64_t hash, waits, counts[JWT_NOPS], bytes;
} tlist;

static const char *trace_path;
static int serial;
static tlist *lists;
static unsigned nlists;
static jwr_obj *objs;
static uint64_t nobjs, footer_records, footer_counts[JWT_NOPS], footer_unmatched;
static int complete;

static void fatal(const char *what) {
  fprintf(stderr, "jwb-replay: %s: %s\n", trace_path, what);
  exit(2);
}

static void push(unsigned t, jwr_op r) {
  if (t >= nlists) {
    unsigned n = t + 1;
    lists = jwb_meta_grow(lists, nlists * sizeof(tlist), nlists * sizeof(tlist), n * sizeof(tlist));
    nlists = n;
  }
  tlist *l = &lists[t];
  if (l->n == l->cap) {
    size_t cap = l->cap ? l->cap * 2 : 4096;
    l->ops = jwb_meta_grow(l->ops, l->n * sizeof(jwr_op), l->cap * sizeof(jwr_op), cap * sizeof(jwr_op));
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
    jwr_op r = {.op = op};
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
  objs = jwb_meta_alloc((nobjs + 1) * sizeof(jwr_obj));
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ULL + (h >> 29); }

static void worker(jwb_thread *t) {
  tlist *l = &lists[t->index];
  for (size_t k = 0; k < l->n; k++) {
    jwr_op *r = &l->ops[k];
    l->counts[r->op]++;
    l->hash = mix(mix(mix(l->hash, r->op), r->size ^ (jwr_align(r) << 48)), (uint64_t)r->id << 32 | r->old);
    if (r->op != JWT_FREE) l->bytes += r->size;
    jwr_exec(t, r, objs, 0, NULL, &l->waits);
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
    if (p && p != JWR_FREED) {
      live++;
      if (p == JWR_NULL_BLOCK) continue;
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
