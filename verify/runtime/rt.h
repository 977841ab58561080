/* Internals of the vrf model checker runtime (not instrumented itself).
 * Design: docs/design/verification.md. */
#ifndef VRF_RT_H
#define VRF_RT_H


#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vrf.h"
#include "vrf_atomic.h"

#define MAXT VRF_MAX_THREADS
#define MAXEV 20000          /* events per execution */
#define MAX_FP 8             /* footprint entries per event */
#define PLAIN_BOUND 10000000 /* plain accesses between two atomic operations */

/* ---- vector clocks ---- */
typedef struct vc {
  uint32_t c[MAXT];
} vc_t;
void vc_join(vc_t *a, const vc_t *b);

/* ---- operations a thread announces at a scheduling point ---- */
enum op_kind {
  OP_NONE,
  OP_LOAD,
  OP_STORE,
  OP_RMW,
  OP_CAS,
  OP_FENCE,
  OP_RELAX,
  OP_CREATE,   /* T0's start of all client threads, or vrf_thread_create */
  OP_JOIN,     /* wait for one thread */
  OP_JOIN_ALL, /* T0 waits for every thread */
  OP_FINISH,   /* thread exit, after its key destructors */
  OP_LOCK,     /* pthread_mutex_lock: blocks while held */
  OP_TRYLOCK,
  OP_UNLOCK,
};

typedef struct op {
  int kind;
  void *addr;
  unsigned size;
  int mo, mo_fail;
  int rmw;
  uint64_t val, expected;
  bool weak;
  int target; /* join: thread id */
  const vrf_site *site;
  uintptr_t pc; /* when there is no site (instrumented __atomic builtins) */
} op_t;

/* Dependency footprint of an event, for DPOR and sleep sets. */
enum { FP_R = 1, FP_W = 2, FP_ALLW = 4 /* depends on every write (await of many locations) */ };
typedef struct fp {
  uintptr_t loc;
  uint8_t rw;
} fp_t;

typedef struct footprint {
  uint8_t n;
  uint8_t any; /* FP_ALLW */
  fp_t e[MAX_FP];
} footprint_t;

bool fp_dependent(const footprint_t *a, const footprint_t *b);
bool fp_reversible(const footprint_t *a, const footprint_t *b);

/* Pseudo-locations for thread lifetime (finish/join) and mutexes. */
#define FP_THREAD_LOC(t) ((uintptr_t)0x10 + (uintptr_t)(t))

/* ---- shared memory between the parent (explorer) and the child ---- */
#define RF_UNKNOWN (-3) /* event whose reads are not one message (await, join) */
typedef struct ev_rec {
  uint8_t tid, en, sleep, created; /* created: mask of threads this event started */
  uint8_t imm;   /* threads whose next operation reads nothing: ready as soon as enabled */
  uint8_t ready; /* canonical exploration: threads that may run at this step */
  uint16_t choice, nchoices;
  int32_t rf; /* event that wrote the message this event read; -1: none of this execution */
  footprint_t fp;
} ev_rec_t;

enum { ST_RUNNING, ST_OK, ST_FAIL, ST_PRUNED_STUTTER, ST_SLEEP_BLOCKED, ST_NONCANON };

typedef struct shm {
  /* input */
  uint32_t prefix_len;
  uint8_t div_sleep;
  int verbose;
  uintptr_t watch_addr;
  uint32_t watch_len;
  struct {
    uint8_t tid;
    uint16_t choice;
  } prefix[MAXEV];
  /* output */
  uint32_t nev;
  uint32_t ndecided; /* nodes whose thread was chosen */
  uint64_t sig; /* execution graph signature (reads-from and mo of every event) */
  int status;
  char fail_kind[32];
  char fail_msg[2048];
  uintptr_t fail_addr;
  uint32_t fail_len;
  char outcome[256];
  uint32_t outcome_len;
  ev_rec_t ev[MAXEV];
} shm_t;

/* ---- model threads ---- */
enum { TH_UNUSED, TH_ALIVE, TH_FINISHED };

#define ITER_LOG 64
typedef struct iter_log {
  uint32_t n;
  bool overflow, stored;
  const vrf_site *site; /* the jw_cpu_relax() that ended the iteration */
  struct {
    void *loc; /* loc_t * */
    uintptr_t addr;
    uint64_t ts;  /* the message read */
    uint64_t val; /* and its value */
  } r[ITER_LOG];
} iter_log_t;

typedef struct vthread {
  int id;
  int state;
  bool starting, exiting;
  pthread_t os;
  int go; /* futex: 1 when this thread may run */
  op_t pending;
  vc_t vc;     /* happens-before clock; vc.c[id] is the current epoch */
  vc_t relvc;  /* clock at the last release fence */
  bool has_rel;
  vc_t acqpend; /* clocks carried by messages read with relaxed loads */
  unsigned nevents;
  unsigned long plain;
  int domain; /* >0: allocator code */
  int spurious_left;
  int dtor_round;
  iter_log_t iter, prev_iter;
  bool has_prev_iter;
  vrf_thread_fn fn;
  void *arg;
  char *stack;
  size_t stack_size;
  char *altstack;
  int creator;
  uint32_t pend_since; /* step from which its pending operation was known */
  int32_t finish_step;
  int stutters; /* identical spin iterations in a row */
  uint64_t sig;
  /* plain writes to atomic locations, materialised at the next scheduling point */
  void *pend_plain[8];
  int npend_plain;
  uint32_t pend_plain_ep[8];
  uintptr_t cstack[64]; /* return addresses from __tsan_func_entry, for reports */
  int csp;
} vthread_t;

/* ---- global runtime state ---- */
typedef struct rt {
  const vrf_client *client;
  int level;
  int param;
  const char *weaken_func; /* --weaken FUNC:ORDER (a mutation) */
  int weaken_mo;           /* the order weakened, -1: all but relaxed */
  unsigned max_events;
  int spurious;
  int stutter; /* identical spin iterations allowed before a thread must wait */
  bool canonical; /* explore canonical schedules only (else source-DPOR) */
  bool in_child;  /* executing an exploration child */
  bool started;   /* setup began: instrumentation is live */
  int nthreads;   /* model threads ever created (ids 0..nthreads-1) */
  vthread_t th[MAXT];
  int cur;        /* running model thread */
  shm_t *shm;
  uint8_t sleep;  /* current sleep set (child, free mode) */
  bool psc_active;
  int verbose_fd; /* -1 unless tracing */
  uintptr_t exe_base;
} rt_t;

extern rt_t rt;
extern __thread vthread_t *rt_self;

/* arena.c: bump allocation that lives in the zygote and is copied on write */
void *arena_alloc(size_t n);
void *arena_grow(void *old, size_t old_n, size_t new_n);
void arena_init(void);

/* sched.c */
void sched_init_thread0(void);
void sched_point(vthread_t *t, const op_t *o); /* announce o, return when chosen */
void sched_finish_current(void);
void exec_begin_event(vthread_t *t);
void exec_end_event(vthread_t *t, const footprint_t *fp, unsigned choice, unsigned n);
void exec_set_rf(int32_t rf);
unsigned exec_choice(unsigned n);         /* the data choice for the event being executed */
void run_execution(void) __attribute__((noreturn));
void child_end(int status) __attribute__((noreturn));
int thread_create(vrf_thread_fn fn, void *arg);
void thread_join(int id);
bool thread_enabled(vthread_t *t);
footprint_t op_footprint(vthread_t *t, const op_t *o);
uint32_t event_index(void);
int32_t last_higher(int tid);
void stacks_init(void);

/* model.c: locations, messages, views and the atomic operations */
void model_exec(vthread_t *t, op_t *o, uint64_t *result, bool *ok);
bool model_relax_enabled(vthread_t *t);
bool model_mutex_free(vthread_t *t, void *addr);
int32_t model_relax_ready(vthread_t *t);
bool model_read_ready(vthread_t *t, int32_t lh);
void model_relax_exec(vthread_t *t);
void model_plain_overlap(vthread_t *t, uintptr_t a, unsigned n, bool write);
void model_flush_plain(vthread_t *t);
void model_relax_exec(vthread_t *t);
void model_forget(uintptr_t a, size_t n);
uint64_t model_mo_signature(void);
void model_check_release(vthread_t *t, uintptr_t a, size_t n, const char *what);

/* psc.c: the seq_cst order check */
typedef struct psc_cand psc_cand_t;
void psc_note_fence(vthread_t *t, uint32_t ev);
bool psc_check_access(vthread_t *t, void *loc, uint64_t key, bool sc);
void psc_commit_access(vthread_t *t, void *loc, uint64_t key, bool sc, uint32_t ev);

/* shadow.c: race detection on plain accesses */
void shadow_access(vthread_t *t, uintptr_t a, unsigned n, bool write, uintptr_t pc);
void shadow_check_atomic(vthread_t *t, uintptr_t a, unsigned n, bool write, const vrf_site *s);
void shadow_set_atomic(uintptr_t a, unsigned n);
bool shadow_is_atomic(uintptr_t a, unsigned n);
uint32_t shadow_last_writer(uintptr_t a, int *tid);
void shadow_forget(uintptr_t a, size_t n);
void shadow_check_release(vthread_t *t, uintptr_t a, size_t n, const char *what);

/* regions.c: legal memory */
void regions_init(void);
void regions_add_thread_stack(int tid, const void *p, size_t n);
void regions_disown(uintptr_t a, size_t n);
bool regions_any(uintptr_t a, unsigned n); /* inside any legal, owned or block region */
void regions_check(vthread_t *t, uintptr_t a, unsigned n, bool write, uintptr_t pc, const vrf_site *s);

/* report.c */
void fail(const char *kind, uintptr_t addr, unsigned len, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));
void trace_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
bool tracing(void);
void trace_watch(vthread_t *t, uintptr_t a, unsigned n, bool write, bool atomic, uintptr_t pc,
                 const vrf_site *s);
const char *mo_name(int mo);
void fmt_addr(char *buf, size_t cap, uintptr_t a);
const char *short_file(const char *f);
void fmt_site(char *buf, size_t cap, const vrf_site *s, uintptr_t pc);
void signals_init_thread(vthread_t *t);
void signals_install(void);

/* api.c */
uint64_t atomic_op(op_t *o, bool *ok);

/* explore.c (parent) */
int explore(int workers);



#endif
