#!/usr/bin/env bash
# Allocator instructions per call on the xmalloc-like producer/consumer load
# (bench workload `xmalloc`, 2 threads: one only allocates, the other frees
# every block: 100% cross-thread frees), counted by callgrind for jwmalloc and
# for mimalloc in the same run, attributed as the evaluation suite does
# (bench/suite/callgrind.py: the calls of the harness's jwb_call_* functions,
# the allocator's thread-exit work and its background threads, over the
# measured region). docs/design/frontend.md, "Frees from other threads" and
# "The page pool"; issue 8.
#
# Usage: xfree_bench.sh BUILD_DIR MIMALLOC_LIB [--check]
# With --check the exit status says whether (1) jwmalloc's instructions per
# call stay within LIMIT (2.0) times mimalloc's from the same run (3.2x before
# the lean remote free and the pool's peak watermark), and (2) the producer's
# page pool served at least 90% of its new slabs (a slab emptied by the
# consumer is reused, not sent through the backend and back: 2% before).
# 77: valgrind, python3 or mimalloc missing, the comparison was skipped.
# Deterministic: valgrind runs the threads one at a time, and the workload's
# requests follow its seed.
set -euo pipefail
BUILD=${1:?usage: xfree_bench.sh BUILD_DIR MIMALLOC_LIB [--check]}
MI=${2:-}
check=0
if [ "${3:-}" = --check ]; then check=1; fi
LIMIT=2.0
OPS=100000
SRC=$(cd "$(dirname "$0")/../.." && pwd)
prog=$BUILD/bin/jwb-xmalloc
jw=$BUILD/lib/libjwmalloc.so
command -v valgrind >/dev/null || { echo "xfree: valgrind not installed; skipped"; exit 77; }
command -v python3 >/dev/null || { echo "xfree: python3 not installed; skipped"; exit 77; }
[ -n "$MI" ] && [ -e "$MI" ] || { echo "xfree: mimalloc (libmimalloc-dev) not found at build time; skipped"; exit 77; }
[ -x "$prog" ] && [ -e "$jw" ] || { echo "xfree: $prog or $jw not built" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Allocator instructions per call of one run: NAME LIB [ENV...]
per_call() {
  local name=$1 lib=$2
  shift 2
  env "$@" LD_PRELOAD="$lib" valgrind --tool=callgrind --separate-threads=yes --compress-strings=no \
    --compress-pos=no --callgrind-out-file="$tmp/$name.%p" "$prog" --threads 2 --ops $OPS --lat-every 0 \
    >"$tmp/$name.out" 2>"$tmp/$name.err" || { tail -5 "$tmp/$name.err" >&2; exit 1; }
  python3 - "$SRC/bench/suite" "$tmp" "$name" <<'EOF'
import glob, os, sys
sys.path.insert(0, sys.argv[1])
import callgrind
tmp, name = sys.argv[2], sys.argv[3]
out = open(os.path.join(tmp, name + ".out")).read().split()
ops = int([w.split("=", 1)[1] for w in out if w.startswith("ops=")][0])
pid = sorted({os.path.basename(p).split(".")[1].split("-")[0] for p in glob.glob(os.path.join(tmp, name + ".*[0-9]"))})[0]
att = callgrind.attribute(os.path.join(tmp, "%s.%s" % (name, pid)))
if not att.get("ok"):
    sys.exit("xfree: %s: %s" % (name, att.get("reason")))
print("%.1f" % (att["allocator"] / ops))
EOF
}

j=$(per_call jw "$jw" JWMALLOC_STATS=1 JWMALLOC_STATS_FILE="$tmp/jw.stats")
m=$(per_call mi "$MI")
stat() { tr ' ' '\n' <"$tmp/jw.stats" | awk -F= -v k="$1" '$1 == k { print $2 }'; }
hits=$(stat pool_hits)
misses=$(stat pool_misses)
ratio=$(awk -v j="$j" -v m="$m" 'BEGIN { printf "%.2f", j / m }')
echo "xmalloc-like load, 2 threads (producer/consumer), $OPS allocations: allocator instructions per call"
printf '%10s %10s %8s\n' jwmalloc mimalloc ratio
printf '%10s %10s %8s\n' "$j" "$m" "$ratio"
echo "jwmalloc's producer: $hits new slabs from its page pool, $misses from the backend"
echo "command: LD_PRELOAD=LIB valgrind --tool=callgrind --separate-threads=yes $prog --threads 2 --ops $OPS --lat-every 0"
if [ $check -eq 1 ]; then
  fail=0
  awk -v r="$ratio" -v l="$LIMIT" 'BEGIN { exit !(r <= l) }' || {
    echo "xfree: jwmalloc needs ${ratio}x mimalloc's instructions per call (limit ${LIMIT}x)" >&2
    fail=1
  }
  awk -v h="$hits" -v m="$misses" 'BEGIN { exit !(h + m > 0 && h >= 0.9 * (h + m)) }' || {
    echo "xfree: the page pool served $hits of $((hits + misses)) new slabs (want >= 90%)" >&2
    fail=1
  }
  exit $fail
fi
exit 0
