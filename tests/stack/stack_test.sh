#!/bin/bash
# Stack tests (docs/design/stack.md): unmodified programs (python3, and the
# threaded heapprog) under `jwmalloc run --swap`.
# usage: stack_test.sh CASE; env JWMALLOC, IOSR_TOOL, IOSRD, HEAPPROG.
# Exit 77 where userfaultfd is unavailable.
set -u
case_=$1
here=$(cd "$(dirname "$0")" && pwd)
prog=$here/dictprog.py
tmp=$(mktemp -d /tmp/stack-test.XXXXXX)
daemon=
app=
cleanup() {
  { [ -n "$daemon" ] && kill -9 "$daemon" && wait "$daemon"; [ -n "$app" ] && kill -9 "$app" && wait "$app"; } 2>/dev/null
  rm -rf "$tmp"
}
trap cleanup EXIT
fail() {
  echo "FAIL: $*"
  if [ -n "$app" ] && ! kill -0 "$app" 2>/dev/null; then wait "$app"; echo "(the program exited $?)"; app=; fi
  [ -n "${KEEP:-}" ] && cp -r "$tmp" "$KEEP" # KEEP=DIR: the test's files, for a look after a failure
  [ -f "$tmp/err" ] && tail -5 "$tmp/err"
  [ -f "$tmp/dlog" ] && tail -5 "$tmp/dlog"
  exit 1
}
command -v python3 >/dev/null || { echo "SKIP: no python3"; exit 77; }
if [ "$(id -u)" != 0 ] && [ "$(cat /proc/sys/vm/unprivileged_userfaultfd 2>/dev/null)" != 1 ]; then
  echo "SKIP: userfaultfd unavailable to this user (vm.unprivileged_userfaultfd=0, not root)"; exit 77
fi
export IOSR_SOCKET=$tmp/sock PYTHONMALLOC=malloc
# The interpreter itself, not a wrapper script (pyenv's shim runs a shell and
# several programs, each of which would register under --swap).
py=$(python3 -c 'import sys; print(sys.executable)')
queries=$(printf 'k1\nk777\nk199999\nnone\n')

# iosrd on area $1. Its standard input and fd 3 are closed: a daemon started
# while a test holds the program's input open must not hold it too (the
# program would never see the end of its input).
start_daemon() { # area [iosrd options...]
  local area=$1; shift
  "$IOSRD" --swap "$area" --socket "$IOSR_SOCKET" --set restart_grace_ms=300 "$@" 2>>"$tmp/dlog" </dev/null 3>&- &
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
wait_ready() { # file [count]: until `count` lines start with "ready"
  for _ in $(seq 3000); do
    [ "$(grep -c '^ready' "$1" 2>/dev/null)" -ge "${2:-1}" ] && return 0
    kill -0 "$app" 2>/dev/null || break
    sleep 0.05
  done
  fail "the program did not get ready"
}
# Starts PROG ARGS under --swap NAME with its input on fd 3, output in $tmp/out.
launch() { # name prog args...
  local name=$1; shift
  rm -f "$tmp/in"; mkfifo "$tmp/in"
  "$JWMALLOC" run --swap "$name" -- "$@" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
  app=$!
  exec 3>"$tmp/in"
}
finish() { # closes the input, waits; fails unless the program exits 0
  exec 3>&-
  wait "$app"; local rc=$?; app=
  [ $rc = 0 ] || fail "the program exited $rc"
}
# Runs dictprog MODE under --swap NAME; between "ready" and the queries runs "$@".
swap_run() { # name mode cmd...
  local name=$1 mode=$2; shift 2
  launch "$name" "$py" "$prog" "$mode"
  wait_ready "$tmp/out"
  "$@"
  echo "$queries" >&3
  finish
}
expect() { # mode [first line]: the program's output on glibc, without swap
  { [ $# -gt 1 ] && echo "$2"; echo "$queries"; } | env -u LD_PRELOAD "$py" "$prog" "$1" >"$tmp/want" || fail "plain run"
}
stat_json() { "$IOSR_TOOL" stat --json >"$tmp/stat" || fail "iosr stat"; }
# Prints FIELD (a dotted path: io.write_bytes) of app NAME from the last
# stat_json ("-" when there is no such app).
app_field() { # name field
  python3 - "$tmp/stat" "$1" "$2" <<'PY'
import json, sys
apps = [a for a in json.load(open(sys.argv[1])).get("apps", []) if a.get("name") == sys.argv[2]]
v = apps[0] if apps else "-"
for k in sys.argv[3].split("."):
    v = v.get(k, "-") if isinstance(v, dict) else "-"
print(v)
PY
}
swapped_out() { # name: reclaim all of it, and show IOSR wrote some of it
  "$IOSR_TOOL" reclaim "$1" >/dev/null || fail "iosr reclaim $1"
  stat_json
  local n; n=$(app_field "$1" swapped_pages)
  echo "app $1 swapped_pages $n"
  [ "$n" != - ] && [ "$n" -gt 0 ] || fail "no pages of $1 swapped out"
}

case $case_ in
identical)
  expect plain; area 512M; start_daemon "$tmp/area"
  swap_run ident plain swapped_out ident
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
fork)
  expect fork; area 512M; start_daemon "$tmp/area"
  swap_run forker fork swapped_out forker
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
huge)
  # A 47 MiB bytearray (a block over 4 MiB, grown and shrunk by realloc) is
  # swapped out with the rest: with a small dict, only it can make up the
  # pages IOSR wrote.
  export DICT_N=1000
  expect huge; area 512M; start_daemon "$tmp/area"
  big_out() {
    swapped_out hug
    n=$(app_field hug swapped_pages)
    [ "$n" -ge $(((40 << 20) / 4096)) ] || fail "$n pages swapped out: the huge block is not in IOSR memory"
  }
  swap_run hug huge big_out
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
exec)
  # The first image is swapped out, reads its dict back and execs; the new
  # image registers under the same name (the old one's app is released, its
  # slots freed) and is swapped out in turn.
  expect exec go; area 512M; start_daemon "$tmp/area"
  launch again "$py" "$prog" exec
  wait_ready "$tmp/out"
  swapped_out again
  echo go >&3
  wait_ready "$tmp/out" 2
  stat_json
  python3 - "$tmp/stat" <<'PY' || fail "the exec'd image is not the only app, named again"
import json, sys
names = [a["name"] for a in json.load(open(sys.argv[1]))["apps"]]
print("apps after exec:", names)
sys.exit(0 if names == ["again"] else 1)
PY
  swapped_out again
  used=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["engine"]["swap"]["used"])' "$tmp/stat")
  [ "$used" = "$(app_field again swapped_pages)" ] || fail "slots used $used: the old image's slots were not freed"
  echo "$queries" >&3
  finish
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ"
  ;;
threads)
  # Four threads allocate, free, realloc and hand blocks to each other while
  # their heap is swapped out again and again; every block is verified.
  area 512M; start_daemon "$tmp/area"
  launch thr "$HEAPPROG" churn 4
  wait_ready "$tmp/out"
  for _ in $(seq 8); do
    "$IOSR_TOOL" reclaim thr >/dev/null || fail "iosr reclaim thr"
    sleep 0.2
  done
  stat_json
  majors=$(app_field thr faults.major)
  echo "major faults while the threads ran: $majors"
  [ "$majors" != - ] && [ "$majors" -gt 0 ] || fail "no swapped page was read back"
  finish
  grep -q '^verified [1-9][0-9]* corrupt 0$' "$tmp/out" || fail "$(cat "$tmp/out")"
  tail -1 "$tmp/out"
  ;;
trim-live)
  # Nothing live is dropped by a trim: four threads allocate, free, realloc
  # and hand blocks over while the program is sent to the background (a
  # trim) and reclaimed (a trim, then the swap-out) again and again; every
  # block is verified on each touch and at the end.
  area 512M; start_daemon "$tmp/area" --log 2
  launch trl "$HEAPPROG" churn 4
  wait_ready "$tmp/out"
  for _ in $(seq 8); do
    "$IOSR_TOOL" fg trl >/dev/null || fail "iosr fg trl"
    "$IOSR_TOOL" fg --none >/dev/null || fail "iosr fg --none" # trl to the background: it trims
    sleep 0.1
    "$IOSR_TOOL" reclaim trl >/dev/null || fail "iosr reclaim trl"
  done
  trims=$(grep -c "app trl trimmed" "$tmp/dlog")
  echo "reclaims answered by a trim: $trims of 8"
  [ "$trims" -gt 0 ] || fail "no trim answered a reclaim"
  finish
  grep -q '^verified [1-9][0-9]* corrupt 0$' "$tmp/out" || fail "$(cat "$tmp/out")"
  tail -1 "$tmp/out"
  ;;
trim-writes)
  # A heap of 16 MiB of live blocks and 128 MiB freed is swapped out: with
  # trims only its live pages are written; without (JWMALLOC_SWAP_TRIM=0)
  # the free ones are written too, which shows the heap held them.
  # JWMALLOC_RECLAIM=0: jwmalloc's own decay gives nothing back meanwhile.
  area 1G; start_daemon "$tmp/area"
  export JWMALLOC_RECLAIM=0
  for trim in 0 1; do
    JWMALLOC_SWAP_TRIM=$trim launch "fr$trim" "$HEAPPROG" freed 4 16 128
    wait_ready "$tmp/out"
    read -r live freed < <(sed -n 's/^ready live=\([0-9]*\) freed=\([0-9]*\)$/\1 \2/p' "$tmp/out")
    "$IOSR_TOOL" reclaim "fr$trim" >/dev/null || fail "iosr reclaim fr$trim"
    stat_json
    w[$trim]=$(app_field "fr$trim" io.write_bytes); r[$trim]=$(app_field "fr$trim" io.write_reqs)
    finish
    grep -q '^verified [1-9][0-9]* corrupt 0$' "$tmp/out" || fail "$(cat "$tmp/out")"
  done
  bound=$((live + live / 8 + (2 << 20)))
  echo "live $live B, freed $freed B; written: without trims ${w[0]} B in ${r[0]} requests, with ${w[1]} B in ${r[1]} requests (bound $bound B)"
  [ "${w[1]}" -le "$bound" ] || fail "with trims ${w[1]} B written, more than the live pages ($bound B)"
  [ "${w[0]}" -gt "$bound" ] || fail "without trims only ${w[0]} B written: the heap held no free memory to drop"
  ;;
daemon-death)
  # iosrd is killed with the heap swapped out; the program touches its pages
  # meanwhile (its threads wait), a new iosrd takes the area over, and the
  # program ends with its data intact.
  expect plain; area 512M; start_daemon "$tmp/area"
  launch dd "$py" "$prog" plain
  wait_ready "$tmp/out"
  swapped_out dd
  kill -9 "$daemon"; wait "$daemon" 2>/dev/null; daemon=
  # In the background: the program's read of its input copies into a
  # swapped-out buffer while holding the pipe's lock, so a second write to
  # the pipe waits until a daemon serves that fault.
  echo "$queries" >&3 &
  writer=$!
  sleep 0.5 # the queries reach swapped pages while no daemon runs (not asserted)
  start_daemon "$tmp/area"
  wait "$writer"
  finish
  cmp -s "$tmp/want" "$tmp/out" || fail "outputs differ after iosrd died"
  grep -q "resumed" "$tmp/err" || fail "the program did not resume with the new iosrd"
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
