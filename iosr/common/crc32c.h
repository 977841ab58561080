/* CRC32C (Castagnoli, the polynomial of iSCSI, ext4 and btrfs metadata) of
 * swap slots (design note section 4, "Slot checksums"): every slot written
 * gets one, every slot read is checked against it before a page is mapped.
 *
 * The x86-64 SSE4.2 `crc32` instruction where the CPU has it (three streams
 * interleaved over a page), else a portable slice-by-8 table version; both
 * give the same values. Our own code, not a library's: it sits on the swap
 * path (the project's rule), and it is small.
 *
 * Thread-safe: the tables are built once (pthread_once), everything else is
 * pure.
 */
#ifndef IOSR_COMMON_CRC32C_H
#define IOSR_COMMON_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* CRC32C of len bytes at buf, continuing from crc (0 to start): the standard
 * value, so iosr_crc32c(0, "123456789", 9) == 0xe3069283. Any alignment. */
uint32_t iosr_crc32c(uint32_t crc, const void *buf, size_t len);

/* CRC32C of one 4096-byte page (from 0); the same value as
 * iosr_crc32c(0, page, 4096), faster. page: 8-byte aligned. */
uint32_t iosr_crc32c_page(const void *page);

/* The implementation in use: "sse4.2" or "portable". */
const char *iosr_crc32c_impl(void);

/* Tests and measurements: 1 forces the portable version, 0 restores the
 * choice by CPU. Not thread-safe with concurrent checksums. */
void iosr_crc32c_force_portable(int on);

#endif
