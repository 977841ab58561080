#!/usr/bin/env bash
# The throughput and latency workloads at 1, 4, 8, 16 and 160 threads, every
# allocator, on a 16-core machine (issues 4 and 8: "where the device machine is
# lent"). Needs only a built tree (build/bin, build/lib) and the peers, at their
# Debian paths or copied into .device/peers by bench/device-prep.sh. Stops
# starting runs after JWBENCH_BUDGET seconds (default 420) so it ends within
# about 8 minutes; the runs it could not start are listed as skipped.
#   bench/device-run.sh DEST [run.py options]
# DEST receives report.md and results.tar.gz (the whole results directory).
# Without gnuplot there the report has no plots: unpack the tarball here and run
#   bench/suite/report.py DIR --publish bench/results/2026-11-30-device-16core
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench/device-run.sh DEST [run.py options]" >&2; exit 2; }
DEST=$1; shift
cd "$(dirname "$0")/.."
[ -x build/bin/jwbench-run ] || { echo "device-run: build/bin is missing: carry a built tree" >&2; exit 1; }
WORK=${JWBENCH_WORK:-/tmp/jwbench-device}
rm -rf "$WORK"
mkdir -p "$DEST"
peers=()
[ -d .device/peers ] && peers=(--peers-dir "$PWD/.device/peers")
python3 bench/suite/run.py --out "$WORK" --build build "${peers[@]}" \
  --label "device ($(nproc) cores): throughput and latency" \
  --workloads rptest-16k,rptest-1m,xmalloc,mstress,mleak,larson,near4k \
  --threads "${JWBENCH_THREADS:-1,4,8,16,160}" --duration "${JWBENCH_DURATION:-1.5}" --repeat 1 \
  --callgrind none --footprint-extra "" --max-seconds "${JWBENCH_BUDGET:-420}" "$@"
cp "$WORK/report.md" "$DEST/report.md"
tar czf "$DEST/results.tar.gz" -C "$(dirname "$WORK")" "$(basename "$WORK")"
echo "device-run: $DEST/report.md and $DEST/results.tar.gz"
