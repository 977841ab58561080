#!/usr/bin/env bash
# The main job: real programs on jwmalloc, then IOSR swapping apps. Each part is
# added by its own script as it lands.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
ran=0
# jwmalloc first, then IOSR, as the README describes; any other part after them.
for part in scripts/demo-jwmalloc.sh scripts/demo-iosr.sh $(ls scripts/demo-*.sh | grep -v -e demo-jwmalloc -e demo-iosr); do
  [ -x "$part" ] || continue
  "$part" "$BUILD"
  ran=1
done
[ $ran -eq 1 ] || echo "demo: no part is built yet (see the README's status table)"
