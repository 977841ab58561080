/* The daemon's socket: where it is, and a connection to it. iosrd listens
 * there; libiosr's apps and control connections and the iosr tool connect
 * (design note section 1). A SOCK_SEQPACKET UNIX socket: one message per
 * packet, descriptors by SCM_RIGHTS (common/proto.h).
 */
#ifndef IOSR_COMMON_SOCK_H
#define IOSR_COMMON_SOCK_H

#include <stddef.h>

/* The socket path: IOSR_SOCKET when set, else the default for this uid
 * (README): /run/iosrd.sock for root, /tmp/iosrd-UID.sock otherwise. Returns
 * the variable's value or buf (cap bytes; 108 hold any UNIX socket path).
 * Thread-safe (the environment is only read). */
const char *iosr_default_socket(char *buf, size_t cap);

/* Connects a blocking, close-on-exec SOCK_SEQPACKET socket to path. The
 * descriptor, or -1 with errno: ENAMETOOLONG (path longer than a UNIX
 * socket address holds), ENOENT/ECONNREFUSED (nobody listens), as
 * socket(2) and connect(2). Thread-safe. */
int iosr_sock_connect(const char *path);

#endif
