#!/usr/bin/env bash
# Reclamation benchmark (issue 7), standalone on the backend: the
# generational workload in virtual time (reclaim_bench), lifetime against
# fixed-delay from the same seeds, then the interval's effect. Counts are
# deterministic for a seed; RSS and page faults are the kernel's.
# Usage: tests/reclaim/bench_reclaim.sh [BUILD_DIR] [SECONDS]   (make bench-reclaim)
set -euo pipefail
build=${1:-build}
seconds=${2:-60}
bin=$build/bin/reclaim_bench
[ -x "$bin" ] || { echo "bench-reclaim: $bin not built (run make build)" >&2; exit 1; }
out=$build/bench-reclaim
mkdir -p "$out"
: >"$out/bench.txt"
for seed in 1 2 3; do
  echo "== generational workload, $seconds virtual seconds, seed $seed, interval 500 ms" | tee -a "$out/bench.txt"
  "$bin" --seconds "$seconds" --seed "$seed" | tee -a "$out/bench.txt"
done
for ms in 250 1000; do
  echo "== generational workload, $seconds virtual seconds, seed 1, interval $ms ms" | tee -a "$out/bench.txt"
  "$bin" --seconds "$seconds" --seed 1 --interval-ms "$ms" | tee -a "$out/bench.txt"
done
echo "bench-reclaim: figures in $out/bench.txt"
