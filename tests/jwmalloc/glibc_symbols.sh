#!/usr/bin/env bash
# Every malloc-family function libc.so.6 exports (malloc, free, ...,
# mallopt, malloc_info, cfree, the __libc_* names; public versions, not
# GLIBC_PRIVATE) must be defined by libjwmalloc.so: a program or library
# calling one that jwmalloc lacks reaches glibc's allocator, which then sees
# jwmalloc's blocks (or jwmalloc sees glibc's). Read from this machine's libc,
# so a newer glibc's additions (free_sized, ...) fail the test until served.
# Usage: glibc_symbols.sh LIBJWMALLOC_SO
set -euo pipefail
LIB=${1:?usage: glibc_symbols.sh LIBJWMALLOC_SO}
LIBC=$(ldd "$LIB" | awk '$1 ~ /^libc\.so/ { print $3 }')
[ -r "$LIBC" ] || { echo "glibc_symbols: libc.so not found for $LIB (not glibc?)"; exit 77; }
family='^(__libc_)?(malloc|free|cfree|calloc|realloc|reallocarray|memalign|posix_memalign|aligned_alloc|valloc|pvalloc|mallopt|mallinfo2?|malloc_(info|stats|trim|usable_size|get_state|set_state)|free_sized|free_aligned_sized)$'
# Functions (T, W, i) with a public version: name@VER or name@@VER.
want=$(nm -D --defined-only "$LIBC" | awk '$2 ~ /^[TWi]$/ && $3 !~ /GLIBC_PRIVATE/ { sub(/@.*/, "", $3); print $3 }' |
  grep -E "$family" | sort -u)
have=$(nm -D --defined-only "$LIB" | awk '$2 ~ /^[TWi]$/ { print $3 }' | sort -u)
missing=$(comm -23 <(echo "$want") <(echo "$have"))
[ -n "$want" ] || { echo "glibc_symbols: no malloc-family names read from $LIBC"; exit 1; }
if [ -n "$missing" ]; then
  echo "glibc_symbols: $LIBC exports these malloc-family functions, libjwmalloc.so does not:" $missing
  exit 1
fi
echo "glibc_symbols: all $(echo "$want" | wc -l) malloc-family functions of $LIBC are jwmalloc's:" $want
