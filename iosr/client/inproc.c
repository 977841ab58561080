/* The engine inside the app's own process (design note section 1): the
 * daemon's engine on a thread, reached through socketpairs with the same
 * messages, for single-app use and tests.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "client/client_int.h"
#include "common/log.h"
#include "engine/engine.h"

struct iosr_engine {
  iosr_engine_s *core;
  pthread_t thread;
  struct iosr_engine *next;
};

/* Running in-process engines, for the fork handlers (see engine/forkmode.c).
 * The list lock is held from prepare to parent, so engines neither start nor
 * stop during a fork. */
static pthread_mutex_t engines_mu = PTHREAD_MUTEX_INITIALIZER;
static iosr_engine *engines;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  pthread_mutex_lock(&engines_mu);
  for (iosr_engine *e = engines; e; e = e->next)
    if (!pthread_equal(pthread_self(), e->thread)) iosr_eng_fork_prepare(e->core);
}

static void fork_parent(void) {
  for (iosr_engine *e = engines; e; e = e->next)
    if (!pthread_equal(pthread_self(), e->thread)) iosr_eng_fork_parent(e->core);
  pthread_mutex_unlock(&engines_mu);
}

static void fork_child(void) {
  /* the engines' threads do not exist in the child */
  engines = NULL;
  pthread_mutex_init(&engines_mu, NULL);
}

static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void *run(void *arg) {
  iosr_engine *e = arg;
  iosr_eng_run(e->core);
  return NULL;
}

iosr_engine *iosr_engine_start(const char *swap_path, const char *settings) {
  if (!swap_path) {
    errno = EINVAL;
    return NULL;
  }
  iosr_engine *e = calloc(1, sizeof *e);
  if (!e) return NULL;
  char err[256] = "";
  e->core = iosr_eng_create(swap_path, settings, -1, "in-process", err, sizeof err);
  if (!e->core) {
    int en = errno;
    iosr_err("%s", err);
    free(e);
    errno = en;
    return NULL;
  }
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&engines_mu);
  if (pthread_create(&e->thread, NULL, run, e)) {
    pthread_mutex_unlock(&engines_mu);
    iosr_eng_destroy(e->core);
    free(e);
    errno = EAGAIN;
    return NULL;
  }
  e->next = engines;
  engines = e;
  pthread_mutex_unlock(&engines_mu);
  return e;
}

int iosr_engine_connect_fd(iosr_engine *e) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) return -1;
  if (iosr_eng_add_fd(e->core, sv[1])) {
    close(sv[0]);
    close(sv[1]);
    errno = EAGAIN;
    return -1;
  }
  return sv[0];
}

iosr_engine_s *iosr_engine_core(iosr_engine *e) { return e->core; }

int iosr_engine_stop(iosr_engine *e) {
  if (!e) {
    errno = EINVAL;
    return -1;
  }
  /* a client that just disconnected is seen by the engine thread shortly */
  for (int i = 0; i < 2000 && iosr_eng_clients_atomic(e->core); i++) usleep(1000);
  if (iosr_eng_clients_atomic(e->core)) {
    errno = EBUSY;
    return -1;
  }
  pthread_mutex_lock(&engines_mu);
  iosr_engine **pp = &engines;
  while (*pp && *pp != e) pp = &(*pp)->next;
  if (*pp) *pp = e->next;
  pthread_mutex_unlock(&engines_mu);
  iosr_eng_request_stop(e->core, 0);
  pthread_join(e->thread, NULL);
  iosr_eng_destroy(e->core);
  free(e);
  return 0;
}
