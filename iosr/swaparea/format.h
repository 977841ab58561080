/* Swap area format (design note section 4): a 4 KiB header, then 4 KiB
 * slots; slot i is at byte 4096 * (i + 1). The header carries a magic,
 * version, page size, slot count, UUID, label, a clean flag (0 while a daemon
 * runs on it) and a checksum.
 *
 * Brief: "How this project realizes IOSR" (swap area on a file or block
 * device, 4 KiB slots). Not thread-safe; used at start-up and by the tools.
 */
#ifndef IOSR_SWAPAREA_FORMAT_H
#define IOSR_SWAPAREA_FORMAT_H

#include <stdint.h>
#include <sys/types.h>

#define IOSR_SWAP_MAGIC "IOSRSWP1"
#define IOSR_SWAP_VERSION 1u
#define IOSR_SWAP_MIN_SLOTS 256u

typedef struct iosr_swap_header {
  char magic[8];
  uint32_t version;
  uint32_t page_size;
  uint64_t slots;
  uint8_t uuid[16];
  uint64_t created_ns; /* CLOCK_REALTIME at mkswap */
  uint32_t clean;      /* 1 after an orderly daemon exit or mkswap */
  uint32_t pad;
  char label[64];
  uint32_t checksum;   /* FNV-1a of the bytes above */
} iosr_swap_header;

/* Offset in bytes of slot i. */
static inline uint64_t iosr_slot_offset(uint64_t slot) { return (slot + 1) * 4096ull; }

/* Formats path as a swap area of `bytes` (regular file: created or resized
 * and allocated with fallocate; block device: its whole size when bytes is
 * 0 or larger). Refuses, with errno=ENOTEMPTY and a message in err, a path
 * that holds data (non-empty file; device whose first 64 KiB are not zero)
 * unless force; refuses with EBUSY an area locked by a running iosrd.
 * EINVAL when bytes is below the minimum (1 MiB + header). 0 or -1. */
int iosr_mkswap(const char *path, uint64_t bytes, const char *label, int force, char *err,
                size_t cap);

/* An open swap area. */
typedef struct iosr_swap_area {
  int fd;              /* O_RDWR (|O_DIRECT when direct), locked with flock */
  int direct;          /* O_DIRECT in effect */
  int was_clean;       /* the header said clean when opened */
  iosr_swap_header hdr;
  char path[256];
} iosr_swap_area;

/* Opens and validates an area, takes its exclusive lock and marks it
 * dirty. want_direct: try O_DIRECT (falls back to buffered with a warning
 * where the filesystem refuses it). Errors (-1, errno, message in err):
 * ENOENT/EACCES, EINVAL (not a swap area, bad checksum, wrong page size,
 * size smaller than the header says), EBUSY (locked by another daemon). */
int iosr_swap_open(iosr_swap_area *a, const char *path, int want_direct, char *err, size_t cap);

/* Marks the area clean (orderly exit) and closes it. */
void iosr_swap_close(iosr_swap_area *a, int clean);

/* Reads and validates the header of path without locking (for `iosr info`). */
int iosr_swap_read_header(const char *path, iosr_swap_header *out, char *err, size_t cap);

uint32_t iosr_swap_checksum(const iosr_swap_header *h);

#endif
