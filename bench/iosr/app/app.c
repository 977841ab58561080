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

int main(int argc, char **argv) {
  const char *mem = NULL, *sock = NULL;
  uint64_t heap_bytes = 0, seed = 1;
  unsigned write_every = 4;
  double hot_epochs = -1;
  int do_mlock = 1;
  for (int i = 1; i < argc; i++) {
    const char *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(argv[i], "--name") && v) name = v, i++;
    else if (!strcmp(argv[i], "--mem") && v) mem = v, i++;
    else if (!strcmp(argv[i], "--heap") && v) {
      if (iosr_parse_size(v, &heap_bytes)) heap_bytes = 0;
      i++;
    } else if (!strcmp(argv[i], "--seed") && v) seed = strtoull(v, NULL, 0), i++;
    else if (!strcmp(argv[i], "--write-every") && v) write_every = (unsigned)atoi(v), i++;
    else if (!strcmp(argv[i], "--hot-epochs") && v) hot_epochs = atof(v), i++;
    else if (!strcmp(argv[i], "--socket") && v) sock = v, i++;
    else if (!strcmp(argv[i], "--no-mlock")) do_mlock = 0;
    else {
      fprintf(stderr, "iosr-bench-app: unknown or incomplete argument '%s' (iosr-bench-app --help shows the usage)\n",
              argv[i]);
      return 2;
    }
  }
  if (!mem || (strcmp(mem, "malloc") && strcmp(mem, "iosr")) || heap_bytes < (16u << 20) ||
      (hot_epochs != -1 && (hot_epochs < 0 || hot_epochs > 1))) {
    fprintf(stderr, "iosr-bench-app: --mem malloc|iosr and --heap >= 16M are required; --hot-epochs is 0..1\n");
    return 2;
  }
  int use_iosr = !strcmp(mem, "iosr");
  heap_bytes = (heap_bytes + 4095) & ~4095ull;
  size_t npages = heap_bytes / 4096;
  setvbuf(stdout, NULL, _IOLBF, 0);

  iosr_ctx *ctx = NULL;
  if (use_iosr) {
    iosr_connect_opts o = {.app_name = name, .socket_path = sock};
    ctx = iosr_connect(&o);
    if (!ctx) {
      fprintf(stderr, "iosr-bench-app %s: cannot connect to iosrd: %s\n", name, strerror(errno));
      return 1;
    }
  }
  /* scan buffers first, then lock everything that exists: only the heap,
   * made after this, can be swapped */
  unsigned char *vec = malloc(npages);
  uint64_t *pm = malloc(npages * 8);
  char *line = malloc(256);
  if (!vec || !pm || !line) {
    fprintf(stderr, "iosr-bench-app %s: out of memory\n", name);
    return 1;
  }
  memset(vec, 0, npages);
  memset(pm, 0, npages * 8);
  grow_stack();
  int locked = 0;
  if (do_mlock) {
    if (mlockall(MCL_CURRENT)) fprintf(stderr, "iosr-bench-app %s: mlockall: %s (continuing)\n", name, strerror(errno));
    else locked = 1;
  }
  int pmfd = open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC);
  printf("{\"ev\":\"init\",\"pid\":%d,\"mem\":\"%s\",\"locked\":%d}\n", (int)getpid(), mem, locked);

  heap h;
  int built = 0;
  uint8_t *base = NULL;
  iosr_app_stats s0, s1;
  memset(&s0, 0, sizeof s0);
  memset(&s1, 0, sizeof s1);
  while (fgets(line, 256, stdin)) {
    char cmd[16] = "";
    unsigned long long t0 = 0, n = 0;
    sscanf(line, "%15s %llu %llu", cmd, &t0, &n);
    if (!strcmp(cmd, "quit")) break;
    if (!strcmp(cmd, "build") && !built) {
      uint64_t b0 = now_ns();
      if (use_iosr) {
        iosr_set_foreground(ctx); /* a launched app is in the foreground */
        iosr_region *r = iosr_region_create(ctx, heap_bytes);
        base = r ? iosr_region_base(r) : NULL;
      } else {
        /* ordinary memory from malloc, aligned as an IOSR region (2 MiB),
         * 4 KiB pages as IOSR's (no transparent huge pages) */
        void *p = NULL;
        if (!posix_memalign(&p, 2u << 20, heap_bytes)) {
          base = p;
          madvise(base, heap_bytes, MADV_NOHUGEPAGE);
        }
      }
      if (!base) {
        printf("{\"ev\":\"error\",\"what\":\"heap of %llu bytes: %s\"}\n", (unsigned long long)heap_bytes,
               strerror(errno));
        return 1;
      }
      heap_params hp;
      heap_params_default(&hp, seed);
      if (hot_epochs >= 0) hp.hot_epoch_frac = hot_epochs;
      if (heap_build(&h, base, heap_bytes, &hp, on_epoch, NULL)) {
        printf("{\"ev\":\"error\",\"what\":\"heap build: %s\"}\n", strerror(errno));
        return 1;
      }
      built = 1;
      printf("{\"ev\":\"built\",\"ms\":%.1f,\"heap\":%llu,\"arena_used\":%llu,\"objects\":%llu,\"live_objects\":%llu,"
             "\"live_bytes\":%llu,\"small\":%llu,\"medium\":%llu,\"large\":%llu,\"buffers\":%llu,"
             "\"hot_chain_objects\":%llu,\"hot_chain_bytes\":%llu,\"hot_buffers\":%llu,\"hot_buffer_bytes\":%llu,"
             "\"hot_pages\":%llu}\n",
             (double)(now_ns() - b0) / 1e6, (unsigned long long)heap_bytes, (unsigned long long)h.st.arena_used,
             (unsigned long long)h.st.objects, (unsigned long long)h.st.live_objects,
             (unsigned long long)h.st.live_bytes, (unsigned long long)h.st.by_class[0],
             (unsigned long long)h.st.by_class[1], (unsigned long long)h.st.by_class[2],
             (unsigned long long)h.st.by_class[3], (unsigned long long)h.st.hot_chain_objects,
             (unsigned long long)h.st.hot_chain_bytes, (unsigned long long)h.st.hot_buffers,
             (unsigned long long)h.st.hot_buffer_bytes, (unsigned long long)h.st.hot_pages);
    } else if (!strcmp(cmd, "scan") && built) {
      /* present: mapped; swapcache: not mapped but in the kernel's swap cache
       * (mincore reports it); swap_pte: a swap entry in the page table;
       * absent: neither mapped nor cached (on the swap device, or under IOSR
       * on its swap area) */
      uint64_t present = 0, cached = 0, swpte = 0, absent = 0;
      int ok = !mincore(base, heap_bytes, vec) &&
               pmfd >= 0 && pread(pmfd, pm, npages * 8, (off_t)((uintptr_t)base / 4096 * 8)) == (ssize_t)(npages * 8);
      for (size_t i = 0; ok && i < h.nhot_pages; i++) {
        uint32_t pg = h.hot_pages[i];
        int pres = (int)(pm[pg] >> 63), sw = (int)(pm[pg] >> 62 & 1);
        if (pres) present++;
        else if (vec[pg] & 1) cached++;
        else absent++;
        if (!pres && sw) swpte++;
      }
      if (use_iosr) iosr_stats(ctx, &s0);
      printf("{\"ev\":\"scan\",\"ok\":%d,\"hot_pages\":%llu,\"present\":%llu,\"swapcache\":%llu,\"absent\":%llu,"
             "\"swap_pte\":%llu}\n",
             ok, (unsigned long long)h.nhot_pages, (unsigned long long)present, (unsigned long long)cached,
             (unsigned long long)absent, (unsigned long long)swpte);
    } else if (!strcmp(cmd, "switch") && built) {
      struct rusage r0, r1;
      getrusage(RUSAGE_THREAD, &r0);
      if (use_iosr) iosr_set_foreground(ctx);
      touch_result t = heap_touch(&h, write_every);
      uint64_t t1 = now_ns();
      getrusage(RUSAGE_THREAD, &r1);
      printf("{\"ev\":\"switch\",\"n\":%llu,\"t0\":%llu,\"t1\":%llu,\"ms\":%.3f,\"utime_us\":%llu,\"stime_us\":%llu,"
             "\"majflt\":%ld,\"minflt\":%ld,\"objects\":%llu,\"bytes\":%llu,\"written\":%llu,\"bad\":%llu",
             n, t0, (unsigned long long)t1, t0 && t1 > t0 ? (double)(t1 - t0) / 1e6 : -1.0,
             (unsigned long long)(tv_us(r1.ru_utime) - tv_us(r0.ru_utime)),
             (unsigned long long)(tv_us(r1.ru_stime) - tv_us(r0.ru_stime)), r1.ru_majflt - r0.ru_majflt,
             r1.ru_minflt - r0.ru_minflt, (unsigned long long)t.objects, (unsigned long long)t.bytes,
             (unsigned long long)t.written, (unsigned long long)t.bad);
      if (use_iosr && !iosr_stats(ctx, &s1)) {
        printf(",\"iosr\":{\"read_reqs\":%" PRIu64 ",\"read_bytes\":%" PRIu64 ",\"swapin_bytes\":%" PRIu64
               ",\"swapin_busy_ns\":%" PRIu64 ",\"major_faults\":%" PRIu64 ",\"probe_faults\":%" PRIu64
               ",\"faults\":%" PRIu64 ",\"ra_pages\":%" PRIu64 ",\"ra_hits\":%" PRIu64 ",\"ra_misses\":%" PRIu64
               ",\"ra_window\":%u,\"read_hist\":[",
               s1.read_reqs - s0.read_reqs, s1.read_bytes - s0.read_bytes, s1.swapin_bytes - s0.swapin_bytes,
               s1.swapin_busy_ns - s0.swapin_busy_ns, s1.major_faults - s0.major_faults,
               s1.probe_faults - s0.probe_faults, s1.faults - s0.faults, s1.ra_pages - s0.ra_pages,
               s1.ra_hits - s0.ra_hits, s1.ra_misses - s0.ra_misses, s1.ra_window);
        for (unsigned b = 0; b < IOSR_SIZE_BUCKETS; b++)
          printf("%s%" PRIu64, b ? "," : "", s1.read_hist[b] - s0.read_hist[b]);
        printf("]}");
        s0 = s1;
      }
      printf("}\n");
    } else if (!strcmp(cmd, "verify") && built) {
      printf("{\"ev\":\"verify\",\"bad\":%llu}\n", (unsigned long long)heap_verify_full(&h));
    } else {
      printf("{\"ev\":\"error\",\"what\":\"unknown or early command: %s\"}\n", cmd);
    }
  }
  if (ctx) iosr_disconnect(ctx);
  return 0;
}
