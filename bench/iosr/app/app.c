/* iosr-bench-app: one app of the IOSR evaluation (docs/design/iosr-eval.md,
 * "Apps"). The same code runs its heap on ordinary memory (--mem malloc: the
 * kernel swaps it, under a memory cgroup limit) or on IOSR memory (--mem iosr:
 * one region of libiosr, under iosrd's budget). The driver (bench/iosr/run.py)
 * talks to it over stdin/stdout, one command and one JSON line each:
 *
 *   build         build the heap (heap.h); -> {"ev":"built",...}
 *   scan          where the hot set's pages are now (pagemap + mincore)
 *   switch T0 N   come to the foreground: (iosr: tell iosrd) and touch the hot
 *                 set; T0 is the driver's CLOCK_MONOTONIC time, in ns, at which
 *                 the switch began; -> {"ev":"switch","ms":...,...}
 *   verify        check every word of the hot set -> {"ev":"verify","bad":N}
 *   quit
 *
 *   iosr-bench-app --name NAME --mem malloc|iosr --heap BYTES [--seed S]
 *                  [--write-every K] [--hot-epochs F] [--socket PATH] [--no-mlock]
 *
 * Everything but the heap (code, stack, the scan buffers) is locked in memory
 * (mlockall before the heap exists), so in both modes only the heap can be
 * swapped: under IOSR nothing else is swappable either.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "common/opts.h"
#include "heap.h"
#include "iosr.h"

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t tv_us(struct timeval t) { return (uint64_t)t.tv_sec * 1000000ull + (uint64_t)t.tv_usec; }

static void usage(FILE *f) {
  fprintf(f, "usage: iosr-bench-app --name NAME --mem malloc|iosr --heap BYTES [--seed S] [--write-every K]\n"
                  "                      [--hot-epochs F] [--socket PATH] [--no-mlock]\n");
}

static const char *name = "app";
static void on_epoch(unsigned e, void *arg) {
  (void)arg;
  if (e % 8 == 7) fprintf(stderr, "iosr-bench-app %s: epoch %u\n", name, e + 1);
}

/* Touches a few hundred KiB of stack so that mlockall locks it. */
static __attribute__((noinline)) void grow_stack(void) {
  volatile char b[256 * 1024];
  for (size_t i = 0; i < sizeof b; i += 4096) b[i] = 0;
}

/* What the command line asks for. */
typedef struct app_opts {
  const char *mem, *sock;
  uint64_t heap_bytes, seed;
  unsigned write_every;
  double hot_epochs; /* -1: the heap's default */
  int do_mlock;
} app_opts;

/* The app's state between commands. */
typedef struct app_state {
  app_opts o;
  int use_iosr;
  iosr_ctx *ctx;
  size_t npages;
  unsigned char *vec; /* mincore's answer, a byte a heap page */
  uint64_t *pm;       /* pagemap entries, one a heap page */
  int pmfd;
  heap h;
  int built;
  uint8_t *base;
  iosr_app_stats s0, s1; /* IOSR's statistics at the last scan or switch, and now */
} app_state;

/* Parses the command line into o; returns 0 to run, 1 after --help, 2 on a
 * usage error (reported). */
static int parse_args(int argc, char **argv, app_opts *o) {
  *o = (app_opts){.seed = 1, .write_every = 4, .hot_epochs = -1, .do_mlock = 1};
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 1;
    } else if (!strcmp(argv[i], "--name") && v) name = v, i++;
    else if (!strcmp(argv[i], "--mem") && v) o->mem = v, i++;
    else if (!strcmp(argv[i], "--heap") && v) {
      if (iosr_parse_size(v, &o->heap_bytes)) o->heap_bytes = 0;
      i++;
    } else if (!strcmp(argv[i], "--seed") && v) o->seed = strtoull(v, NULL, 0), i++;
    else if (!strcmp(argv[i], "--write-every") && v) o->write_every = (unsigned)atoi(v), i++;
    else if (!strcmp(argv[i], "--hot-epochs") && v) o->hot_epochs = atof(v), i++;
    else if (!strcmp(argv[i], "--socket") && v) o->sock = v, i++;
    else if (!strcmp(argv[i], "--no-mlock")) o->do_mlock = 0;
    else {
      fprintf(stderr, "iosr-bench-app: unknown or incomplete argument '%s' (iosr-bench-app --help shows the usage)\n",
              argv[i]);
      return 2;
    }
  }
  if (!o->mem || (strcmp(o->mem, "malloc") && strcmp(o->mem, "iosr")) || o->heap_bytes < (16u << 20) ||
      (o->hot_epochs != -1 && (o->hot_epochs < 0 || o->hot_epochs > 1))) {
    fprintf(stderr, "iosr-bench-app: --mem malloc|iosr and --heap >= 16M are required; --hot-epochs is 0..1\n");
    return 2;
  }
  return 0;
}

/* Connects (IOSR), makes the scan buffers and locks everything that exists:
 * only the heap, made after this, can be swapped. Returns 0, or 1 (reported). */
static int app_start(app_state *a) {
  if (a->use_iosr) {
    iosr_connect_opts o = {.app_name = name, .socket_path = a->o.sock};
    a->ctx = iosr_connect(&o);
    if (!a->ctx) {
      fprintf(stderr, "iosr-bench-app %s: cannot connect to iosrd: %s\n", name, strerror(errno));
      return 1;
    }
  }
  a->vec = malloc(a->npages);
  a->pm = malloc(a->npages * 8);
  if (!a->vec || !a->pm) {
    fprintf(stderr, "iosr-bench-app %s: out of memory\n", name);
    return 1;
  }
  memset(a->vec, 0, a->npages);
  memset(a->pm, 0, a->npages * 8);
  grow_stack();
  int locked = 0;
  if (a->o.do_mlock) {
    if (mlockall(MCL_CURRENT)) fprintf(stderr, "iosr-bench-app %s: mlockall: %s (continuing)\n", name, strerror(errno));
    else locked = 1;
  }
  a->pmfd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  printf("{\"ev\":\"init\",\"pid\":%d,\"mem\":\"%s\",\"locked\":%d}\n", (int)getpid(), a->o.mem, locked);
  return 0;
}

/* build: the heap on IOSR memory or on malloc's. Returns 0, or 1 (reported). */
static int cmd_build(app_state *a) {
  uint64_t b0 = now_ns();
  uint64_t heap_bytes = a->o.heap_bytes;
  if (a->use_iosr) {
    iosr_set_foreground(a->ctx); /* a launched app is in the foreground */
    iosr_region *r = iosr_region_create(a->ctx, heap_bytes);
    a->base = r ? iosr_region_base(r) : NULL;
  } else {
    /* ordinary memory from malloc, aligned as an IOSR region (2 MiB),
     * 4 KiB pages as IOSR's (no transparent huge pages) */
    void *p = NULL;
    if (!posix_memalign(&p, 2u << 20, heap_bytes)) {
      a->base = p;
      madvise(a->base, heap_bytes, MADV_NOHUGEPAGE);
    }
  }
  if (!a->base) {
    printf("{\"ev\":\"error\",\"what\":\"heap of %llu bytes: %s\"}\n", (unsigned long long)heap_bytes,
           strerror(errno));
    return 1;
  }
  heap_params hp;
  heap_params_default(&hp, a->o.seed);
  if (a->o.hot_epochs >= 0) hp.hot_epoch_frac = a->o.hot_epochs;
  heap *h = &a->h;
  if (heap_build(h, a->base, heap_bytes, &hp, on_epoch, NULL)) {
    printf("{\"ev\":\"error\",\"what\":\"heap build: %s\"}\n", strerror(errno));
    return 1;
  }
  a->built = 1;
  printf("{\"ev\":\"built\",\"ms\":%.1f,\"heap\":%llu,\"arena_used\":%llu,\"objects\":%llu,\"live_objects\":%llu,"
         "\"live_bytes\":%llu,\"small\":%llu,\"medium\":%llu,\"large\":%llu,\"buffers\":%llu,"
         "\"hot_chain_objects\":%llu,\"hot_chain_bytes\":%llu,\"hot_buffers\":%llu,\"hot_buffer_bytes\":%llu,"
         "\"hot_pages\":%llu}\n",
         (double)(now_ns() - b0) / 1e6, (unsigned long long)heap_bytes, (unsigned long long)h->st.arena_used,
         (unsigned long long)h->st.objects, (unsigned long long)h->st.live_objects,
         (unsigned long long)h->st.live_bytes, (unsigned long long)h->st.by_class[0],
         (unsigned long long)h->st.by_class[1], (unsigned long long)h->st.by_class[2],
         (unsigned long long)h->st.by_class[3], (unsigned long long)h->st.hot_chain_objects,
         (unsigned long long)h->st.hot_chain_bytes, (unsigned long long)h->st.hot_buffers,
         (unsigned long long)h->st.hot_buffer_bytes, (unsigned long long)h->st.hot_pages);
  return 0;
}

/* scan: where the hot set's pages are. present: mapped; swapcache: not
 * mapped but in the kernel's swap cache (mincore reports it); swap_pte: a
 * swap entry in the page table; absent: neither mapped nor cached (on the
 * swap device, or under IOSR on its swap area). */
static void cmd_scan(app_state *a) {
  uint64_t present = 0, cached = 0, swpte = 0, absent = 0;
  size_t npages = a->npages;
  int ok = !mincore(a->base, a->o.heap_bytes, a->vec) && a->pmfd >= 0 &&
           pread(a->pmfd, a->pm, npages * 8, (off_t)((uintptr_t)a->base / 4096 * 8)) == (ssize_t)(npages * 8);
  for (size_t i = 0; ok && i < a->h.nhot_pages; i++) {
    uint32_t pg = a->h.hot_pages[i];
    int pres = (int)(a->pm[pg] >> 63), sw = (int)(a->pm[pg] >> 62 & 1);
    if (pres) present++;
    else if (a->vec[pg] & 1) cached++;
    else absent++;
    if (!pres && sw) swpte++;
  }
  if (a->use_iosr) iosr_stats(a->ctx, &a->s0);
  printf("{\"ev\":\"scan\",\"ok\":%d,\"hot_pages\":%llu,\"present\":%llu,\"swapcache\":%llu,\"absent\":%llu,"
         "\"swap_pte\":%llu}\n",
         ok, (unsigned long long)a->h.nhot_pages, (unsigned long long)present, (unsigned long long)cached,
         (unsigned long long)absent, (unsigned long long)swpte);
}

/* IOSR's statistics since the last scan or switch, as a JSON member. */
static void print_iosr_delta(const iosr_app_stats *s0, const iosr_app_stats *s1) {
  printf(",\"iosr\":{\"read_reqs\":%" PRIu64 ",\"read_bytes\":%" PRIu64 ",\"swapin_bytes\":%" PRIu64
         ",\"swapin_busy_ns\":%" PRIu64 ",\"major_faults\":%" PRIu64 ",\"probe_faults\":%" PRIu64
         ",\"faults\":%" PRIu64 ",\"ra_pages\":%" PRIu64 ",\"ra_hits\":%" PRIu64 ",\"ra_misses\":%" PRIu64
         ",\"ra_window\":%u,\"read_hist\":[",
         s1->read_reqs - s0->read_reqs, s1->read_bytes - s0->read_bytes, s1->swapin_bytes - s0->swapin_bytes,
         s1->swapin_busy_ns - s0->swapin_busy_ns, s1->major_faults - s0->major_faults,
         s1->probe_faults - s0->probe_faults, s1->faults - s0->faults, s1->ra_pages - s0->ra_pages,
         s1->ra_hits - s0->ra_hits, s1->ra_misses - s0->ra_misses, s1->ra_window);
  for (unsigned b = 0; b < IOSR_SIZE_BUCKETS; b++)
    printf("%s%" PRIu64, b ? "," : "", s1->read_hist[b] - s0->read_hist[b]);
  printf("]}");
}

/* switch T0 N: come to the foreground and touch the hot set. */
static void cmd_switch(app_state *a, unsigned long long t0, unsigned long long n) {
  struct rusage r0, r1;
  getrusage(RUSAGE_THREAD, &r0);
  if (a->use_iosr) iosr_set_foreground(a->ctx);
  touch_result t = heap_touch(&a->h, a->o.write_every);
  uint64_t t1 = now_ns();
  getrusage(RUSAGE_THREAD, &r1);
  printf("{\"ev\":\"switch\",\"n\":%llu,\"t0\":%llu,\"t1\":%llu,\"ms\":%.3f,\"utime_us\":%llu,\"stime_us\":%llu,"
         "\"majflt\":%ld,\"minflt\":%ld,\"objects\":%llu,\"bytes\":%llu,\"written\":%llu,\"bad\":%llu",
         n, t0, (unsigned long long)t1, t0 && t1 > t0 ? (double)(t1 - t0) / 1e6 : -1.0,
         (unsigned long long)(tv_us(r1.ru_utime) - tv_us(r0.ru_utime)),
         (unsigned long long)(tv_us(r1.ru_stime) - tv_us(r0.ru_stime)), r1.ru_majflt - r0.ru_majflt,
         r1.ru_minflt - r0.ru_minflt, (unsigned long long)t.objects, (unsigned long long)t.bytes,
         (unsigned long long)t.written, (unsigned long long)t.bad);
  if (a->use_iosr && !iosr_stats(a->ctx, &a->s1)) {
    print_iosr_delta(&a->s0, &a->s1);
    a->s0 = a->s1;
  }
  printf("}\n");
}

int main(int argc, char **argv) {
  static app_state a; /* zero: nothing built, no statistics yet */
  int r = parse_args(argc, argv, &a.o);
  if (r) return r == 1 ? 0 : r;
  a.use_iosr = !strcmp(a.o.mem, "iosr");
  a.o.heap_bytes = (a.o.heap_bytes + 4095) & ~4095ull;
  a.npages = a.o.heap_bytes / 4096;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (app_start(&a)) return 1;
  char line[256];
  while (fgets(line, sizeof line, stdin)) {
    char cmd[16] = "";
    unsigned long long t0 = 0, n = 0;
    sscanf(line, "%15s %llu %llu", cmd, &t0, &n);
    if (!strcmp(cmd, "quit")) break;
    if (!strcmp(cmd, "build") && !a.built) {
      if (cmd_build(&a)) return 1;
    } else if (!strcmp(cmd, "scan") && a.built) {
      cmd_scan(&a);
    } else if (!strcmp(cmd, "switch") && a.built) {
      cmd_switch(&a, t0, n);
    } else if (!strcmp(cmd, "verify") && a.built) {
      printf("{\"ev\":\"verify\",\"bad\":%llu}\n", (unsigned long long)heap_verify_full(&a.h));
    } else {
      printf("{\"ev\":\"error\",\"what\":\"unknown or early command: %s\"}\n", cmd);
    }
  }
  if (a.ctx) iosr_disconnect(a.ctx);
  return 0;
}
