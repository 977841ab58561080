/* Failures and the trace of a replayed execution. The trace is written by the
 * child to a pipe; the parent symbolizes "{pc:...}" tokens (addr2line) and
 * prints it. */
#include <dlfcn.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rt.h"

bool tracing(void) { return rt.verbose_fd >= 0 && rt.in_child; }

void trace_printf(const char *fmt, ...) {
  if (rt.verbose_fd < 0) return;
  char buf[2048];
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof buf - 1) n = sizeof buf - 1;
  if (n > 0 && write(rt.verbose_fd, buf, (size_t)n) < 0) {
  }
}

const char *mo_name(int mo) {
  switch (mo) {
    case __ATOMIC_RELAXED: return "relaxed";
    case __ATOMIC_CONSUME: return "consume";
    case __ATOMIC_ACQUIRE: return "acquire";
    case __ATOMIC_RELEASE: return "release";
    case __ATOMIC_ACQ_REL: return "acq_rel";
    case __ATOMIC_SEQ_CST: return "seq_cst";
  }
  return "?";
}

/* Paths relative to the repository root (VRF_SOURCE_DIR, set by CMake). */
const char *short_file(const char *f) {
  size_t n = strlen(VRF_SOURCE_DIR);
  if (strncmp(f, VRF_SOURCE_DIR, n) == 0 && f[n] == '/') return f + n + 1;
  return f;
}

void fmt_site(char *buf, size_t cap, const vrf_site *s, uintptr_t pc) {
  if (s) snprintf(buf, cap, "%s:%d (%s)", short_file(s->file), s->line, s->func);
  else if (pc) {
    Dl_info di;
    uintptr_t base = 0;
    if (dladdr((void *)pc, &di) && di.dli_fbase) base = (uintptr_t)di.dli_fbase;
    snprintf(buf, cap, "{pc:%lx}", (unsigned long)(pc - base - 1));
  } else {
    snprintf(buf, cap, "?");
  }
}

void fmt_addr(char *buf, size_t cap, uintptr_t a) {
  Dl_info di;
  if (dladdr((void *)a, &di) && di.dli_fbase == (void *)rt.exe_base && rt.exe_base) {
    /* in the program image: named by the parent from its symbol table (statics too) */
    snprintf(buf, cap, "{data:%lx}", (unsigned long)(a - rt.exe_base));
    return;
  }
  if (dladdr((void *)a, &di) && di.dli_sname && di.dli_saddr) {
    uintptr_t off = a - (uintptr_t)di.dli_saddr;
    if (off) snprintf(buf, cap, "%s+%lu", di.dli_sname, (unsigned long)off);
    else snprintf(buf, cap, "%s", di.dli_sname);
    return;
  }
  snprintf(buf, cap, "%#lx", (unsigned long)a);
}

void trace_watch(vthread_t *t, uintptr_t a, unsigned n, bool write, bool atomic, uintptr_t pc, const vrf_site *s) {
  shm_t *sh = rt.shm;
  if (!sh->watch_len || a + n <= sh->watch_addr || a >= sh->watch_addr + sh->watch_len) return;
  char site[300], addr[200];
  fmt_site(site, sizeof site, s, pc);
  fmt_addr(addr, sizeof addr, a);
  trace_printf("      T%d  %s %s of %u bytes at %s (watched)  %s\n", t->id, atomic ? "atomic" : "plain",
               write ? "write" : "read", n, addr, site);
}

void fail(const char *kind, uintptr_t addr, unsigned len, const char *fmt, ...) {
  char msg[2048];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  if (!rt.in_child) {
    fprintf(stderr, "vrf: %s during setup: %s\n", kind, msg);
    exit(1);
  }
  shm_t *s = rt.shm;
  snprintf(s->fail_kind, sizeof s->fail_kind, "%s", kind);
  snprintf(s->fail_msg, sizeof s->fail_msg, "%s", msg);
  s->fail_addr = addr;
  s->fail_len = len;
  if (tracing()) {
    vthread_t *t = rt_self;
    trace_printf("** FAILURE (%s) in T%d after event #%u: %s\n", kind, t ? t->id : -1,
                 s->nev ? s->nev - 1 : 0, msg);
    if (t && t->csp > 1) { /* the outermost call is the checker's thread start */
      trace_printf("   T%d was called from:", t->id);
      for (int i = (t->csp < 64 ? t->csp : 64) - 1; i >= 1; i--) {
        char site[64];
        fmt_site(site, sizeof site, NULL, t->cstack[i]);
        trace_printf(" %s%s", site, i > 1 ? " <-" : "");
      }
      trace_printf("\n");
    }
  }
  child_end(ST_FAIL);
}

void vrf_fail(const char *fmt, ...) {
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  fail("assertion", 0, 0, "%s", msg);
}

void vrf_assert_fail(const char *expr, const char *file, int line, const char *func) {
  fail("assertion", 0, 0, "VRF_ASSERT(%s) failed at %s:%d (%s)", expr, short_file(file), line, func);
}

/* ---- crashes ---- */

static void on_signal(int sig, siginfo_t *si, void *uc) {
  (void)uc;
  if (sig == SIGALRM) {
    fail("no progress", 0, 0,
         "T%d ran for 60 s without reaching an atomic operation (a loop without atomics or plain accesses?)",
         rt.cur);
  }
  const char *name = sig == SIGSEGV ? "SIGSEGV" : sig == SIGBUS ? "SIGBUS" : sig == SIGFPE ? "SIGFPE"
                   : sig == SIGILL ? "SIGILL" : sig == SIGABRT ? "SIGABRT (abort, e.g. jw_fatal)" : "signal";
  fail("crash", (uintptr_t)si->si_addr, 1, "T%d received %s (fault address %p)", rt_self ? rt_self->id : rt.cur,
       name, si->si_addr);
}

void signals_init_thread(vthread_t *t) {
  if (!t->altstack) return;
  stack_t ss = {.ss_sp = t->altstack, .ss_size = 1 << 16, .ss_flags = 0};
  sigaltstack(&ss, NULL);
}

void signals_install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  int sigs[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGALRM};
  for (unsigned i = 0; i < sizeof sigs / sizeof sigs[0]; i++) sigaction(sigs[i], &sa, NULL);
}
