#!/usr/bin/env bash
# Backend microbenchmark (issue 3): the reformatting and peak-trough patterns
# straight against the page source, then backend instructions per operation
# on the reformatting pattern, counted by callgrind inside jw_pages_alloc and
# jw_pages_free only (the driver's own work is not counted); and the
# differential test at 3,000,000 operations.
# Usage: tests/backend/bench_backend.sh [BUILD_DIR]   (make bench-backend)
set -euo pipefail
build=${1:-build}
bin=$build/bin/backend_bench
[ -x "$bin" ] || { echo "bench-backend: $bin not built (run make build)" >&2; exit 1; }
out=$build/bench-backend
mkdir -p "$out"

echo "== backend_bench (wall-clock figures are noisy on a shared machine; counts are not)"
"$bin" all | tee "$out/bench.txt"

# The differential test at its long length (make test's backend.differential
# runs a third of it): the metadata and split/merge figures of backend.md.
ops=3000000
echo "== test_backend_differential, $ops operations, checks on, reclamation off"
JWMALLOC_CHECK=1 JWMALLOC_RECLAIM=0 "$build/bin/test_backend_differential" "$ops" | tee -a "$out/bench.txt"

if command -v valgrind >/dev/null; then
  ops=300000
  echo "== callgrind: reformatting, $ops operations, instructions inside jw_pages_alloc/jw_pages_free"
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.out" \
    --toggle-collect=jw_pages_alloc --toggle-collect=jw_pages_free \
    "$bin" reformatting --ops "$ops" >"$out/callgrind-run.txt" 2>"$out/callgrind-log.txt"
  collected=$(sed -n 's/.*Collected : \([0-9]*\).*/\1/p' "$out/callgrind-log.txt")
  calls=$(sed -n 's/.*calls_total=\([0-9]*\).*/\1/p' "$out/callgrind-run.txt")
  awk -v c="$collected" -v n="$calls" 'BEGIN { printf "backend instructions per call: %.0f (%d instructions, %d calls)\n", c / n, c, n }' \
    | tee -a "$out/bench.txt"
else
  echo "bench-backend: valgrind not installed; instruction counts skipped (scripts/install-deps.sh installs it)"
fi
echo "bench-backend: figures in $out/bench.txt"
