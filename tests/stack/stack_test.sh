#!/bin/bash
# Stack tests (docs/design/stack.md): an unmodified python3 under
# `jwmalloc run --swap`. usage: stack_test.sh CASE; env JWMALLOC, IOSR_TOOL, IOSRD.
# Exit 77 where userfaultfd is unavailable.
set -u
case_=$1
here=$(cd "$(dirname "$0")" && pwd)
prog=$here/dictprog.py
tmp=$(mktemp -d /tmp/stack-test.XXXXXX)
daemon=
cleanup() { [ -n "$daemon" ] && kill -9 "$daemon" 2>/dev/null; [ -n "${app:-}" ] && kill -9 "$app" 2>/dev/null; rm -rf "$tmp"; }
trap cleanup EXIT
fail() { echo "FAIL: $*"; [ -f "$tmp/err" ] && tail -5 "$tmp/err"; [ -f "$tmp/dlog" ] && tail -5 "$tmp/dlog"; exit 1; }
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null)" != 1 ]; then
  echo "SKIP: userfaultfd unavailable to this user (vm.unprivileged_userfaultfd=0, not root)"; exit 77
fi
export IOSR_SOCKET=$tmp/sock PYTHONMALLOC=malloc
# The interpreter itself, not a wrapper script (pyenv's shim runs a shell and
# several programs, each of which would register under --swap).
py=$(python3 -c 'import sys; print(sys.executable)')
queries=$(printf 'k1\nk777\nk199999\nnone\n')

start_daemon() { # area
  "$IOSRD" --swap "$1" --socket "$IOSR_SOCKET" --set restart_grace_ms=300 2>>"$tmp/dlog" &
  daemon=$!
  for _ in $(seq 500); do
    "$IOSR_TOOL" stat >/dev/null 2>&1 && return 0
    kill -0 "$daemon" 2>/dev/null || break
    sleep 0.02
  done
  grep -qi "userfaultfd\|ENOTSUP\|not supported" "$tmp/dlog" && { echo "SKIP: userfaultfd unavailable"; exit 77; }
  fail "iosrd did not come up"
}
area() { "$IOSR_TOOL" mkswap "$tmp/area" --size "$1" --force >/dev/null || fail "mkswap"; }
wait_ready() { # file
  for _ in $(seq 3000); do grep -q '^ready' "$1" 2>/dev/null && return 0; kill -0 "$app" 2>/dev/null || break; sleep 0.05; done
  fail "the program did not get ready"
}
# Runs dictprog MODE under --swap NAME; between "ready" and the queries runs "$@".
swap_run() { # name mode cmd...
  local name=$1 mode=$2; shift 2
  mkfifo "$tmp/in"
  "$JWMALLOC" run --swap "$name" -- "$py" "$prog" "$mode" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
  app=$!
  exec 3>"$tmp/in"
  wait_ready "$tmp/out"
  "$@"
  echo "$queries" >&3
  exec 3>&-
  wait "$app"; local rc=$?; app=
  rm -f "$tmp/in"
  [ $rc = 0 ] || fail "the program exited $rc"
}
expect() { # mode: the program's output on glibc, without swap
  echo "$queries" | env -u LD_PRELOAD "$py" "$prog" "$1" >"$tmp/want" || fail "plain run"
}
swapped_out() { # name: reclaim all of it, and show IOSR wrote some of it
  "$IOSR_TOOL" reclaim "$1" >/dev/null || fail "iosr reclaim $1"
  "$IOSR_TOOL" stat --json >"$tmp/stat" || fail "iosr stat"
  python3 - "$1" "$tmp/stat" <<'PY' || fail "no pages of $1 swapped out"
import json, sys
s = json.load(open(sys.argv[2]))
n = sys.argv[1]
apps = [a for a in s.get("apps", []) if a.get("name") == n or a.get("name", "").startswith(n + ".")]
print("app", sys.argv[1], "swapped_pages", apps[0].get("swapped_pages") if apps else None)
sys.exit(0 if apps and apps[0].get("swapped_pages", 0) > 0 else 1)
PY
}

case $case_ in
identical)
  expect plain; area 512M; start_daemon "$tmp/area"
  swap_run ident plain swapped_out ident
  "$IOSR_TOOL" fg ident >/dev/null 2>&1 # the app is gone by now: fg on a gone app may fail
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
fork)
  expect fork; area 512M; start_daemon "$tmp/area"
  swap_run forker fork swapped_out forker
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
exec)
  expect exec; area 512M; start_daemon "$tmp/area"
  swap_run again exec swapped_out again # the exec'd program's registration: again, or again.PID while the old image's is kept
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
daemon-death)
  expect plain; area 512M; start_daemon "$tmp/area"
  restart() {
    swapped_out dd
    kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
    start_daemon "$tmp/area"
  }
  swap_run dd plain restart
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ after iosrd died"
  ;;
no-daemon)
  IOSR_SOCKET=$tmp/none "$JWMALLOC" run --swap nod -- touch "$tmp/ran" 2>"$tmp/err"; rc=$?
  [ $rc = 2 ] || fail "exit $rc, not 2"
  [ "$(wc -l <"$tmp/err")" = 1 ] || fail "not one line: $(cat "$tmp/err")"
  [ ! -e "$tmp/ran" ] || fail "the program ran"
  cat "$tmp/err"
  ;;
area-full)
  area 4M; start_daemon "$tmp/area"
  fill() { "$IOSR_TOOL" reclaim filler >/dev/null 2>&1; "$JWMALLOC" run --swap second -- touch "$tmp/ran" 2>"$tmp/err2"; echo $? >"$tmp/rc2"; }
  swap_run filler plain fill
  [ "$(cat "$tmp/rc2")" = 2 ] || fail "exit $(cat "$tmp/rc2"), not 2 ($(cat "$tmp/err2"))"
  [ "$(wc -l <"$tmp/err2")" = 1 ] || fail "not one line: $(cat "$tmp/err2")"
  [ ! -e "$tmp/ran" ] || fail "the program ran"
  cat "$tmp/err2"
  ;;
*) echo "unknown case $case_"; exit 2 ;;
esac
echo "PASS: stack.$case_"
