/* Running one execution: model threads are real pthreads that run one at a
 * time. At every scheduling point the running thread announces its next
 * operation, picks the thread that executes the next event (from the replayed
 * prefix, else the lowest enabled thread not in the sleep set) and hands over
 * through a futex. */
#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "rt.h"

rt_t rt;
__thread vthread_t *rt_self;

#define STACK_SIZE (1u << 20)

static pthread_key_t rt_key;

static void futex_wait(int *a, int v) { syscall(SYS_futex, a, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0); }
static void futex_wake(int *a) { syscall(SYS_futex, a, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0); }

static void wait_turn(vthread_t *t) {
  while (!__atomic_load_n(&t->go, __ATOMIC_ACQUIRE)) futex_wait(&t->go, 0);
  __atomic_store_n(&t->go, 0, __ATOMIC_RELAXED);
}

static void give_turn(vthread_t *u) {
  rt.cur = u->id;
  __atomic_store_n(&u->go, 1, __ATOMIC_RELEASE);
  futex_wake(&u->go);
}

uint32_t event_index(void) { return rt.shm ? rt.shm->nev : 0; }

static void key_dtor(void *p);

/* Stacks for every thread slot are mapped once in the zygote, so creating a
 * thread in a child maps nothing. glibc keeps the TLS block and thread
 * descriptor inside a user-supplied stack, so the stack region covers TLS. */
void stacks_init(void) {
  if (pthread_key_create(&rt_key, key_dtor) != 0) {
    fprintf(stderr, "vrf: pthread_key_create failed\n");
    exit(2);
  }
  for (int i = 1; i < MAXT; i++) {
    vthread_t *t = &rt.th[i];
    t->stack_size = STACK_SIZE;
    t->stack = mmap(NULL, STACK_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    t->altstack = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (t->stack == MAP_FAILED || t->altstack == MAP_FAILED) {
      perror("vrf: cannot map thread stacks");
      exit(2);
    }
    regions_add_thread_stack(i, t->stack, STACK_SIZE);
  }
  rt.th[0].altstack = mmap(NULL, 1 << 16, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

void sched_init_thread0(void) {
  vthread_t *t = &rt.th[0];
  t->id = 0;
  t->state = TH_ALIVE;
  t->vc.c[0] = 1;
  t->spurious_left = rt.spurious;
  t->pend_since = 0;
  rt.nthreads = 1;
  rt.cur = 0;
  rt_self = t;
}

static const char *op_word(const op_t *o) {
  switch (o->kind) {
    case OP_LOAD: return "load";
    case OP_STORE: return "store";
    case OP_RMW: return "rmw";
    case OP_CAS: return "cas";
    case OP_FENCE: return "fence";
    case OP_RELAX: return "spin (jw_cpu_relax)";
    case OP_CREATE: return "create";
    case OP_JOIN: return "join";
    case OP_JOIN_ALL: return "join all";
    case OP_FINISH: return "finish";
    case OP_LOCK: return "mutex lock";
    case OP_TRYLOCK: return "mutex trylock";
    case OP_UNLOCK: return "mutex unlock";
  }
  return "?";
}

bool thread_enabled(vthread_t *t) {
  if (t->state != TH_ALIVE || t->starting) return false;
  const op_t *o = &t->pending;
  switch (o->kind) {
    case OP_JOIN: return rt.th[o->target].state == TH_FINISHED;
    case OP_JOIN_ALL:
      for (int i = 1; i < rt.nthreads; i++)
        if (rt.th[i].state != TH_FINISHED) return false;
      return true;
    case OP_RELAX: return model_relax_enabled(t);
    case OP_LOCK: return model_mutex_free(t, o->addr);
    default: return true;
  }
}

footprint_t op_footprint(vthread_t *t, const op_t *o) {
  footprint_t f = {0};
  uintptr_t a = (uintptr_t)o->addr;
  switch (o->kind) {
    case OP_LOAD: f.n = 1, f.e[0] = (fp_t){a, FP_R}; break;
    case OP_STORE: f.n = 1, f.e[0] = (fp_t){a, FP_W}; break;
    case OP_RMW:
    case OP_CAS:
    case OP_LOCK:
    case OP_TRYLOCK:
    case OP_UNLOCK: f.n = 1, f.e[0] = (fp_t){a, FP_R | FP_W}; break;
    case OP_RELAX:
      if (t->iter.overflow || t->iter.n > MAX_FP) {
        f.any = 1;
      } else {
        for (uint32_t i = 0; i < t->iter.n; i++) {
          uintptr_t l = t->iter.r[i].addr;
          bool dup = false;
          for (int j = 0; j < f.n; j++) dup |= f.e[j].loc == l;
          if (!dup && f.n < MAX_FP) f.e[f.n++] = (fp_t){l, FP_R};
          else if (!dup) f.any = 1;
        }
      }
      break;
    case OP_JOIN: f.n = 1, f.e[0] = (fp_t){FP_THREAD_LOC(o->target), FP_R}; break;
    case OP_JOIN_ALL:
      for (int i = 1; i < rt.nthreads && f.n < MAX_FP; i++) f.e[f.n++] = (fp_t){FP_THREAD_LOC(i), FP_R};
      break;
    case OP_FINISH: f.n = 1, f.e[0] = (fp_t){FP_THREAD_LOC(t->id), FP_W}; break;
    default: break; /* fences and creation depend on nothing (creation orders by clocks) */
  }
  return f;
}

/* Called when nothing can run although not every thread finished. */
static void no_progress(void) __attribute__((noreturn));
static void no_progress(void) {
  char buf[1500];
  size_t k = 0;
  for (int i = 0; i < rt.nthreads; i++) {
    vthread_t *t = &rt.th[i];
    if (t->state != TH_ALIVE) continue;
    char site[300] = "";
    if (t->pending.site || t->pending.pc) fmt_site(site, sizeof site, t->pending.site, t->pending.pc);
    k += snprintf(buf + k, sizeof buf - k, "%sT%d waits at %s%s%s", k ? "; " : "", i, op_word(&t->pending),
                  site[0] ? " " : "", site);
    if (t->pending.kind == OP_RELAX)
      k += snprintf(buf + k, sizeof buf - k, " (no other thread can write what its loop reads)");
    if (k >= sizeof buf) break;
  }
  fail("no progress", 0, 0, "no thread can make progress: %s", buf);
}

static int32_t last_higher_at(int tid, uint32_t upto);

/* Canonical exploration: t may run now if the schedule stays the canonical
 * one of every execution it leads to (docs/design/verification.md). */
static bool canonical_ready(vthread_t *t) {
  const op_t *o = &t->pending;
  int32_t lh = last_higher_at(t->id, rt.shm->nev);
  switch (o->kind) {
    case OP_LOAD:
    case OP_RMW:
    case OP_CAS:
    case OP_LOCK:
    case OP_TRYLOCK: return model_read_ready(t, lh);
    case OP_RELAX: return lh < model_relax_ready(t);
    case OP_JOIN: return lh < rt.th[o->target].finish_step + 1;
    case OP_JOIN_ALL: {
      int32_t r = 0;
      for (int i = 1; i < rt.nthreads; i++)
        if (rt.th[i].finish_step + 1 > r) r = rt.th[i].finish_step + 1;
      return lh < r;
    }
    default: return lh < 0;
  }
}

/* Chooses the thread that executes event number shm->nev. */
static int decide(void) {
  shm_t *s = rt.shm;
  uint32_t k = s->nev;
  if (k >= MAXEV) fail("loop bound", 0, 0, "execution longer than %d events", MAXEV);
  uint8_t en = 0;
  for (int i = 0; i < rt.nthreads; i++)
    if (thread_enabled(&rt.th[i])) en |= 1u << i;
  uint8_t rd = en;
  if (rt.canonical) {
    rd = 0;
    for (int i = 0; i < rt.nthreads; i++)
      if ((en >> i & 1) && canonical_ready(&rt.th[i])) rd |= (uint8_t)(1u << i);
  }
  s->ev[k].ready = rd;
  int pick;
  if (k < s->prefix_len) {
    pick = s->prefix[k].tid;
    if (!(en >> pick & 1))
      fail("nondeterminism", 0, 0,
           "replay diverged at event %u: T%d is not enabled (the client depends on something outside the "
           "model, such as time or uninitialised memory)",
           k, pick);
  } else {
    if (en == 0) no_progress();
    uint8_t c = en & rd & (uint8_t)~rt.sleep;
    if (c == 0) child_end(rt.canonical ? ST_NONCANON : ST_SLEEP_BLOCKED);
    pick = __builtin_ctz(c);
    s->ev[k].sleep = rt.sleep;
  }
  uint8_t imm = 0;
  for (int i = 0; i < rt.nthreads; i++) {
    int kd = rt.th[i].pending.kind;
    if (kd != OP_LOAD && kd != OP_RMW && kd != OP_CAS && kd != OP_LOCK && kd != OP_TRYLOCK && kd != OP_RELAX)
      imm |= (uint8_t)(1u << i);
  }
  s->ev[k].imm = imm;
  s->ev[k].tid = (uint8_t)pick;
  s->ev[k].en = en;
  s->ev[k].choice = 0;
  s->ev[k].nchoices = 0;
  s->ev[k].created = 0;
  s->ev[k].rf = RF_UNKNOWN;
  s->ndecided = k + 1;
  return pick;
}

void sched_point(vthread_t *t, const op_t *o) {
  t->pending = *o;
  model_flush_plain(t);
  if (!rt.in_child) return; /* setup in the zygote: one thread, no choices */
  if (t->starting) {
    /* A new thread reached its first operation: give control back to its creator. */
    t->starting = false;
    give_turn(&rt.th[t->creator]);
    wait_turn(t);
    return;
  }
  int u = decide();
  if (u != t->id) {
    give_turn(&rt.th[u]);
    wait_turn(t);
  }
}

/* The last step since t's pending operation was known at which a thread with
 * a higher id ran; -1 if none. */
static int32_t last_higher_at(int tid, uint32_t upto) {
  shm_t *s = rt.shm;
  for (int32_t k = (int32_t)upto - 1; k >= (int32_t)rt.th[tid].pend_since; k--)
    if (s->ev[k].tid > tid) return k;
  return -1;
}

int32_t last_higher(int tid) { return last_higher_at(tid, rt.shm->nev); }

/* Canonical exploration: an event that reads nothing was ready as soon as it
 * was pending, so no higher thread may have run since; a join or an await
 * was ready from the step that enabled it. Others are checked on their read. */
static void canonical_check(vthread_t *t) {
  const op_t *o = &t->pending;
  int32_t lh = last_higher(t->id), ready;
  if (lh < 0) return;
  switch (o->kind) {
    case OP_LOAD:
    case OP_RMW:
    case OP_CAS:
    case OP_LOCK:
    case OP_TRYLOCK: return; /* filtered by what they read (model.c) */
    case OP_JOIN: ready = rt.th[o->target].finish_step + 1; break;
    case OP_JOIN_ALL:
      ready = 0;
      for (int i = 1; i < rt.nthreads; i++)
        if (rt.th[i].finish_step + 1 > ready) ready = rt.th[i].finish_step + 1;
      break;
    case OP_RELAX: ready = model_relax_ready(t); break;
    default: ready = 0; break;
  }
  if (lh >= ready) child_end(ST_NONCANON);
}

void exec_begin_event(vthread_t *t) {
  if (rt.canonical && rt.in_child) canonical_check(t);
  if (rt.in_child && ++t->nevents > rt.max_events) {
    char site[300];
    fmt_site(site, sizeof site, t->pending.site, 0);
    fail("loop bound", 0, 0,
         "T%d executed more than %u atomic operations (next: %s at %s): a loop that does not terminate "
         "within the bound",
         t->id, rt.max_events, op_word(&t->pending), site);
  }
  t->vc.c[t->id]++; /* even: the event's epoch */
  t->plain = 0;
}

void exec_set_rf(int32_t rf) {
  if (rt.in_child) rt.shm->ev[rt.shm->nev].rf = rf;
}

unsigned exec_choice(unsigned n) {
  shm_t *s = rt.shm;
  if (!rt.in_child) return 0;
  uint32_t k = s->nev;
  unsigned c = 0;
  if (k < s->prefix_len) {
    c = s->prefix[k].choice;
    if (c >= n)
      fail("nondeterminism", 0, 0, "replay diverged at event %u: choice %u of only %u", k, c, n);
  }
  s->ev[k].choice = (uint16_t)c;
  s->ev[k].nchoices = (uint16_t)n;
  return c;
}

void exec_end_event(vthread_t *t, const footprint_t *fp, unsigned choice, unsigned n) {
  t->vc.c[t->id]++; /* odd: plain accesses until the next event */
  if (!rt.in_child) return;
  shm_t *s = rt.shm;
  uint32_t k = s->nev;
  t->pend_since = k + 1;
  ev_rec_t *e = &s->ev[k];
  e->choice = (uint16_t)choice;
  e->nchoices = (uint16_t)n;
  e->fp = *fp;
  /* Sleep sets: a sleeping thread wakes when an event depends on its next step. */
  if (k + 1 >= s->prefix_len) {
    uint8_t z = (k + 1 == s->prefix_len) ? s->div_sleep : rt.sleep;
    for (int q = 0; q < rt.nthreads; q++) {
      if (!(z >> q & 1)) continue;
      footprint_t nf = op_footprint(&rt.th[q], &rt.th[q].pending);
      if (rt.th[q].state != TH_ALIVE || fp_dependent(&nf, fp)) z &= (uint8_t) ~(1u << q);
    }
    rt.sleep = z;
  }
  s->nev = k + 1;
}

/* ---- threads ---- */

static void *trampoline(void *arg) {
  vthread_t *t = arg;
  rt_self = t;
  signals_init_thread(t);
  pthread_setspecific(rt_key, t);
  t->fn(t->arg);
  t->exiting = true;
  return NULL; /* glibc now runs the pthread key destructors, ours last */
}

/* The thread's end: after the allocator's key destructors ran (ours re-arms
 * itself until the last destructor round). */
static void key_dtor(void *p) {
  vthread_t *t = p;
  if (++t->dtor_round < PTHREAD_DESTRUCTOR_ITERATIONS) {
    pthread_setspecific(rt_key, t);
    return;
  }
  op_t o = {.kind = OP_FINISH};
  sched_point(t, &o);
  exec_begin_event(t);
  footprint_t f = op_footprint(t, &o);
  t->state = TH_FINISHED;
  t->finish_step = (int32_t)event_index();
  if (tracing()) trace_printf("#%-4u T%d  finish\n", event_index(), t->id);
  exec_end_event(t, &f, 0, 1);
  int u = decide();
  rt_self = NULL;
  give_turn(&rt.th[u]); /* and this OS thread exits */
}

static int start_thread(vthread_t *creator, vrf_thread_fn fn, void *arg) {
  if (rt.nthreads >= MAXT) fail("internal", 0, 0, "more than %d threads", MAXT - 1);
  int id = rt.nthreads++;
  vthread_t *t = &rt.th[id];
  t->id = id;
  t->state = TH_ALIVE;
  t->starting = true;
  t->creator = creator->id;
  t->vc = creator->vc;
  t->vc.c[id] = 1;
  t->pend_since = rt.shm->nev + 1;
  t->spurious_left = rt.spurious;
  t->fn = fn;
  t->arg = arg;
  if (tracing()) trace_printf("#%-4u T%d  create T%d (it runs up to its first atomic operation)\n", event_index(), creator->id, id);
  pthread_attr_t at;
  pthread_attr_init(&at);
  pthread_attr_setstack(&at, t->stack, t->stack_size);
  if (pthread_create(&t->os, &at, trampoline, t) != 0) fail("internal", 0, 0, "pthread_create failed");
  pthread_attr_destroy(&at);
  wait_turn(creator); /* until the new thread announced its first operation */
  rt.cur = creator->id;
  rt.shm->ev[rt.shm->nev].created |= (uint8_t)(1u << id);
  return id;
}

int thread_create(vrf_thread_fn fn, void *arg) {
  vthread_t *t = rt_self;
  if (!t || !rt.in_child) {
    fprintf(stderr, "vrf: threads can only be created by model threads during an execution\n");
    exit(2);
  }
  op_t o = {.kind = OP_CREATE};
  sched_point(t, &o);
  exec_begin_event(t);
  int id = start_thread(t, fn, arg);
  footprint_t f = {0};
  exec_end_event(t, &f, 0, 1);
  return id;
}

void thread_join(int id) {
  vthread_t *t = rt_self;
  if (id <= 0 || id >= rt.nthreads || id == t->id) fail("assertion", 0, 0, "join of invalid thread %d", id);
  op_t o = {.kind = OP_JOIN, .target = id};
  sched_point(t, &o);
  exec_begin_event(t);
  vc_join(&t->vc, &rt.th[id].vc);
  footprint_t f = op_footprint(t, &o);
  if (tracing()) trace_printf("#%-4u T%d  join T%d\n", event_index(), t->id, id);
  exec_end_event(t, &f, 0, 1);
}

/* Keeps every model thread of this execution on the CPU the kernel chose for
 * the child at fork (the least loaded one then). Model threads run one at a
 * time, so one CPU loses no parallelism; across CPUs each futex hand-off waits
 * for the other CPU's running task to reach the end of its time slice, which on
 * a busy machine made a run four times slower (docs/design/verification.md,
 * "How one execution runs"). Failure only costs speed, so it is ignored. */
static void pin_to_this_cpu(void) {
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  (void)sched_setaffinity(0, sizeof set, &set);
}

/* One execution, in a freshly forked child. */
void run_execution(void) {
  rt.in_child = true;
  pin_to_this_cpu();
  shm_t *s = rt.shm;
  s->nev = 0;
  s->ndecided = 0;
  s->status = ST_RUNNING;
  s->outcome_len = 0;
  s->outcome[0] = 0;
  rt.sleep = 0;
  vthread_t *t0 = &rt.th[0];
  rt_self = t0;
  alarm(60); /* watchdog: code stuck without any atomic operation */

  op_t o = {.kind = OP_CREATE};
  sched_point(t0, &o);
  exec_begin_event(t0);
  for (int i = 0; i < MAXT - 1 && rt.client->threads[i]; i++) start_thread(t0, rt.client->threads[i], rt.client->args[i]);
  footprint_t none = {0};
  exec_end_event(t0, &none, 0, 1);

  o = (op_t){.kind = OP_JOIN_ALL};
  sched_point(t0, &o);
  exec_begin_event(t0);
  for (int i = 1; i < rt.nthreads; i++) vc_join(&t0->vc, &rt.th[i].vc);
  footprint_t f = op_footprint(t0, &o);
  if (tracing()) trace_printf("#%-4u T0  join all threads\n", event_index());
  exec_end_event(t0, &f, 0, 1);

  if (rt.client->finish) rt.client->finish();
  child_end(ST_OK);
}

void child_end(int status) {
  if (!rt.in_child) {
    if (status == ST_FAIL) exit(1);
    exit(0);
  }
  rt.shm->status = status;
  uint64_t sig = 0;
  for (int i = 0; i < rt.nthreads; i++) sig += (rt.th[i].sig ^ (uint64_t)i) * 0x9E3779B97F4A7C15ull;
  rt.shm->sig = sig + model_mo_signature();
  if (tracing()) {
    if (status == ST_OK) trace_printf("-- execution complete\n");
    else if (status == ST_PRUNED_STUTTER) trace_printf("-- execution dropped: a spin iteration repeated the previous one\n");
    else if (status == ST_SLEEP_BLOCKED) trace_printf("-- execution dropped: redundant (sleep set)\n");
    else if (status == ST_NONCANON) trace_printf("-- execution dropped: another schedule covers it\n");
  }
  _exit(status == ST_FAIL ? 1 : 0);
}
