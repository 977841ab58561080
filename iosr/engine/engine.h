/* The engine as iosrd and the in-process mode use it (design note section
 * 1): create it on a swap area, run its loop on one thread, hand it client
 * sockets, stop it. Everything else about the engine is internal
 * (engine_int.h).
 */
#ifndef IOSR_ENGINE_ENGINE_H
#define IOSR_ENGINE_ENGINE_H

#include <stddef.h>

typedef struct iosr_engine_s iosr_engine_s;

/* Opens the swap area and sets the engine up. listen_fd: a listening
 * SOCK_SEQPACKET socket (iosrd) or -1 (in-process). settings: "k=v,..." or
 * NULL, applied after the environment. role: "iosrd" or "in-process".
 * NULL with errno and a message in err. */
iosr_engine_s *iosr_eng_create(const char *swap_path, const char *settings, int listen_fd, const char *role,
                               char *err, size_t cap);
/* Runs the event loop until iosr_eng_request_stop; returns 0. */
int iosr_eng_run(iosr_engine_s *e);
/* Thread-safe: hands a connected socket to the engine (in-process clients). */
int iosr_eng_add_fd(iosr_engine_s *e, int fd);
/* Thread-safe, async-signal-safe: asks the loop to stop. drain: swap every
 * client's pages back in first (orderly daemon shutdown). */
void iosr_eng_request_stop(iosr_engine_s *e, int drain);
/* Number of connected clients (apps and control). Engine thread only, or
 * after the loop stopped. */
unsigned iosr_eng_clients(iosr_engine_s *e);
/* Thread-safe: connections open now (apps and control). */
unsigned iosr_eng_clients_atomic(iosr_engine_s *e);
/* In-process engines only, called from pthread_atfork handlers of the
 * forking thread: before fork, the engine enters a mode in which it calls no
 * malloc (glibc holds its allocator locks across fork, while fork waits for
 * the engine to read the userfaultfd FORK event); after fork it leaves it.
 * Thread-safe. */
void iosr_eng_fork_prepare(iosr_engine_s *e);
void iosr_eng_fork_parent(iosr_engine_s *e);

/* Frees everything; marks the swap area clean if no app holds slots. */
void iosr_eng_destroy(iosr_engine_s *e);

#endif
