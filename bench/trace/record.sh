#!/usr/bin/env bash
# Records the allocation traces of real programs for the evaluation suite
# (make bench-traces; docs/design/bench.md, "Traces"). Traces are generated
# data: they live in the build directory and are never committed.
#   bench/trace/record.sh [BUILD] [OUTDIR]      (default: build, BUILD/bench/traces)
# A trace is re-recorded only when missing or older than the recorder or its
# program's input. Each is checked by replaying it once (its footer must agree).
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-$BUILD/bench/traces}
HERE=$(cd "$(dirname "$0")" && pwd)
LIB=$(cd "$BUILD" && pwd)/lib/libjwtrace.so
REPLAY=$(cd "$BUILD" && pwd)/bin/jwb-replay
[ -r "$LIB" ] && [ -x "$REPLAY" ] || { echo "record: $LIB or $REPLAY not built (run make build)" >&2; exit 1; }
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# The real binaries (a wrapper script would be recorded instead of the program).
real() { readlink -f "$(command -v "$1")"; }
PY=/usr/bin/python3; [ -x "$PY" ] || PY=$(real python3)
PY=$(readlink -f "$PY")
SQLITE=$(real sqlite3)
CLANG=$(real clang++)

record() {  # name input stdin [VAR=value...] command...   (env assignments keep the recorded
  local name=$1 input=$2 stdin=$3; shift 3           # process the program itself, not a wrapper)
  local trace=$OUT/$name.jwt
  if [ -s "$trace" ] && [ "$trace" -nt "$LIB" ] && [ "$trace" -nt "$input" ]; then
    echo "record: $name up to date"
    return
  fi
  rm -f "$trace"
  echo "record: $name: $*"
  local t0=$SECONDS
  (cd "$WORK" && env JWTRACE_OUT="$trace" LD_PRELOAD="$LIB" "$@" <"$stdin" >"$WORK/$name.out" 2>"$WORK/$name.err") || {
    echo "record: $name failed:" >&2; tail -5 "$WORK/$name.err" >&2; rm -f "$trace"; exit 1; }
  local line
  line=$("$REPLAY" --trace "$trace" --lat-every 0)
  case "$line" in
    *complete=1*footer_agrees=1*check=ok*) ;;
    *) echo "record: $name: the trace does not replay cleanly: $line" >&2; rm -f "$trace"; exit 1 ;;
  esac
  local records
  records=$(sed -n 's/.* records=\([0-9]*\).*/\1/p' <<<"$line")
  echo "record: $name: $records records, $(du -h "$trace" | cut -f1), $((SECONDS - t0)) s"
  printf '%s\t%s\t%s\n' "$name" "$records" "$*" >>"$OUT/manifest.tsv.new"
}

rm -f "$OUT/manifest.tsv.new"
record python3 "$HERE/programs/py_churn.py" /dev/null PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$PY" "$HERE/programs/py_churn.py"
record sqlite3 "$HERE/programs/sqlite_workload.sql" "$HERE/programs/sqlite_workload.sql" "$SQLITE" "$WORK/bench.db"
record clang "$HERE/programs/cxx_workload.cpp" /dev/null "$CLANG" -x c++ -std=c++17 -O1 -c "$HERE/programs/cxx_workload.cpp" -o "$WORK/cxx.o"
if [ -f "$OUT/manifest.tsv.new" ]; then
  {
    echo "# trace	records	command (python3 $("$PY" --version 2>&1 | cut -d' ' -f2), sqlite3 $("$SQLITE" --version | cut -d' ' -f1), $("$CLANG" --version | head -1))"
    cat "$OUT/manifest.tsv.new"
  } >"$OUT/manifest.tsv"
  rm -f "$OUT/manifest.tsv.new"
fi
echo "record: traces in $OUT"
