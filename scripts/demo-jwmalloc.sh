#!/usr/bin/env bash
# make demo, jwmalloc part: real Debian programs run on jwmalloc through
# `jwmalloc run --stats`, each checked against the same run on glibc, with
# jwmalloc's statistics per program (calls per tier, cross-thread frees, page
# pool, memory) and wall time / peak RSS next to glibc's.
set -euo pipefail
BUILD=${1:-build}
cd "$(dirname "$0")/.."
echo "=== jwmalloc: real programs (LD_PRELOAD through: $BUILD/bin/jwmalloc run --stats -- PROG ARGS...) ==="
titles=(
  "python3: dict/list/str churn (PYTHONMALLOC=malloc, so every object is a malloc)"
  "sqlite3: build a 4+ MB database of 120,000 rows, index, update, delete, vacuum, query"
  "git: init, commit 2,000 files, edit and commit again, gc, fsck"
  "gcc: compile and link a generated C file of 400 functions (cc1, as, collect2, ld)"
  "C++: 8 producer and 8 consumer threads churning std::map/std::string/std::vector"
)
cases=(python sqlite git gcc cxx)
for i in "${!cases[@]}"; do
  echo
  echo "--- ${titles[$i]}"
  st=0
  tests/jwmalloc/real_programs.sh "$BUILD" "${cases[$i]}" --demo || st=$?
  [ $st -eq 77 ] && continue
  [ $st -eq 0 ] || { echo "demo: ${cases[$i]} failed"; exit 1; }
done
echo
echo "Tiers: frontend < 2 KiB (thread-local one-page slabs), midend 2-16 KiB, ranges 16 KiB-4 MiB, direct mmap > 4 MiB."
echo "Page source: the closed-sibling-tree range backend (docs/design/backend.md); freed memory ages out through lifetime-based reclamation."
