#!/bin/sh
# Bad input to scripts/check-layers.py and scripts/check-sizes.py (from breaker25's review; test
# repo.checks_bad_input). Usage: failure_modes.sh [REPO]. Each case must exit 2 with one line that
# names the problem (the words given); a case marked BAD does not. Exit status 1 when any case is BAD.
REPO=$(cd "${1:-$(dirname "$0")/../..}" && pwd)
L=$REPO/scripts/check-layers.py
S=$REPO/scripts/check-sizes.py
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
bad=0
copy() { mkdir -p "$T/$1" && (cd "$REPO" && tar cf - docs/design/architecture.md jwmalloc iosr include verify/include) | tar xf - -C "$T/$1"; }
doc() { echo "$T/$1/docs/design/architecture.md"; }
try() { # NAME WORDS CMD...
  name=$1 words=$2; shift 2
  out=$("$@" 2>&1); rc=$?
  n=$(printf '%s\n' "$out" | grep -c .)
  verdict=ok
  if [ $rc -ne 2 ] || [ "$n" -ne 1 ] || ! printf '%s\n' "$out" | grep -qF -- "$words"; then verdict=BAD; bad=1; fi
  printf '%-4s %-58s rc=%d lines=%d: %s\n' $verdict "$name" $rc "$n" "$(printf '%s\n' "$out" | head -1)"
}
mkdir -p "$T/empty" "$T/nodoc/jwmalloc" "$T/nosec/docs/design" "$T/norows/docs/design" "$T/vac/docs/design"
mkdir -p "$T/nosec/jwmalloc" "$T/norows/jwmalloc" "$T/nosrc/jwmalloc"
echo '# Architecture' > "$(doc nosec)"
printf '## Layers\n\ntext\n\n## Next\n' > "$(doc norows)"
cp "$REPO/docs/design/architecture.md" "$(doc vac)"
copy m1; sed -i 's/^| 5 | `jwmalloc\/reclaim\/` |/| 5 | jwmalloc\/reclaim\/ |/' "$(doc m1)"
copy m2; sed -i 's/^| 5 | `jwmalloc\/reclaim\/` |/| five | `jwmalloc\/reclaim\/` |/' "$(doc m2)"
copy m3; sed -i 's/^| 4 | `jwmalloc\/backend\/` |/| 4 | `jwmalloc\/backend` |/' "$(doc m3)"
copy m4; sed -i 's/^| 9 | `jwmalloc\/tools\/` |/| 9 | `jwmalloc\/tools\/`, `jwmalloc\/nosuch\/` |/' "$(doc m4)"
copy m5; sed -i 's/^| 9 | `jwmalloc\/tools\/` |/| 9 | `jwmalloc\/tools\/`, `jwmalloc\/os\/` |/' "$(doc m5)"
copy m6; mkdir "$T/m6/jwmalloc/extra"
sed -i 's/^| 3 | `iosr\/engine\/` |/| 3 | `iosr\/engine\/`, `jwmalloc\/extra\/` |/' "$(doc m6)"
try "layers: nonexistent root" "is not a directory" python3 "$L" "$T/nonexistent"
try "layers: empty root" "neither jwmalloc/ nor iosr/" python3 "$L" "$T/empty"
try "layers: root without architecture.md" "cannot read" python3 "$L" "$T/nodoc"
try "layers: no Layers section" "no '## Layers' section" python3 "$L" "$T/nosec"
try "layers: Layers section with no rows" "no rows" python3 "$L" "$T/norows"
try "layers: root with the doc but no jwmalloc/ or iosr/" "neither jwmalloc/ nor iosr/" python3 "$L" "$T/vac"
try "layers: row without backticks (reclaim/)" "row | 5 | jwmalloc/reclaim/ |" python3 "$L" "$T/m1"
try "layers: row with a non-numeric layer (five)" "not a number" python3 "$L" "$T/m2"
try "layers: folder without its trailing slash (backend)" "no trailing /" python3 "$L" "$T/m3"
try "layers: row names a folder that does not exist" "jwmalloc/nosuch/ does not exist" python3 "$L" "$T/m4"
try "layers: os/ listed at layer 2 and again at 9" "jwmalloc/os/ is also in the row" python3 "$L" "$T/m5"
try "layers: a jwmalloc folder in the IOSR table" "mixes iosr and jwmalloc" python3 "$L" "$T/m6"
try "layers: an option it does not know" "usage" python3 "$L" --nosuch
try "sizes: nonexistent root" "is not a directory" python3 "$S" "$T/nonexistent"
try "sizes: empty root (no sources)" "no source" python3 "$S" "$T/empty"
try "sizes: a folder with no sources" "no source" python3 "$S" "$T/nosrc"
try "sizes: an option it does not know" "usage" python3 "$S" --nosuch
exit $bad
