/* Helpers shared by the IOSR tests: feature checks that skip (exit 77),
 * temporary swap areas, deterministic page contents, daemons. */
#ifndef IOSR_TEST_UTIL_H
#define IOSR_TEST_UTIL_H

#define _GNU_SOURCE
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/mix.h"
#include "common/sock.h"
#include "iosr.h"

/* CHECK, FAIL, REQUIRE, the clock and child processes: the first failed
 * check ends the test (its daemons are killed at exit). */
#include "test_support.h"

/* Skips (exit 77) unless userfaultfd with write-protect and the events IOSR
 * needs is usable here, and io_uring or at least O_DIRECT file I/O works. */
/* 1 when the kernel offers UFFDIO_MOVE (Linux 6.8: UFFD_FEATURE_MOVE). */
static inline int iosr_test_has_move(void) {
  int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return 0;
  struct uffdio_api api = {.api = UFFD_API, .features = 0};
  int ok = ioctl(fd, UFFDIO_API, &api) == 0 && (api.features & (1ull << 16));
  close(fd);
  return ok;
}

static inline void iosr_test_require(void) {
  int fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) {
    int dev = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
    if (dev >= 0) {
      fd = ioctl(dev, _IO(0xAA, 0x00), O_CLOEXEC | O_NONBLOCK);
      close(dev);
    }
  }
  if (fd < 0) fd = (int)syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK | 1);
  if (fd < 0) {
    printf("SKIP: userfaultfd unavailable here (%s)\n", strerror(errno));
    exit(77);
  }
  struct uffdio_api api = {.api = UFFD_API, .features = 0};
  if (ioctl(fd, UFFDIO_API, &api)) {
    printf("SKIP: UFFDIO_API failed (%s)\n", strerror(errno));
    exit(77);
  }
  close(fd);
  uint64_t need = UFFD_FEATURE_PAGEFAULT_FLAG_WP | UFFD_FEATURE_EVENT_REMOVE | UFFD_FEATURE_EVENT_UNMAP |
                  UFFD_FEATURE_EVENT_REMAP;
  if ((api.features & need) != need) {
    printf("SKIP: this kernel's userfaultfd lacks write-protect or events (features %#llx)\n",
           (unsigned long long)api.features);
    exit(77);
  }
}

/* A temporary swap area of `bytes` in $TMPDIR (default /tmp); the path is
 * written to path (cap >= 256). Removed by iosr_test_cleanup. */
static char iosr_test_dir[256];
static inline void iosr_test_swap(char *path, size_t cap, uint64_t bytes) {
  if (!iosr_test_dir[0]) {
    const char *t = getenv("TMPDIR");
    snprintf(iosr_test_dir, sizeof iosr_test_dir, "%s/iosr-test-XXXXXX", t && *t ? t : "/tmp");
    CHECK(mkdtemp(iosr_test_dir));
  }
  static int n;
  if ((size_t)snprintf(path, cap, "%.200s/swap%d", iosr_test_dir, n++) >= cap) exit(1);
  char cmd[1024];
  const char *tool = getenv("IOSR_TOOL");
  snprintf(cmd, sizeof cmd, "%s mkswap %s --size %llu --force >/dev/null", tool ? tool : "iosr", path,
           (unsigned long long)bytes);
  CHECK(system(cmd) == 0, "%s", cmd);
}

/* A file of the test's temporary folder (iosr_test_swap makes it): its path
 * into out (cap bytes). */
static inline void iosr_test_path(char *out, size_t cap, const char *name) {
  if ((size_t)snprintf(out, cap, "%.200s/%s", iosr_test_dir, name) >= cap) exit(1);
}

static inline void iosr_test_cleanup(void) {
  if (!iosr_test_dir[0]) return;
  char cmd[512];
  snprintf(cmd, sizeof cmd, "rm -rf %s", iosr_test_dir);
  if (system(cmd)) {
  }
}


/* Page contents derived from (seed, page index, version). */
static inline void iosr_fill(void *page, uint64_t seed, uint64_t idx, uint64_t ver) {
  uint64_t *p = page, x = iosr_mix(seed ^ idx * 0x9e3779b97f4a7c15ull ^ ver << 40);
  for (int i = 0; i < 512; i++) p[i] = iosr_mix(x + (uint64_t)i);
}

static inline int iosr_check(const void *page, uint64_t seed, uint64_t idx, uint64_t ver) {
  const uint64_t *p = page;
  uint64_t x = iosr_mix(seed ^ idx * 0x9e3779b97f4a7c15ull ^ ver << 40);
  for (int i = 0; i < 512; i++)
    if (p[i] != iosr_mix(x + (uint64_t)i)) return 0;
  return 1;
}

/* Creates one region of npages pages on ctx and fills page i with (seed, i,
 * version 0). *r gets the region; returns its first byte. */
static inline uint8_t *iosr_test_fill_new_region(iosr_ctx *ctx, uint64_t npages, uint64_t seed, iosr_region **r) {
  *r = iosr_region_create(ctx, npages * 4096);
  CHECK(*r);
  uint8_t *p = iosr_region_base(*r);
  for (uint64_t i = 0; i < npages; i++) iosr_fill(p + i * 4096, seed, i, 0);
  return p;
}

/* Connects to iosrd at sock as app `name`, then iosr_test_fill_new_region.
 * *ctx and *r get the connection and the region; returns the region's first
 * byte. */
static inline uint8_t *iosr_test_filled_region(const char *name, const char *sock, uint64_t npages, uint64_t seed,
                                               iosr_ctx **ctx, iosr_region **r) {
  iosr_connect_opts o = {.app_name = name, .socket_path = sock};
  *ctx = iosr_connect(&o);
  CHECK(*ctx);
  return iosr_test_fill_new_region(*ctx, npages, seed, r);
}

static inline int iosr_is_zero(const void *page) {
  const uint64_t *p = page;
  for (int i = 0; i < 512; i++)
    if (p[i]) return 0;
  return 1;
}


/* ---- an in-process engine with one app and a control connection ---- */
typedef struct iosr_test_env {
  iosr_engine *eng;
  iosr_ctx *ctx;
  iosr_ctl *ctl;
  char swap[256]; /* the swap area's path */
} iosr_test_env;

static inline void iosr_test_inproc(iosr_test_env *t, uint64_t swap_bytes, const char *settings, const char *app) {
  iosr_test_swap(t->swap, sizeof t->swap, swap_bytes);
  t->eng = iosr_engine_start(t->swap, settings);
  CHECK(t->eng);
  iosr_connect_opts o = {.app_name = app, .engine = t->eng};
  t->ctx = iosr_connect(&o);
  CHECK(t->ctx);
  t->ctl = iosr_ctl_open_engine(t->eng);
  CHECK(t->ctl);
}

static inline void iosr_test_inproc_end(iosr_test_env *t) {
  iosr_ctl_close(t->ctl);
  CHECK(iosr_disconnect(t->ctx) == 0);
  CHECK(iosr_engine_stop(t->eng) == 0);
}

/* Forks a test process connected to this one by two pipes. In the parent,
 * to and from reach the child; in the child (0 returned) they reach the
 * parent. */
static inline pid_t iosr_test_fork(int *to, int *from) {
  int a[2], b[2];
  CHECK(pipe(a) == 0 && pipe(b) == 0);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid) {
    close(a[0]);
    close(b[1]);
    *to = a[1];
    *from = b[0];
  } else {
    close(a[1]);
    close(b[0]);
    *to = b[1];
    *from = a[0];
  }
  return pid;
}


/* ---- daemon helpers ---- */
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

/* Daemons started by a test die with it, even when a check fails. */
static pid_t iosr_test_daemons[16];
static void iosr_test_kill_daemons(void) {
  for (int i = 0; i < 16; i++)
    if (iosr_test_daemons[i] > 0) kill(iosr_test_daemons[i], SIGKILL);
}

/* Starts iosrd on swap at socket sock with extra settings ("k=v,..."),
 * stderr to errlog (or inherited when NULL), with at most `nofile`
 * descriptors (0: as inherited); waits until it accepts. */
static inline pid_t iosr_test_daemon_nofile(const char *swap, const char *sock, const char *settings,
                                            const char *errlog, unsigned nofile) {
  const char *bin = getenv("IOSRD");
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    if (nofile) {
      struct rlimit lim = {nofile, nofile};
      if (setrlimit(RLIMIT_NOFILE, &lim)) _exit(126);
    }
    if (errlog) {
      int fd = open(errlog, O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) dup2(fd, 2);
    }
    char set[512];
    snprintf(set, sizeof set, "%s", settings ? settings : "restart_grace_ms=300");
    execl(bin ? bin : "iosrd", "iosrd", "--swap", swap, "--socket", sock, "--set", set, (char *)NULL);
    _exit(127);
  }
  static int registered;
  if (!registered++) atexit(iosr_test_kill_daemons);
  for (int i = 0; i < 16; i++)
    if (iosr_test_daemons[i] <= 0 || kill(iosr_test_daemons[i], 0)) {
      iosr_test_daemons[i] = pid;
      break;
    }
  for (int i = 0; i < 5000; i++) {
    int fd = iosr_sock_connect(sock);
    if (fd >= 0) {
      close(fd);
      return pid;
    }
    CHECK(errno != ENAMETOOLONG, "socket path too long: %s", sock);
    int st;
    pid_t w = waitpid(pid, &st, WNOHANG);
    /* st holds a status only when waitpid reports the child */
    CHECK(w >= 0, "waitpid on iosrd (pid %d) failed", (int)pid);
    CHECK(w == 0, "iosrd exited early (status %d)", st);
    usleep(2000);
  }
  FAIL("iosrd did not come up on %s", sock);
  return -1;
}

static inline pid_t iosr_test_daemon(const char *swap, const char *sock, const char *settings, const char *errlog) {
  return iosr_test_daemon_nofile(swap, sock, settings, errlog, 0);
}

/* iosrd for this test: a new swap area of swap_bytes (its path into swap,
 * 256 bytes), its socket (path into sock, 300 bytes) and, when dlog is not
 * NULL, its stderr (path into dlog, 300 bytes) in the test's folder;
 * settings as iosr_test_daemon's. */
static inline pid_t iosr_test_start_daemon(char *swap, uint64_t swap_bytes, char *sock, const char *settings,
                                           char *dlog) {
  iosr_test_swap(swap, 256, swap_bytes);
  iosr_test_path(sock, 300, "sock");
  if (dlog) iosr_test_path(dlog, 300, "iosrd.log");
  return iosr_test_daemon(swap, sock, settings, dlog);
}

static inline int iosr_test_stop_daemon(pid_t pid) {
  kill(pid, SIGTERM);
  int st;
  waitpid(pid, &st, 0);
  return st;
}

/* Runs the shell command cmd with stderr joined to stdout; its output goes
 * to out (cap bytes, NUL-terminated; discarded when out is NULL). Returns the
 * exit status (128 when killed by a signal). */
static inline int iosr_sh(const char *cmd, char *out, size_t cap) {
  FILE *f = popen(cmd, "r");
  CHECK(f);
  size_t n = 0;
  if (out && cap) {
    n = fread(out, 1, cap - 1, f);
    out[n] = 0;
  } else {
    char tmp[4096];
    while (fread(tmp, 1, sizeof tmp, f) > 0) {
    }
  }
  int st = pclose(f);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 128;
}

/* Runs `iosr ARGS` with --socket sock; returns its exit status. */
static inline int iosr_tool(const char *sock, const char *args, char *out, size_t cap) {
  char cmd[1024];
  const char *tool = getenv("IOSR_TOOL");
  snprintf(cmd, sizeof cmd, "%s --socket %s %s 2>&1", tool ? tool : "iosr", sock, args);
  return iosr_sh(cmd, out, cap);
}

/* A one-byte message channel between test processes. */
static inline void chan_send(int fd, char c) { CHECK(write(fd, &c, 1) == 1); }
static inline char chan_recv(int fd) {
  char c = 0;
  return read(fd, &c, 1) == 1 ? c : 0;
}

/* A number from the engine's JSON statistics ("\"queued\":", ...). */
static inline uint64_t iosr_test_stat(iosr_ctl *ctl, const char *key) {
  char *js = iosr_ctl_stat_json(ctl);
  CHECK(js);
  const char *p = strstr(js, key);
  CHECK(p, "%s not in the statistics", key);
  uint64_t v = strtoull(p + strlen(key), NULL, 10);
  free(js);
  return v;
}

/* Waits until at least n requests are queued (the dispatcher held). */
static inline unsigned iosr_test_wait_queued(iosr_ctl *ctl, unsigned n) {
  unsigned q = 0;
  for (int i = 0; i < 5000 && (q = (unsigned)iosr_test_stat(ctl, "\"queued\":")) < n; i++) usleep(1000);
  CHECK(q >= n, "only %u requests queued", q);
  return q;
}

/* Touching pages that may give SIGBUS (a page IOSR poisoned): install the
 * handler with iosr_catch_bus(1), probe each page with iosr_touch_bus (1 when
 * touching it raised SIGBUS at that page, 0 when it read), restore with
 * iosr_catch_bus(0). Single-threaded use only. */
static sigjmp_buf iosr_bus_jb;
static volatile uintptr_t iosr_bus_addr;
static inline void iosr_on_bus(int sig, siginfo_t *si, void *uc) {
  (void)sig;
  (void)uc;
  iosr_bus_addr = (uintptr_t)si->si_addr;
  siglongjmp(iosr_bus_jb, 1);
}
static inline void iosr_catch_bus(int on) {
  struct sigaction sa = {.sa_sigaction = iosr_on_bus, .sa_flags = SA_SIGINFO};
  if (on) sigaction(SIGBUS, &sa, NULL);
  else signal(SIGBUS, SIG_DFL);
}
static inline int iosr_touch_bus(volatile const uint8_t *q) {
  iosr_bus_addr = 0;
  if (sigsetjmp(iosr_bus_jb, 1) == 0) {
    (void)q[0];
    return 0;
  }
  CHECK(iosr_bus_addr == (uintptr_t)q, "SIGBUS at %#lx touching %p", (unsigned long)iosr_bus_addr, (void *)q);
  return 1;
}

#endif
