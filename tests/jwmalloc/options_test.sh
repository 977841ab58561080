#!/usr/bin/env bash
# JWMALLOC_* options with bad values, unknown names and a program's end that
# loses the exit report (README "Options"; docs/design/architecture.md "Options").
#   - a bad value: one line "jwmalloc: JWMALLOC_X=v: expected ...; default D
#     kept" (the reclamation options too), the default in force, the program
#     runs as without it;
#   - an unknown JWMALLOC_ name: one line "unknown option"; every name of the
#     README's option tables is known (no such line);
#   - JWMALLOC_STATS=1 still reports when the program closed stderr before
#     exit; an unwritable JWMALLOC_STATS_FILE says so and reports on stderr
#     (stderr closed or not, the program's exit status unchanged);
#     a program that overwrites its environment strings (process titles)
#     does not redirect the stats line to a garbage file name;
#   - a setuid program ignores every JWMALLOC_* variable;
#   - a jw_option_set before the first allocation keeps the environment's
#     other values.
# Usage: options_test.sh OPTIONS_PROBE README
set -euo pipefail
PROBE=${1:?usage: options_test.sh OPTIONS_PROBE README}
README=${2:?readme}
T=$(mktemp -d /tmp/jwmalloc-options-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "options: $*"; exit 1; }

# bad NAME VALUE DEFAULT [DEFAULT as the message names it]
bad() {
  local name=$1 value=$2 def=$3 said=${4:-$3} st=0
  env "JWMALLOC_$name=$value" "$PROBE" "$name" >"$T/out" 2>"$T/err" || st=$?
  [ $st -eq 0 ] || fail "JWMALLOC_$name=$value: exit status $st"
  [ "$(cat "$T/out")" = "$name=$def" ] || fail "JWMALLOC_$name=$value: value $(cat "$T/out"), want default $def"
  [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^jwmalloc: JWMALLOC_$name=.*: expected .*; default $said kept\$" "$T/err" ||
    fail "JWMALLOC_$name=$value: want one line naming the option, got: $(cat "$T/err")"
}
for v in 2 yes '' -1 1x; do bad STATS "$v" 0; done
for v in 7 no ' 1'; do bad ABORT_ON_ERROR "$v" 1; done
for v in abc -5 1001 99999999999999999999 25%; do bad POOL_PERCENT "$v" 25; done
for v in 1e3 0x10 2000000; do bad POOL_MIN "$v" 4; done
for v in maybe '' 3; do bad PLACEMENT "$v" 2 auto; done
# the reclamation options (reclaim/options.c) name their default the same way
for v in 2 on; do bad RECLAIM "$v" 1; done
for v in 0 600001 5s ''; do bad RECLAIM_INTERVAL_MS "$v" 500; done
for v in 64X -1 1T; do bad RECLAIM_WATERMARK "$v" 67108864 64M; done
bad RECLAIM_WATERMARK_MAX 1.5G 0
bad RECLAIM_POLICY lru 0 lifetime
bad RECLAIM_THREAD yes 1
for v in -1 600001 5ms 1K ''; do bad RECLAIM_GRACE_MS "$v" 50; done
# a set before any allocation changes that option and keeps the environment's others
JWMALLOC_RECLAIM_WATERMARK=1M JWMALLOC_RECLAIM_INTERVAL_MS=20 "$PROBE" --set-first RECLAIM_GRACE_MS=10 \
  RECLAIM_WATERMARK RECLAIM_INTERVAL_MS RECLAIM_GRACE_MS >"$T/out" 2>"$T/err"
[ "$(tr '\n' ' ' <"$T/out")" = "RECLAIM_WATERMARK=1048576 RECLAIM_INTERVAL_MS=20 RECLAIM_GRACE_MS=10 " ] &&
  [ ! -s "$T/err" ] || fail "a set before the first allocation: $(cat "$T/out" "$T/err")"
# PAGE_SIZE: a power of two from the kernel's page to 64 KiB, else the kernel's
# page (read back as the page in force: 4096 on this kernel)
kpage=$(getconf PAGESIZE)
for v in 12288 2048 131072 16k; do bad PAGE_SIZE "$v" "$kpage" "the kernel's page"; done
for v in 16384 65536 0; do
  JWMALLOC_PAGE_SIZE=$v "$PROBE" PAGE_SIZE >"$T/out" 2>"$T/err"
  want=$v; [ "$v" = 0 ] && want=$kpage
  [ "$(cat "$T/out")" = "PAGE_SIZE=$want" ] && [ ! -s "$T/err" ] ||
    fail "JWMALLOC_PAGE_SIZE=$v: $(cat "$T/out" "$T/err")"
done
# good values are taken, silently
JWMALLOC_POOL_PERCENT=60 JWMALLOC_POOL_MIN=0 "$PROBE" POOL_PERCENT POOL_MIN >"$T/out" 2>"$T/err"
[ "$(tr '\n' ' ' <"$T/out")" = "POOL_PERCENT=60 POOL_MIN=0 " ] && [ ! -s "$T/err" ] ||
  fail "good values: $(cat "$T/out" "$T/err")"

# PLACEMENT: 2 is auto's number, on purpose: what jw_option_get reads back for
# auto and what jw_option_set("PLACEMENT", 2) takes (backend.md 7b), so a value
# read back can be given back through the environment
for v in 0 1 2 auto; do
  JWMALLOC_PLACEMENT=$v "$PROBE" PLACEMENT >"$T/out" 2>"$T/err"
  want=$v; [ "$v" = auto ] && want=2
  [ "$(cat "$T/out")" = "PLACEMENT=$want" ] && [ ! -s "$T/err" ] ||
    fail "JWMALLOC_PLACEMENT=$v: $(cat "$T/out" "$T/err")"
done

# unknown names: one line each
JWMALLOC_STAT=1 JWMALLOC_POOLMIN=3 "$PROBE" >"$T/out" 2>"$T/err"
[ "$(grep -c 'unknown option' "$T/err")" -eq 2 ] && grep -q '^jwmalloc: JWMALLOC_STAT: unknown option' "$T/err" ||
  fail "unknown names: $(cat "$T/err")"
# every option of the README's tables is known
names=$(grep -oE '^\| `JWMALLOC_[A-Z_]+`' "$README" | grep -oE 'JWMALLOC_[A-Z_]+' | sort -u)
[ "$(echo "$names" | wc -l)" -ge 10 ] || fail "README option tables not found ($names)"
for n in $names; do
  env "$n=" "$PROBE" >"$T/out" 2>"$T/err" || fail "$n=: exit status"
  if grep -q 'unknown option' "$T/err"; then fail "$n (README) reported unknown: $(cat "$T/err")"; fi
done

# the exit report survives a program that closes stderr
JWMALLOC_STATS=1 "$PROBE" --close-stderr >"$T/out" 2>"$T/err"
grep -q '^jwmalloc statistics (pid' "$T/err" || fail "stderr closed before exit: no report ($(cat "$T/err"))"
# an unwritable stats file: a message, and the report on stderr
JWMALLOC_STATS=1 JWMALLOC_STATS_FILE="$T/no/such/dir/f" "$PROBE" >"$T/out" 2>"$T/err"
grep -q '^jwmalloc: JWMALLOC_STATS_FILE=.*: cannot open' "$T/err" && grep -q '^jwmalloc statistics' "$T/err" ||
  fail "unwritable stats file: $(cat "$T/err")"
# ... also when the program closed stderr before exit (GNU tools such as ls
# do): the one-line message and the report still reach the caller's stderr,
# and the program's exit status is its own
st=0; JWMALLOC_STATS=1 JWMALLOC_STATS_FILE="$T/no/such/dir/f" "$PROBE" --close-stderr --exit 3 >"$T/out" 2>"$T/err" ||
  st=$?
[ $st -eq 3 ] || fail "unwritable stats file, stderr closed: exit status $st, want 3"
[ "$(grep -c '^jwmalloc: JWMALLOC_STATS_FILE=.*: cannot open' "$T/err")" -eq 1 ] &&
  grep -q '^jwmalloc statistics' "$T/err" || fail "unwritable stats file, stderr closed: $(cat "$T/err")"
# a program that overwrites its environment strings
(cd "$T" && JWMALLOC_STATS=1 JWMALLOC_STATS_FILE="$T/stats" "$PROBE" --scribble-env >"$T/out" 2>"$T/err")
grep -q '^jwmalloc-stats v1 ' "$T/stats" || fail "stats line lost after the environment was overwritten"
[ -z "$(find "$T" -maxdepth 1 -name 'ZZ*')" ] || fail "stats written to a garbage path: $(ls "$T")"
# A setuid program ignores JWMALLOC_*: the user who runs it must not choose a
# file it appends to (checked as root, running a setuid-root copy as nobody).
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null; then
  chmod 755 "$T"
  cp "$PROBE" "$T/suid_probe"
  chmod 4755 "$T/suid_probe"
  (cd "$T" && setpriv --reuid=65534 --regid=65534 --clear-groups env JWMALLOC_STATS=1 \
    JWMALLOC_STATS_FILE="$T/chosen" JWMALLOC_POOL_MIN=7 JWMALLOC_PLACEMENT=1 "$T/suid_probe" POOL_MIN PLACEMENT \
    >"$T/out" 2>"$T/err") || fail "setuid probe: exit status"
  # ... and runs with the defaults, placement included (README's table: auto, read back as 2)
  [ "$(tr '\n' ' ' <"$T/out")" = "POOL_MIN=4 PLACEMENT=2 " ] ||
    fail "a setuid program does not run with the defaults: $(cat "$T/out")"
  if [ -e "$T/chosen" ]; then
    fail "a setuid program took JWMALLOC_* from its caller ($(cat "$T/out"); $(ls "$T"))"
  fi
else
  echo "options: setuid case skipped (needs root and setpriv)"
fi
echo "options: ok"
