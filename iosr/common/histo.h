/* Histograms for the statistics (design note, section 14).
 *
 * Request sizes: IOSR_SIZE_BUCKETS power-of-two buckets, bucket i counts
 * requests of (4 KiB << i) bytes up to the next power of two; the last bucket
 * takes everything from 4 MiB up.
 * Latencies: IOSR_LAT_BUCKETS log-linear buckets (4 per power of two) from
 * 1024 ns to about 68 s; bucket 0 takes everything below 1024 ns.
 * Not thread-safe: each histogram belongs to one thread.
 */
#ifndef IOSR_COMMON_HISTO_H
#define IOSR_COMMON_HISTO_H

#include <stdint.h>

#include "iosr.h"

unsigned iosr_size_bucket(uint64_t bytes);
uint64_t iosr_size_bucket_floor(unsigned b); /* smallest size counted in bucket b */

unsigned iosr_lat_bucket(uint64_t ns);
uint64_t iosr_lat_bucket_ceil(unsigned b);   /* largest latency counted in bucket b */

/* Latency at quantile q (0 < q <= 1) of hist (IOSR_LAT_BUCKETS counts): the
 * upper bound of the bucket that holds it; 0 when the histogram is empty. */
uint64_t iosr_lat_quantile(const uint64_t *hist, double q);

#endif
