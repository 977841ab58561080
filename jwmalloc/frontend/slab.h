/* One-page slabs of the frontend: header layout, the remote-free protocol,
 * abandonment.
 *
 * Brief: "Frontend: uniform, pooled slabs"; design and the state table:
 * docs/design/frontend.md. A slab is one 4 KiB granule of kind SMALL_SLAB;
 * this 64-byte header sits at its start, blocks of one class follow.
 *
 * Ownership: every slab belongs to one thread cache (its owner) or is
 * abandoned. Fields marked "owner" are plain and touched only by the owning
 * thread; the rest are atomics any thread may touch.
 */
#ifndef JW_FRONTEND_SLAB_H
#define JW_FRONTEND_SLAB_H

#include <stdbool.h>
#include <stdint.h>

#include "../common/asan.h"
#include "../pages/root_queue.h"
#include "../common/atomic.h"
#include "page_tag.h"
#include "size_class.h"

struct jw_tcache;

/* States in the low bits of jw_slab.remote (blocks are 16-aligned). */
enum {
  JW_RS_ACTIVE = 0,    /* current or partial slab of a live owner */
  JW_RS_FULL = 1,      /* parked on the owner's full list */
  JW_RS_NOTIFIED = 2,  /* on, or being pushed on, the owner's ready stack */
  JW_RS_ABANDONED = 3, /* owner exited; the remote list holds every free block (adoptable) */
  JW_RS_POOLED = 4,    /* an empty page in a pool */
};
/* The remote word is 64 bits on every target (a 32-bit one has no spare
 * pointer bits for the count): jw_remote_word, uintptr_t on LP64. */
typedef uint64_t jw_remote_word;
#define JW_RS_MASK ((jw_remote_word)15)
/* The remote word also counts the blocks on its list, in its top 16 bits
 * (user-space addresses of our mappings are below 2^47 on x86-64 and 2^48
 * on arm64 without a hint asking for more: checked in jw_slab_init), so the
 * owner's collect knows the length without walking blocks that another core
 * just wrote (a cache miss each). */
#define JW_RS_COUNT_SHIFT 48
#define JW_RS_PTR_MASK ((((jw_remote_word)1 << JW_RS_COUNT_SHIFT) - 1) & ~JW_RS_MASK)

/* Where the owner keeps the slab (owner-only bookkeeping). */
enum { JW_WHERE_CURRENT, JW_WHERE_PARTIAL, JW_WHERE_FULL, JW_WHERE_POOL };

/* A 32-bit slab header has the same fields in fewer bytes: aligning the
 * first to the header size pads it to one cache line, as on 64-bit. */
#if UINTPTR_MAX > 0xffffffffu
#define JW_SLAB_HEADER_ALIGN
#else
#define JW_SLAB_HEADER_ALIGN _Alignas(JW_SLAB_HEADER)
#endif

typedef struct jw_slab {
  /* The owner's key while the slab is current or partial, key|1 while it is
   * parked full, 0 otherwise. Read by every thread's free fast path. */
  JW_SLAB_HEADER_ALIGN jw_atomic_u64 tag;
  jw_block *local;            /* owner: free blocks freed by the owner */
  jw_atomic_u64 remote;       /* count << 48 | list of blocks freed by other threads | state */
  jw_atomic_ptr owner;        /* struct jw_tcache *, set while owned */
  union {
    struct {
      struct jw_slab *next, *prev; /* owner: links in its full list or pool */
      struct jw_slab *ready_next;  /* link in the owner's ready stack (written by the notifier) */
    };
    /* owner: node in its class's partial queue (frontend.md, "Placement").
     * Only a FULL slab is ever notified, so ready_next is free (the queue's
     * `group` link) while the slab is partial. */
    jw_rq_node qnode;
  };
  uint32_t live;     /* owner: blocks not on `local` (handed out, in the bin, remote) */
  uint16_t capacity; /* blocks in the slab; set when formatted, read by any freer */
  uint8_t cls;
  uint8_t where; /* owner: JW_WHERE_* */
} jw_slab;

_Static_assert(sizeof(jw_slab) == JW_SLAB_HEADER, "slab header is one cache line");

static inline jw_slab *jw_slab_of(const void *p) { return (jw_slab *)((uintptr_t)p & ~(uintptr_t)(JW_SLAB_SIZE - 1)); }

static inline char *jw_slab_blocks(jw_slab *s) { return (char *)s + JW_SLAB_HEADER; }

/* Sets the tag of slab s (class set): in its header and, when its GiB has
 * one, in the tag table (page_tag.h), which free's fast path reads. Owner
 * only (or the thread taking the page over); relaxed: only the owner acts
 * on its own key. */
static inline void jw_slab_set_tag(jw_slab *s, uint64_t tag) {
  jw_store(&s->tag, tag, JW_RELAXED);
  jw_atomic_u64 *w = jw_tag_slot((uintptr_t)s);
  if (w == NULL) return;
  /* One word per 4 KiB of the slab (a page of 16 or 64 KiB has 4 or 16, in
   * one GiB's table): the free fast path indexes by 4 KiB at every page size
   * (docs/design/architecture.md, "Page size at run time"). */
  uint64_t word = jw_tag_word(tag, s->cls);
  for (size_t i = 0, n = jw_page.size >> 12; i < n; i++) jw_store(&w[i], word, JW_RELAXED);
}

/* Formats page `s` as an empty slab of class `cls` owned by `owner` with tag
 * `tag`: every block on the local list, live = 0. */
void jw_slab_init(jw_slab *s, unsigned cls, struct jw_tcache *owner, uint64_t tag);

/* Formats pooled page s, which was an emptied slab of class `cls` whose
 * every block is on its local list (free, FREE_KEY), as an empty slab of the
 * same class for `owner`: the header only, the block list kept. */
void jw_slab_reuse(jw_slab *s, struct jw_tcache *owner, uint64_t tag);

/* Whether pooled page s still holds a whole free list of its class (see
 * jw_slab_reuse): an emptied slab of the thread's own, or an abandoned
 * slab's page taken by its last freer (its list is every block). */
static inline bool jw_slab_list_whole(const jw_slab *s, unsigned cls) {
  return s->cls == cls && s->capacity != 0 && s->live == 0 && s->local != NULL;
}

/* True when p is the start of a block of slab s (not the header, on a block
 * boundary, below capacity). Reads only owner-stable fields (the class). No
 * division: the class's reciprocal gives the block index, and a block i is
 * below capacity exactly when it ends inside the usable bytes. */
static inline bool jw_slab_is_block(const jw_slab *s, const void *p) {
  uintptr_t off = (uintptr_t)p - ((uintptr_t)s + JW_SLAB_HEADER); /* huge when p is in the header */
  unsigned c = s->cls;
  if (off >= JW_SLAB_USABLE || c >= JW_NCLASSES) return false;
  unsigned size = jw_class_size[c];
  uint32_t i = (uint32_t)(((uint64_t)off * jw_class_recip[c]) >> 32);
  return i * size == off && off + size <= JW_SLAB_USABLE;
}

/* Owner: appends `list` (free blocks of s, NULL-terminated) to the local
 * list and lowers live by its length, which it returns. */
unsigned jw_slab_give_back(jw_slab *s, jw_block *list);

/* The same for a list whose length n is known: no walk when the local list
 * is empty (the usual case when a remote list is collected). */
unsigned jw_slab_give_back_n(jw_slab *s, jw_block *list, unsigned n);

/* Owner: takes the remote list (keeping the state), appends it to the local
 * list and lowers live by its length. Returns the number of blocks taken. */
unsigned jw_slab_collect_list(jw_slab *s);
static inline unsigned jw_slab_collect(jw_slab *s) {
  /* Relaxed peek: an empty list needs no synchronization. */
  if ((jw_load(&s->remote, JW_RELAXED) & ~JW_RS_MASK) == 0) return 0;
  return jw_slab_collect_list(s);
}

/* Owner: moves a current slab with nothing free to the FULL state. Returns
 * false (state unchanged) when a remote free arrived meanwhile. */
static inline bool jw_slab_park(jw_slab *s, uint64_t key) {
  jw_slab_set_tag(s, key | 1);
  jw_remote_word expected = JW_RS_ACTIVE; /* empty list */
  /* Release: a notifier that sees FULL (acquire) reads the owner field. */
  if (jw_cas(&s->remote, &expected, (jw_remote_word)JW_RS_FULL, JW_RELEASE, JW_RELAXED)) return true;
  jw_slab_set_tag(s, key);
  return false;
}

/* Owner: a slab taken off the ready stack goes back to ACTIVE (list kept). */
void jw_slab_unnotify(jw_slab *s);

/* Outcome of a free by a thread that does not own the slab. */
typedef enum {
  JW_REMOTE_PUSHED,    /* on the slab's remote list (owner will collect) */
  JW_REMOTE_NOTIFY,    /* pushed, and the caller must push the slab on the owner's ready stack */
  JW_REMOTE_LAST,      /* abandoned slab: its last live blocks; the caller owns the page (POOLED) */
  JW_REMOTE_ABANDONED, /* abandoned slab: on the list of its free blocks */
  JW_REMOTE_INVALID,   /* the slab is a pooled page: not a live block */
} jw_remote_result;

/* The block list in a remote word (its low bits hold the state, its top
 * bits the list's length). */
static inline jw_block *jw_slab_list_of(jw_remote_word w) { return (jw_block *)(uintptr_t)(w & JW_RS_PTR_MASK); }
static inline unsigned jw_slab_count_of(jw_remote_word w) { return (unsigned)(w >> JW_RS_COUNT_SHIFT); }

/* Pushes the chain head..tail (n blocks of slab s, already validated and
 * marked free, linked head -> ... -> tail through their first words; the
 * tail's link is overwritten) from a thread that is not s's owner: one CAS
 * that adds n to the list's count (frontend.md, "Batched remote frees").
 * Every outcome is the single block's, once per chain: NOTIFY when the CAS
 * took FULL -> NOTIFIED; on an abandoned slab the chain joins the list of
 * its free blocks, and LAST says the list now holds every block: the CAS
 * made the slab POOLED and the caller owns the page (frontend.md, "Thread
 * exit, abandoned slabs and adoption"); INVALID for a pooled page (every
 * block of the chain was already free). Lock-free. Inline: with n = 1 it is
 * the whole of an unbatched remote free once the pointer is validated. */
static inline jw_remote_result jw_slab_remote_push(jw_slab *s, jw_block *head, jw_block *tail, unsigned n) {
  /* Acquire: an ABANDONED state comes with the abandoning owner's writes
   * (the free list in the word), released by its CAS. */
  jw_remote_word old = jw_load(&s->remote, JW_ACQUIRE);
  for (;;) {
    jw_remote_word st = old & JW_RS_MASK;
    if (st == JW_RS_POOLED) return JW_REMOTE_INVALID;
    jw_block_set_next(tail, jw_slab_list_of(old));
    /* At most a slab's blocks in all (a chain's blocks are live for the
     * owner, so they are not on the list yet): never overflows. */
    jw_remote_word count = (old >> JW_RS_COUNT_SHIFT) + n;
    jw_remote_word next_state = st == JW_RS_FULL ? JW_RS_NOTIFIED : st;
    /* An abandoned slab whose every block is now free: the page is the
     * pusher's (capacity is fixed while the slab has live blocks). */
    bool last = st == JW_RS_ABANDONED && count == s->capacity;
    if (last) next_state = JW_RS_POOLED;
    /* Release publishes the chain's links and keys to the collecting owner
     * (or adopter); acquire (success: FULL -> read the owner field, LAST ->
     * every other freer's links; failure: see above). */
    if (jw_cas_weak(&s->remote, &old, count << JW_RS_COUNT_SHIFT | (jw_remote_word)(uintptr_t)head | next_state, JW_ACQ_REL,
                    JW_ACQUIRE)) {
      if (st == JW_RS_ABANDONED) return last ? JW_REMOTE_LAST : JW_REMOTE_ABANDONED;
      return st == JW_RS_FULL ? JW_REMOTE_NOTIFY : JW_REMOTE_PUSHED;
    }
  }
}

/* Adoption (frontend.md, "Thread exit, abandoned slabs and adoption"): a
 * live thread that is freeing a block of abandoned slab s (so s has a live
 * block and cannot empty meanwhile) takes s over with one CAS, ABANDONED ->
 * ACTIVE with an empty remote list; the list it took becomes s's local list
 * and live counts the rest. Returns false, having changed nothing, when s is
 * not abandoned (another thread adopted it first). The caller then makes s
 * its own (owner, tag, a queue). Lock-free. */
static inline bool jw_slab_adopt(jw_slab *s) {
  jw_remote_word old = jw_load(&s->remote, JW_RELAXED);
  do {
    if ((old & JW_RS_MASK) != JW_RS_ABANDONED) return false;
    /* Acquire: the free list's links, written by the abandoning owner and
     * the freers since, each published by a release CAS on this word. */
  } while (!jw_cas_weak(&s->remote, &old, (jw_remote_word)JW_RS_ACTIVE, JW_ACQUIRE, JW_RELAXED));
  s->local = jw_slab_list_of(old);
  s->live = s->capacity - jw_slab_count_of(old);
  return true;
}

/* One block: the chain b..b. */
static inline jw_remote_result jw_slab_remote_free(jw_slab *s, jw_block *b) { return jw_slab_remote_push(s, b, b, 1); }

typedef enum {
  JW_ABANDON_DONE,  /* state ABANDONED: every free block on the remote list, later frees join it */
  JW_ABANDON_EMPTY, /* every block was free: the slab is still the caller's */
  JW_ABANDON_BUSY,  /* NOTIFIED: drain the ready stack and call again */
} jw_abandon_result;

/* Owner (at thread exit, bins flushed): abandons slab s, whose `live` counts
 * the blocks handed out or on the remote list: the remote list is collected,
 * then the whole local list moves into the remote word with the state
 * ABANDONED, so that the word alone says which blocks are free (adoption and
 * the last free read it). Lock-free; the caller retries on BUSY
 * (concurrency.md: thread exit waits for an in-flight notifier). */
jw_abandon_result jw_slab_abandon(jw_slab *s);

#endif
