#!/usr/bin/env bash
# The IOSR part of `make demo`: several app processes on iosrd; the background
# ones are swapped out together; one is brought back to the foreground and
# touches its memory. Once under the baseline policies (as Linux: global
# slots, cluster read-ahead, FIFO I/O) and once under IOSR's (process-oriented
# slots, adaptive read-ahead, SIOS), on a swap file in a temporary directory.
# Figures: switch time, swap-in bandwidth, read requests and their size.
# Usage: scripts/demo-iosr.sh [BUILD_DIR]   (IOSR_DEMO_APPS, IOSR_DEMO_SIZE)
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
BIN=$BUILD/bin
APPS=${IOSR_DEMO_APPS:-4}
SIZE=${IOSR_DEMO_SIZE:-128M}
say() { printf '%s\n' "$*"; }

if [ "$(id -u)" != 0 ] && [ ! -w /dev/userfaultfd ] && [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null || echo 0)" != 1 ]; then
  say "demo-iosr: running without root: userfaultfd serves user-mode faults only (see README)"
fi
TMP=$(mktemp -d "${TMPDIR:-/tmp}/iosr-demo.XXXXXX")
PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "${IOSR_DEMO_KEEP:-}" ] && echo "kept $TMP" || rm -rf "$TMP"
}
trap cleanup EXIT

say "== IOSR: $APPS apps of $SIZE each, swap file in $TMP"
"$BIN/iosr" mkswap "$TMP/swap" --size 2G --label demo >/dev/null

wait_for() { # file pattern seconds
  local i
  for ((i = 0; i < $3 * 20; i++)); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
  say "demo-iosr: timed out waiting for '$2' in $1"; cat "$1" >&2 || true; return 1
}

json_app() { # json app field -> value (first match inside the app's object)
  python3 - "$1" "$2" "$3" <<'PY'
import json, sys
d = json.loads(open(sys.argv[1]).read())
app = next(a for a in d["apps"] if a["name"] == sys.argv[2])
v = app
for k in sys.argv[3].split("."):
    v = v[k]
print(v)
PY
}

run() { # label settings
  local label=$1 settings=$2 sock=$TMP/sock
  : >"$TMP/iosrd.log"
  "$BIN/iosrd" --swap "$TMP/swap" --socket "$sock" --set "$settings" 2>>"$TMP/iosrd.log" &
  local d=$!
  PIDS+=("$d")
  for ((i = 0; i < 100; i++)); do "$BIN/iosr" --socket "$sock" stat >/dev/null 2>&1 && break; sleep 0.05; done
  # the apps start together (their memory is touched at the same time, as
  # apps running side by side), the last one ends up in the foreground
  local pat
  for ((a = 1; a <= APPS; a++)); do
    pat=seq; [ $((a % 2)) = 0 ] && pat=random
    "$BIN/iosr-app" --name "app$a" --size "$SIZE" --hot 100 --pattern "$pat" --socket "$sock" >"$TMP/app$a.out" 2>&1 &
    PIDS+=($!)
  done
  for ((a = 1; a <= APPS; a++)); do wait_for "$TMP/app$a.out" ready 60; done
  "$BIN/iosr" --socket "$sock" fg "app$APPS" >/dev/null
  wait_for "$TMP/app$APPS.out" "switch app=app$APPS n=1" 60
  # Android-style: the background apps are reclaimed together
  local t0 t1
  t0=$(date +%s.%N)
  "$BIN/iosr" --socket "$sock" reclaim --background >/dev/null
  t1=$(date +%s.%N)
  "$BIN/iosr" --socket "$sock" stat --json >"$TMP/before.json"
  # app1 (touches its memory in address order) and app2 (random order) come back
  for a in 1 2; do
    "$BIN/iosr" --socket "$sock" fg "app$a" >/dev/null
    wait_for "$TMP/app$a.out" "switch app=app$a n=1" 120
  done
  "$BIN/iosr" --socket "$sock" stat --json >"$TMP/after.json"
  for a in 1 2; do
    local line ms reads bytes busy mbps avg verified
    line=$(grep "switch app=app$a n=1" "$TMP/app$a.out")
    ms=$(sed 's/.* ms=\([0-9.]*\).*/\1/' <<<"$line")
    verified=$(sed 's/.*verified=\([a-zA-Z]*\).*/\1/' <<<"$line")
    reads=$(json_app "$TMP/after.json" "app$a" io.read_reqs)
    bytes=$(json_app "$TMP/after.json" "app$a" swapin.bytes)
    mbps=$(json_app "$TMP/after.json" "app$a" swapin.mb_per_s)
    avg=$(python3 -c "print(f'{$bytes/1024/max($reads,1):.0f}')")
    printf '%-9s %-7s %-6s %10s %12s %8s %9s %9s\n' "$label" "app$a" \
      "$([ $a = 1 ] && echo seq || echo random)" "$ms" "$mbps" "$reads" "$avg" "$verified" | tee -a "$TMP/table"
  done
  printf '%-9s reclaim of %d background apps (%s each) took %s s\n' "$label" $((APPS - 1)) "$SIZE" \
    "$(python3 -c "print(f'{$t1 - $t0:.2f}')")" >>"$TMP/notes"
  for p in "${PIDS[@]:1}"; do kill "$p" 2>/dev/null || true; done
  wait "${PIDS[@]:1}" 2>/dev/null || true
  kill "$d" 2>/dev/null || true
  wait "$d" 2>/dev/null || true
  PIDS=()
}

: >"$TMP/table"
: >"$TMP/notes"
printf '%-9s %-7s %-6s %10s %12s %8s %9s %9s\n' policy app order switch-ms swapin-MB/s reads avg-KiB data
run baseline "slot=global,readahead=cluster,sched=fifo"
run iosr "slot=process,readahead=adaptive,sched=sios"
cat "$TMP/notes"
python3 - "$TMP/table" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1]) if l.strip()]
t = {(r[0], r[1]): r for r in rows}
for app in ("app1", "app2"):
    b, i = t.get(("baseline", app)), t.get(("iosr", app))
    if b and i and float(i[3]) > 0 and float(b[4]) > 0:
        print(f"{app} ({b[2]}): IOSR switch time {float(i[3]) / float(b[3]):.2f}x the baseline's, "
              f"swap-in bandwidth {float(i[4]) / float(b[4]):.1f}x, {int(b[5])} -> {int(i[5])} read requests")
bad = [r for r in rows if r[7] != "ok"]
if bad:
    print("demo-iosr: DATA MISMATCH", bad)
    sys.exit(1)
PY
