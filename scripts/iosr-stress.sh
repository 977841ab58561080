#!/usr/bin/env bash
# The IOSR randomized stress (tests/iosr/test_stress.c) over many seeds, both
# slot policies, longer phases than make test's: make stress-iosr [SEEDS=20] [OPS=1000].
# Prints one line per run; exits non-zero if any run fails.
set -u
build=${1:-build}; seeds=${2:-20}; ops=${3:-1000}
bin=$build/bin
export IOSR_TOOL=$bin/iosr IOSRD=$bin/iosrd
fail=0
for s in $(seq 1 "$seeds"); do
  for slot in global process; do
    # odd seeds: clean pages; every third seed: no move-out (every page through the dropper)
    mo=$(( s % 3 == 0 ? 0 : 1 ))
    out=$(timeout 900 "$bin/test_stress" "$slot" "$s" "$ops" $((s % 2)) "$mo" 2>&1); rc=$?
    echo "$slot seed $s (moveout $mo): rc $rc: $(echo "$out" | tail -n 1)"
    [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ] || fail=1
  done
done
exit $fail
