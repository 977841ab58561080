#!/usr/bin/env bash
# Real programs, unmodified, under LD_PRELOAD of the built libjwmalloc.so,
# compared with the same run without it: same output, exit status 0 both
# times. jwmalloc's own exit statistics (one line per process, appended to a
# file) prove that it, not glibc, served the calls.
#
# Usage: real_programs.sh BUILD_DIR CASE [--demo]   (CASE: python sqlite git
# gcc cxx). --demo (make demo) runs the jwmalloc side through `jwmalloc run
# --stats` and shows its statistics, wall time and peak RSS next to glibc's.
# Exit 77 (skip) when the program is not installed.
set -euo pipefail
BUILD=$(cd "${1:?usage: real_programs.sh BUILD_DIR CASE [--demo]}" && pwd)
CASE=${2:?case}
DEMO=0
[ "${3:-}" = --demo ] && DEMO=1
LIB=$BUILD/lib/libjwmalloc.so
[ -r "$LIB" ] || { echo "no $LIB"; exit 1; }
WORK=$(mktemp -d /tmp/jwmalloc-real-XXXXXX)
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
TIMER=()
[ $DEMO -eq 1 ] && [ -x /usr/bin/time ] && TIMER=(/usr/bin/time -f '%e %M' -o)

need() { command -v "$1" >/dev/null || { echo "$CASE: $1 not installed; skipped"; exit 77; }; }

# run TAG CMD...: runs CMD in $WORK/TAG (created), output to $WORK/TAG.out;
# with TAG=jw under LD_PRELOAD and statistics to $WORK/stats (demo: through
# the jwmalloc tool, its report in $WORK/jw.report).
run() {
  local tag=$1
  shift
  mkdir -p "$WORK/$tag"
  local status=0 timer=()
  [ ${#TIMER[@]} -gt 0 ] && timer=("${TIMER[@]}" "$WORK/$tag.time")
  if [ "$tag" = jw ] && [ $DEMO -eq 1 ]; then
    (cd "$WORK/$tag" && "${timer[@]}" "$BUILD/bin/jwmalloc" run --stats -- "$@") \
      >"$WORK/$tag.out" 2>"$WORK/jw.report" || status=$?
  elif [ "$tag" = jw ]; then
    (cd "$WORK/$tag" && LD_PRELOAD=$LIB JWMALLOC_STATS=1 JWMALLOC_STATS_FILE=$WORK/stats "$@") >"$WORK/$tag.out" 2>&1 ||
      status=$?
  else
    (cd "$WORK/$tag" && "${timer[@]}" "$@") >"$WORK/$tag.out" 2>&1 || status=$?
  fi
  if [ $status -ne 0 ]; then
    echo "$CASE ($tag): exit status $status"
    tail -20 "$WORK/$tag.out"
    exit 1
  fi
}

# compare MIN_SMALL_MALLOCS: same output, and jwmalloc served the calls.
compare() {
  if ! cmp -s "$WORK/ref.out" "$WORK/jw.out"; then
    echo "$CASE: output differs with jwmalloc"
    diff "$WORK/ref.out" "$WORK/jw.out" | head -20
    exit 1
  fi
  if [ $DEMO -eq 1 ]; then
    sed 's/^/  | /' "$WORK/jw.out" | head -8
    cat "$WORK/jw.report"
    if [ -s "$WORK/ref.time" ] && [ -s "$WORK/jw.time" ]; then
      read -r rt rm <"$WORK/ref.time"
      read -r jt jm <"$WORK/jw.time"
      awk -v rt="$rt" -v rm="$rm" -v jt="$jt" -v jm="$jm" 'BEGIN {
        printf "  same output as with glibc; wall time %.2f s (glibc %.2f s), peak RSS of the largest process %.1f MiB (glibc %.1f MiB)\n",
          jt, rt, jm / 1024, rm / 1024 }'
    fi
    return 0
  fi
  [ -s "$WORK/stats" ] || { echo "$CASE: no process reported jwmalloc statistics: jwmalloc did not serve it"; exit 1; }
  awk -v want="$1" -v name="$CASE" '
    { n++; for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
    END {
      printf "%s: same output with jwmalloc; %d process(es) served: %d frontend, %d midend, %d range, %d direct mallocs, %d cross-thread frees, %d bad frees\n",
        name, n, v["small_mallocs"], v["mid_mallocs"], v["large_mallocs"], v["huge_mallocs"], v["cross_thread_frees"], v["invalid_frees"]
      if (v["small_mallocs"] < want) { printf "%s: only %d frontend mallocs (want >= %d)\n", name, v["small_mallocs"], want; exit 1 }
      if (v["invalid_frees"] > 0) exit 1
    }' "$WORK/stats"
}

case $CASE in
  python)
    PY=/usr/bin/python3
    [ -x $PY ] || PY=$(command -v python3 || true)
    [ -n "$PY" ] || need python3
    cat >churn.py <<'EOF'
import random, collections
random.seed(7)
d = {}
words = collections.Counter()
for i in range(300000):
    k = "k%d" % random.randrange(60000)
    d[k] = [str(i)] * random.randrange(1, 9)
    words[k[:3]] += 1
    if i % 3 == 0:
        d.pop("k%d" % random.randrange(60000), None)
    if i % 20000 == 0:
        s = "".join(sorted(d)[:50])
        d["s%d" % i] = list(s)
items = sorted(d.items())
print(len(d), sum(len(v) for v in d.values()), items[0][0], items[-1][0], len(words), words.most_common(3))
print(sum(len(str(x)) for x in items[:20000]))
EOF
    # PYTHONMALLOC=malloc: every object through malloc (not Python's own
    # small-object arenas), in both runs.
    export PYTHONMALLOC=malloc PYTHONHASHSEED=0
    run ref "$PY" "$WORK/churn.py"
    run jw "$PY" "$WORK/churn.py"
    compare 1000000
    ;;
  sqlite)
    need sqlite3
    cat >q.sql <<'EOF'
CREATE TABLE t(id INTEGER PRIMARY KEY, name TEXT, v REAL, pad TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 120000)
INSERT INTO t SELECT x, 'name-' || (x * 7919 % 100003), x * 0.5, printf('%.*c', x % 40, 'p') FROM c;
CREATE INDEX t_name ON t(name);
SELECT count(*), sum(v), min(name), max(name) FROM t;
SELECT substr(name, 1, 7) AS p, count(*) FROM t GROUP BY p ORDER BY 2 DESC, 1 LIMIT 5;
UPDATE t SET name = name || '-x' WHERE id % 3 = 0;
DELETE FROM t WHERE id % 5 = 0;
VACUUM;
SELECT count(*), sum(length(name)), sum(length(pad)) FROM t;
SELECT page_count * page_size > 4000000 FROM pragma_page_count, pragma_page_size;
PRAGMA integrity_check;
EOF
    run ref sh -c "sqlite3 db.sqlite < $WORK/q.sql"
    run jw sh -c "sqlite3 db.sqlite < $WORK/q.sql"
    compare 100000
    ;;
  git)
    need git
    # The files are written without jwmalloc; git itself runs with it.
    for d in $(seq 0 19); do mkdir -p files/d$d; done
    awk 'BEGIN { for (d = 0; d < 20; d++) for (f = 0; f < 100; f++) {
      out = sprintf("files/d%d/f%d.txt", d, f); printf "file %d %d\n", d, f > out
      for (k = f; k <= f + d * 3; k++) printf "%d ", k > out
      printf "\n" > out; close(out) } }'
    cat >git.sh <<'EOF'
set -e
export GIT_AUTHOR_NAME=t GIT_AUTHOR_EMAIL=t@example.org GIT_COMMITTER_NAME=t GIT_COMMITTER_EMAIL=t@example.org
export GIT_AUTHOR_DATE='2024-01-01T00:00:00Z' GIT_COMMITTER_DATE='2024-01-01T00:00:00Z' HOME=$PWD GIT_CONFIG_NOSYSTEM=1
git init -q -b main repo
cp -r "$1"/d* repo/
cd repo
git add -A
git commit -q -m one
sed -i 's/file/FILE/' d1/*.txt
git commit -qam two
git -c gc.auto=0 gc -q
git rev-parse HEAD HEAD~1
git count-objects -v | grep -E '^(count|in-pack|packs|garbage):'
git ls-files | wc -l
git log --oneline | wc -l
git fsck --no-progress --full && echo fsck ok
EOF
    run ref bash "$WORK/git.sh" "$WORK/files"
    run jw bash "$WORK/git.sh" "$WORK/files"
    compare 50000
    ;;
  gcc)
    need gcc
    {
      echo '#include <stdio.h>'
      echo '#include <string.h>'
      for i in $(seq 0 399); do
        echo "struct s$i { int a[$((i % 13 + 1))]; double d; const char *name; };"
        echo "static int f$i(int x) { struct s$i v; memset(&v, 0, sizeof v); v.a[0] = x * $i; v.name = \"f$i\";"
        echo "  for (int k = 0; k < $((i % 7 + 2)); k++) v.a[k % $((i % 13 + 1))] += k ^ x; return v.a[0] + (int)strlen(v.name); }"
      done
      echo 'int main(void) { long t = 0;'
      for i in $(seq 0 399); do echo "  t += f$i($i);"; done
      echo '  printf("%ld\n", t); return 0; }'
    } >prog.c
    cat >cc.sh <<'EOF'
set -e
gcc -O2 -c -o prog.o "$1/prog.c"
gcc -o prog prog.o
./prog
md5sum prog.o | cut -d' ' -f1
EOF
    run ref bash "$WORK/cc.sh" "$WORK"
    run jw bash "$WORK/cc.sh" "$WORK"
    compare 100000
    ;;
  cxx)
    prog=$BUILD/bin/cxx_churn
    [ -x "$prog" ] || { echo "no $prog"; exit 1; }
    run ref "$prog" 8 400
    run jw "$prog" 8 400
    compare 100000
    [ $DEMO -eq 1 ] || awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] += kv[2] } }
      END { if (v["cross_thread_frees"] == 0) { print "cxx: no cross-thread frees"; exit 1 } }' "$WORK/stats"
    ;;
  *)
    echo "unknown case $CASE"
    exit 2
    ;;
esac
