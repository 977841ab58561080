/* Wire protocol between libiosr, the `iosr` command and the engine (design
 * note section 15): SOCK_SEQPACKET, one message per packet, a fixed header
 * and a fixed payload per type; descriptors travel with SCM_RIGHTS only on
 * the types that carry them.
 *
 * Thread-safety: the send/receive helpers are reentrant; callers serialize
 * use of one socket.
 */
#ifndef IOSR_COMMON_PROTO_H
#define IOSR_COMMON_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "iosr.h"

#define IOSR_PROTO_MAGIC 0x52534f49u /* "IOSR" */
#define IOSR_PROTO_VERSION 3u
#define IOSR_MSG_MAX (64u * 1024u)   /* largest packet, header included */
#define IOSR_CHUNK_MAX (IOSR_MSG_MAX - 256u)
#define IOSR_MAX_FDS 8

typedef struct iosr_msg_hdr {
  uint32_t magic;
  uint16_t type;
  uint16_t flags; /* IOSR_MSG_MORE on all but the last chunk of a reply */
  uint32_t len;   /* payload bytes after the header */
  uint32_t seq;   /* request sequence number, echoed in the reply */
} iosr_msg_hdr;

#define IOSR_MSG_MORE 1u

enum iosr_msg_type {
  /* client -> engine */
  IOSR_M_HELLO = 1,      /* iosr_m_hello; RESUME carries [uffd, page-table memfd] */
  IOSR_M_ATTACH = 2,     /* iosr_m_attach + [uffd]; reply carries [page-table memfd] */
  IOSR_M_REGION_ADD = 3, /* iosr_m_range */
  IOSR_M_REGION_DEL = 4, /* iosr_m_range */
  IOSR_M_DROPPED = 5,    /* iosr_m_dropped */
  IOSR_M_GOODBYE = 6,    /* empty */
  IOSR_M_TRIMMED = 7,    /* iosr_m_trim: the app gave back its free memory (answers IOSR_M_TRIM) */
  IOSR_M_DROP_MOVED = 8, /* iosr_m_drop_moved: what the dropper moved of a drop with a graveyard (answers IOSR_M_DROP_GO) */
  IOSR_M_CTL_FG = 10,    /* iosr_m_app ("" = none, or self on an app connection) */
  IOSR_M_CTL_RECLAIM = 11, /* iosr_m_reclaim */
  IOSR_M_CTL_SET = 12,     /* iosr_m_set */
  IOSR_M_CTL_STAT_JSON = 13, /* empty; reply: IOSR_M_CHUNK... */
  IOSR_M_CTL_APP_STATS = 14, /* iosr_m_app; reply: iosr_m_app_stats */
  IOSR_M_CTL_SLOTS = 15,     /* iosr_m_app; reply: IOSR_M_CHUNK of iosr_slot_entry */
  IOSR_M_CTL_IDLE = 16,      /* empty; reply when idle */
  IOSR_M_CTL_TEST = 17,      /* iosr_m_test */
  IOSR_M_CTL_DISPATCH_LOG = 18, /* empty; reply: IOSR_M_CHUNK of iosr_dispatch_rec */
  /* engine -> client */
  IOSR_M_REPLY = 32,     /* iosr_m_reply */
  IOSR_M_CHUNK = 33,     /* raw bytes, flags MORE */
  IOSR_M_DROP = 34,      /* iosr_m_drop */
  IOSR_M_FG_NOTIFY = 35, /* iosr_m_fg */
  IOSR_M_CHILD_UFFD = 36, /* iosr_m_child + [uffd of a forked child] */
  IOSR_M_APP_STATS = 37,  /* iosr_m_app_stats */
  IOSR_M_TRIM = 38,       /* iosr_m_trim: a swap-out of the app is about to start */
  IOSR_M_DROP_GO = 39,    /* iosr_m_drop_go: which pages of a drop to move, after its drop mark */
  IOSR_M_TYPE_MAX = 40
};

enum { IOSR_ROLE_APP = 1, IOSR_ROLE_CONTROL = 2, IOSR_ROLE_RESUME = 3 };

typedef struct iosr_m_hello {
  uint32_t version;
  uint32_t role;
  char name[IOSR_NAME_MAX];
  uint64_t token;        /* RESUME: the token the first daemon gave */
  uint64_t drop_id;      /* RESUME: a drop the dropper was running (0: none) */
  uint64_t drop_start, drop_len;
  uint64_t drop_started; /* RESUME: the last drop id the dropper began (ids rise) */
  uint64_t features;     /* RESUME: the userfaultfd features granted */
  uint64_t beacon;       /* RESUME: the dropper's beacon area (common/beacon.h; 0: none) */
  uint64_t drop_grave;   /* RESUME: the running drop moves its pages there (0: it discards them) */
} iosr_m_hello;

typedef struct iosr_m_attach {
  uint64_t features; /* userfaultfd features granted to the client's descriptor */
  uint32_t user_mode_only;
  uint32_t flags;    /* IOSR_ATTACH_* */
  uint64_t beacon;   /* the dropper's beacon area (common/beacon.h), registered with it; 0: none */
} iosr_m_attach;

/* The app answers IOSR_M_TRIM (it has an on_trim callback). A RESUME hello
 * carries it as IOSR_HELLO_TRIMS in `features`, a bit no userfaultfd feature
 * uses. */
#define IOSR_ATTACH_TRIMS 1u
#define IOSR_HELLO_TRIMS (1ull << 63)
/* The client mapped a graveyard after its beacon area (common/beacon.h);
 * a RESUME hello carries it as IOSR_HELLO_GRAVEYARD in `features`. */
#define IOSR_ATTACH_GRAVEYARD 2u
#define IOSR_HELLO_GRAVEYARD (1ull << 62)

typedef struct iosr_m_trim {
  uint64_t id; /* the daemon's request; echoed in the answer */
} iosr_m_trim;

typedef struct iosr_m_range {
  uint64_t start, len;
} iosr_m_range;

typedef struct iosr_m_drop {
  uint64_t id, start, len;
  uint64_t grave; /* nonzero: the dropper moves the run's pages there (UFFDIO_MOVE) instead of discarding them,
                     once IOSR_M_DROP_GO names which (design note section 3, "Moved by the dropper") */
} iosr_m_drop;

#define IOSR_DROP_BITS_WORDS 16u /* a drop's pages as a bitmap (at most 1024: IOSR_BEACON_RUNS) */

/* Bit k (k < 64 * IOSR_DROP_BITS_WORDS) of a drop's page bitmap. */
static inline int iosr_drop_bit(const uint64_t *bits, uint64_t k) { return (int)((bits[k / 64] >> (k % 64)) & 1); }

typedef struct iosr_m_drop_go {
  uint64_t id;     /* the drop's id; an unknown drop's: the low 16 bits its mark carried, npages 0 */
  uint32_t npages; /* pages of the drop (bits past it are 0) */
  uint32_t pad;
  uint64_t bits[IOSR_DROP_BITS_WORDS]; /* page k of the run is the drop's still, at its address: move it */
} iosr_m_drop_go;

typedef struct iosr_m_drop_moved {
  uint64_t id;
  int32_t err;     /* 0, or the first errno of UFFDIO_MOVE (EAGAIN: an event came first; the rest not tried) */
  uint32_t npages;
  uint64_t bits[IOSR_DROP_BITS_WORDS]; /* page k was moved */
} iosr_m_drop_moved;

typedef struct iosr_m_dropped {
  uint64_t id;
  int32_t err; /* 0, or the errno of madvise */
  uint32_t pad;
} iosr_m_dropped;

typedef struct iosr_m_app {
  char app[64];
} iosr_m_app;

typedef struct iosr_m_reclaim {
  char app[64];
  uint64_t bytes;
} iosr_m_reclaim;

typedef struct iosr_m_set {
  char key[32];
  char value[96];
} iosr_m_set;

typedef struct iosr_m_test {
  uint32_t op, pad;
  uint64_t arg;
} iosr_m_test;

typedef struct iosr_m_fg {
  int32_t foreground;
  uint32_t pad;
} iosr_m_fg;

typedef struct iosr_m_child {
  uint64_t child_id;
} iosr_m_child;

typedef struct iosr_m_reply {
  int32_t err; /* 0 or a positive errno */
  uint32_t client_id;
  uint64_t value; /* HELLO: token; RECLAIM: bytes */
  int32_t daemon_pid;
  uint32_t pad;
  char msg[160];
} iosr_m_reply;

typedef struct iosr_m_app_stats {
  int32_t err;
  uint32_t pad;
  iosr_app_stats st;
} iosr_m_app_stats;

/* Sends one message. Blocking unless fd is non-blocking (then -1/EAGAIN when
 * the socket is full). Returns 0 or -1 with errno. */
int iosr_msg_send(int fd, uint16_t type, uint16_t flags, uint32_t seq, const void *payload,
                  uint32_t len, const int *fds, int nfds);

/* Receives one message into buf (cap >= IOSR_MSG_MAX recommended). Received
 * descriptors go to fds (up to IOSR_MAX_FDS; *nfds set; all are O_CLOEXEC).
 * Returns the total length (header included), 0 on orderly close, or -1 with
 * errno (EAGAIN when non-blocking and nothing is there; EBADMSG when the
 * packet was truncated or its header is invalid — any descriptors that came
 * with a bad packet are closed). */
long iosr_msg_recv(int fd, void *buf, size_t cap, int *fds, int *nfds);

/* Expected payload length of a fixed-size type received by the engine
 * (client -> engine types), or -1 for unknown types. */
long iosr_msg_expected_len(uint16_t type);

/* Copies a bounded, NUL-terminated string field: returns 0, or -1 when the
 * field is not terminated within its size (malformed). */
int iosr_field_str(const char *field, size_t size);

#endif
