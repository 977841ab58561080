#!/usr/bin/env bash
# make demo, stack part (docs/design/stack.md): python3, unmodified, under
# `jwmalloc run --swap`: sent to the background, swapped out by IOSR after
# jwmalloc dropped its free memory, brought back; its response time, bytes
# read and written, beside the same program on jwmalloc without allocator
# awareness and on glibc under Linux swap (a memory cgroup's limit). The
# Linux run needs root, swapon and memory cgroup v1; it is skipped otherwise.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo
echo "=== One memory stack: python3 under jwmalloc run --swap (bench/stack/run.py --demo) ==="
st=0
python3 bench/stack/run.py --demo --build "$BUILD" || st=$?
[ $st -eq 0 ] || { echo "demo-stack: failed ($st)"; exit 1; }
