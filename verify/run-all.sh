#!/usr/bin/env bash
# `make verify`: every verification run at its full bound (docs/design/verification.md).
# Prints, per run, the result, executions explored, time and the bound; the
# failing execution of any unexpected failure; exits non-zero if any run fails.
# usage: verify/run-all.sh BUILD_DIR
set -uo pipefail
build=${1:-build}
runs=$build/verify/runs.txt
[ -f "$runs" ] || { echo "verify: $runs missing (build first)" >&2; exit 2; }
log=$build/verify/report.txt
: > "$log"
printf '%-34s %-58s %11s %9s %8s\n' run result executions seconds "exec/s" | tee -a "$log"
fail=0
start=$(date +%s)
while IFS='|' read -r name client args; do
  [ -n "$name" ] || continue
  # shellcheck disable=SC2086
  out=$("$build/verify/$client" --level full --expect-declared --quiet $args 2>&1)
  rc=$?
  s=$(grep '^VRF-SUMMARY' <<< "$out" | tail -1)
  IFS=$'\t' read -r _ _ result execs bound secs rate <<< "$s"
  [ -n "$s" ] || result="FAILED: no summary (exit $rc)"
  printf '%-34s %-58s %11s %9s %8s\n' "$name" "${result:0:58}" "${execs:-?}" "${secs:-?}" "${rate:-?}" | tee -a "$log"
  printf '    bound: %s%s\n' "${bound:-?}" "${args:+; options: $args}" | tee -a "$log"
  if [ $rc -ne 0 ]; then
    fail=1
    echo "$out" | tee -a "$log"
  fi
done < "$runs"
# the cross-checks too long for make test (verify/CMakeLists.txt)
xchecks=$build/verify/crosschecks.txt
if [ -f "$xchecks" ]; then
  while IFS='|' read -r name args; do
    [ -n "$name" ] || continue
    set -- $args
    ex=; [ "${1:-}" = --exhaustive ] && { ex=--exhaustive; shift; }
    client=$1; shift
    # shellcheck disable=SC2086
    if out=$("$(dirname "$0")/crosscheck.sh" $ex "$build/verify/$client" "$@" 2>&1); then
      printf '%-34s %s\n' "crosscheck.$name" "the reductions agree" | tee -a "$log"
    else
      printf '%-34s %s\n' "crosscheck.$name" "FAILED" | tee -a "$log"
      echo "$out" | tee -a "$log"
      fail=1
    fi
  done < "$xchecks"
fi
echo "verify: $(grep -c . "$runs") runs in $(( $(date +%s) - start )) s; report in $log" | tee -a "$log"
if [ $fail -ne 0 ]; then
  echo "verify: FAILED" | tee -a "$log"
  exit 1
fi
echo "verify: all runs passed" | tee -a "$log"
