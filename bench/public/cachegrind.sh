#!/usr/bin/env bash
# Deterministic counts of one public benchmark program (../shared/bench-public, built by its build.sh) under a
# jwmalloc library: cachegrind's instructions and first-level data misses, in all and in the allocator (source
# lines under jwmalloc/), and jwmalloc's exit statistics; per call = divided by small mallocs plus frees.
# Valgrind runs one thread at a time: thread interleavings differ from a native run, the counts per call do not
# depend on the machine's load. Time-bound programs (larson) do less work under it: compare per-call figures.
# Usage: cachegrind.sh JWMALLOC_SO OUT_DIR PROGRAM [ARGS...]   (BIN: where the programs are, /tmp/bench-public)
# Errors: a missing library, program or valgrind exits 2 with a one-line message.
set -u
lib=$(readlink -f "${1:?usage: cachegrind.sh JWMALLOC_SO OUT_DIR PROGRAM [ARGS...]}")
out=${2:?usage: cachegrind.sh JWMALLOC_SO OUT_DIR PROGRAM [ARGS...]}; prog=${3:?usage: cachegrind.sh JWMALLOC_SO OUT_DIR PROGRAM [ARGS...]}
shift 3
BIN=${BIN:-/tmp/bench-public}
[ -f "$lib" ] || { echo "cachegrind.sh: no library $lib" >&2; exit 2; }
[ -x "$BIN/$prog" ] || { echo "cachegrind.sh: $BIN/$prog not built (run build.sh)" >&2; exit 2; }
command -v valgrind >/dev/null || { echo "cachegrind.sh: valgrind not installed" >&2; exit 2; }
mkdir -p "$out"; out=$(readlink -f "$out")
rm -f "$out/stats"
(cd "$BIN" && LD_PRELOAD=$lib JWMALLOC_STATS=1 JWMALLOC_STATS_FILE="$out/stats" \
  valgrind --tool=cachegrind --cache-sim=yes --cachegrind-out-file="$out/cachegrind.out" "./$prog" "$@" > "$out/log" 2>&1)
cg_annotate --auto=no --show=Ir,D1mr,D1mw --threshold=0 "$out/cachegrind.out" > "$out/annotate.txt" 2>/dev/null
python3 - "$out" <<'PY'
import re, sys
out = sys.argv[1]
tot, alloc = None, [0, 0, 0]
num = r"([\d,]+)(?:\s+\([^)]*\))?"
for line in open(out + "/annotate.txt"):
    m = re.match(r"\s*" + num + r"\s+" + num + r"\s+" + num + r"\s+(.*)$", line)
    if not m:
        continue
    v = [int(m.group(i).replace(",", "")) for i in (1, 2, 3)]
    if "PROGRAM TOTALS" in m.group(4):
        tot = v
    elif "/jwmalloc/" in m.group(4) and ":" in m.group(4):
        alloc = [a + b for a, b in zip(alloc, v)]
st = {}
for line in open(out + "/stats"):
    for kv in line.split():
        if "=" in kv:
            k, _, x = kv.partition("=")
            st[k] = x
calls = int(st.get("small_mallocs", 0)) + int(st.get("small_frees", 0))
if tot is None or calls == 0:
    sys.exit("cachegrind.sh: no totals or no calls counted (see %s/log)" % out)
print("calls %d  program Ir %.1f D1mr %.3f per call  allocator Ir %.1f D1mr %.3f D1mw %.3f per call" %
      (calls, tot[0] / calls, tot[1] / calls, alloc[0] / calls, alloc[1] / calls, alloc[2] / calls))
print(" ".join("%s=%s" % (k, st[k]) for k in ("threads_started", "abandoned_slabs", "adopted_slabs",
                                               "cross_thread_frees", "pool_hits", "pool_misses", "backend_allocs")
               if k in st))
PY
