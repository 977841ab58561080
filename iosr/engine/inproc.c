/* The engine inside the app's own process (design note section 1): the
 * daemon's engine on a thread of the app, reached through socketpairs with
 * the same messages, for single-app use and tests. Starting, stopping and
 * connecting to one; the fork handlers that put every running one in fork
 * mode (forkmode.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "engine/engine.h"
#include "engine/engine_int.h"

/* Running in-process engines, for the fork handlers (see engine/forkmode.c).
 * The list lock is held from prepare to parent, so engines neither start nor
 * stop during a fork. */
static pthread_mutex_t engines_mu = PTHREAD_MUTEX_INITIALIZER;
static iosr_engine *engines;
static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

static void fork_prepare(void) {
  pthread_mutex_lock(&engines_mu);
  for (iosr_engine *e = engines; e; e = e->next_inproc)
    if (!pthread_equal(pthread_self(), e->thread)) iosr_fork_prepare(e);
}

static void fork_parent(void) {
  for (iosr_engine *e = engines; e; e = e->next_inproc)
    if (!pthread_equal(pthread_self(), e->thread)) iosr_fork_parent(e);
  pthread_mutex_unlock(&engines_mu);
}

static void fork_child(void) {
  /* the engines' threads do not exist in the child */
  engines = NULL;
  pthread_mutex_init(&engines_mu, NULL);
}

static void register_atfork(void) { pthread_atfork(fork_prepare, fork_parent, fork_child); }

static void *run(void *arg) {
  iosr_engine_run(arg);
  return NULL;
}

iosr_engine *iosr_engine_start(const char *swap_path, const char *settings) {
  if (!swap_path) {
    errno = EINVAL;
    return NULL;
  }
  char err[256] = "";
  iosr_engine *e = iosr_engine_create(swap_path, settings, -1, "in-process", err, sizeof err);
  if (!e) {
    int en = errno;
    iosr_err("%s", err);
    errno = en;
    return NULL;
  }
  pthread_once(&atfork_once, register_atfork);
  pthread_mutex_lock(&engines_mu);
  if (pthread_create(&e->thread, NULL, run, e)) {
    pthread_mutex_unlock(&engines_mu);
    iosr_engine_destroy(e);
    errno = EAGAIN;
    return NULL;
  }
  e->next_inproc = engines;
  engines = e;
  pthread_mutex_unlock(&engines_mu);
  return e;
}

int iosr_engine_connect_fd(iosr_engine *e) {
  int sv[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv)) return -1;
  if (iosr_engine_add_fd(e, sv[1])) {
    close(sv[0]);
    close(sv[1]);
    errno = EAGAIN;
    return -1;
  }
  return sv[0];
}

int iosr_engine_stop(iosr_engine *e) {
  if (!e) {
    errno = EINVAL;
    return -1;
  }
  /* a client that just disconnected is seen by the engine thread shortly */
  for (int i = 0; i < 2000 && iosr_engine_clients(e); i++) usleep(1000);
  if (iosr_engine_clients(e)) {
    errno = EBUSY;
    return -1;
  }
  pthread_mutex_lock(&engines_mu);
  iosr_engine **pp = &engines;
  while (*pp && *pp != e) pp = &(*pp)->next_inproc;
  if (*pp) *pp = e->next_inproc;
  pthread_mutex_unlock(&engines_mu);
  iosr_engine_request_stop(e, 0);
  pthread_join(e->thread, NULL);
  iosr_engine_destroy(e);
  return 0;
}
