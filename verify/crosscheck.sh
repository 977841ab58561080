#!/usr/bin/env bash
# Cross-checks the checker's reductions on one client configuration: the
# canonical exploration (default), source-DPOR (--dpor) and, with --exhaustive,
# the unreduced search (--no-dpor) must find exactly the same set of execution
# graphs (reads-from and modification order; see docs/design/verification.md).
# usage: crosscheck.sh [--exhaustive] CLIENT_BINARY [client options...]
set -euo pipefail
modes=("" "--dpor")
if [ "${1:-}" = "--exhaustive" ]; then modes+=("--no-dpor"); shift; fi
bin=$1
shift
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
ref=
for m in "${modes[@]}"; do
  name=${m:-canonical}
  name=${name#--}
  "$bin" --level test --quiet --jobs 1 --list-graphs $m "$@" > "$tmp/$name.out" || {
    echo "crosscheck: $bin $* ($name) failed:"
    cat "$tmp/$name.out"
    exit 1
  }
  grep '^graph ' "$tmp/$name.out" | cut -d' ' -f2 | sort > "$tmp/$name.graphs"
  printf '%-10s %6d distinct graphs, %s\n' "$name" "$(wc -l < "$tmp/$name.graphs")" \
    "$(grep -o '[0-9]* executions ([0-9]* complete' "$tmp/$name.out")"
  if [ -z "$ref" ]; then
    ref=$name
  elif ! cmp -s "$tmp/$ref.graphs" "$tmp/$name.graphs"; then
    echo "crosscheck: $ref and $name explored different execution graphs:"
    diff "$tmp/$ref.graphs" "$tmp/$name.graphs" | head -20
    exit 1
  fi
done
[ -s "$tmp/$ref.graphs" ] || { echo "crosscheck: no complete execution"; exit 1; }
echo "crosscheck: all modes agree"
