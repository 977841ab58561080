/* The jw_-prefixed API (include/jwmalloc.h): the allocator under its own
 * names, usable beside the system allocator (libjwmalloc_api.a). */
#include <errno.h>
#include <stdint.h>

#include "../../include/jwmalloc.h"
#include "fastpath.h"

#define JW_NAME(x) jw_##x
#include "entry.inc"
