/* The engine as the layer above uses it (design note section 1): iosrd
 * creates one on a swap area and runs its loop on its main thread; libiosr
 * connects to one running in its own process (iosr_engine_start of
 * include/iosr.h). The engine's type is include/iosr.h's iosr_engine, opaque
 * there and here; everything else about the engine is internal
 * (engine_int.h).
 */
#ifndef IOSR_ENGINE_ENGINE_H
#define IOSR_ENGINE_ENGINE_H

#include <stddef.h>

#include "iosr.h"

/* Opens the swap area and sets the engine up (engine.c). listen_fd: a
 * listening SOCK_SEQPACKET socket (iosrd) or -1 (in-process). settings:
 * "k=v,..." or NULL, applied after the environment. role: "iosrd" or
 * "in-process" (a string that outlives the engine). NULL with errno (as
 * iosr_engine_start) and a one-line message in err (cap bytes). */
iosr_engine *iosr_engine_create(const char *swap_path, const char *settings, int listen_fd, const char *role,
                                char *err, size_t cap);
/* Runs the event loop on the calling thread until iosr_engine_request_stop;
 * returns 0 (engine.c). */
int iosr_engine_run(iosr_engine *e);
/* Asks the loop to stop (engine.c). drain: swap every client's pages back
 * in first (orderly daemon shutdown). Thread-safe, async-signal-safe. */
void iosr_engine_request_stop(iosr_engine *e, int drain);
/* Frees everything once the loop has returned; marks the swap area clean if
 * no app holds slots (engine.c). */
void iosr_engine_destroy(iosr_engine *e);

/* A new client connection to an engine running in this process
 * (inproc.c): this end of a SOCK_SEQPACKET socketpair whose other end the
 * engine serves as it serves iosrd's clients. The descriptor, or -1 with
 * errno (EMFILE, ENFILE from socketpair; EAGAIN when the engine cannot
 * take it). Thread-safe. */
int iosr_engine_connect_fd(iosr_engine *e);

#endif
