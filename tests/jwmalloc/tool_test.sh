#!/usr/bin/env bash
# The `jwmalloc run` tool and `make install`: the tool runs a program on the
# library it finds next to itself (build tree, and an installed tree with
# PREFIX and with DESTDIR), passes the exit status through, prints the
# statistics of every process with --stats, and answers bad usage with a
# one-line message and a non-zero status. The installed header, libraries
# and pkg-config file build a program that uses the jw_ API.
# Usage: tool_test.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?usage: tool_test.sh BUILD_DIR}" && pwd)
T=$(mktemp -d /tmp/jwmalloc-tool-XXXXXX)
trap 'rm -rf "$T"' EXIT
fail() { echo "tool: $*"; exit 1; }

check_tool() { # TOOL
  local tool=$1 st
  "$tool" run -- true || fail "$tool run -- true failed"
  st=0; "$tool" run -- sh -c 'exit 3' || st=$?
  [ $st -eq 3 ] || fail "exit status not passed through ($st)"
  "$tool" run --stats -- bash -c 'echo hello; ls / >/dev/null; exit 0' >"$T/out" 2>"$T/err" || fail "--stats run failed"
  grep -qx hello "$T/out" || fail "program output lost"
  grep -q 'jwmalloc run: statistics' "$T/err" || fail "no statistics: $(cat "$T/err")"
  grep -Eq '^  total +2 ' "$T/err" || fail "expected two processes (bash, ls): $(cat "$T/err")"
  awk '$1 == "total" && $3 > 0 { ok = 1 } END { exit !ok }' "$T/err" || fail "no frontend mallocs counted"
}

check_tool "$BUILD/bin/jwmalloc"
st=0; "$BUILD/bin/jwmalloc" run 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q 'no program given' "$T/err" || fail "missing program: status $st"
# bad usage: exactly one line naming the problem and where the usage is, status 2
one_line() { [ "$(wc -l < "$T/err")" -eq 1 ] && grep -q -- '--help shows the usage' "$T/err"; }
st=0; "$BUILD/bin/jwmalloc" frobnicate 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q "^jwmalloc: unknown command 'frobnicate'" "$T/err" && one_line ||
  fail "unknown command: status $st, $(cat "$T/err")"
st=0; "$BUILD/bin/jwmalloc" 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q "^jwmalloc: no command given" "$T/err" && one_line || fail "no command: status $st, $(cat "$T/err")"
st=0; "$BUILD/bin/jwmalloc" run --bogus -- true 2>"$T/err" || st=$?
[ $st -eq 2 ] && one_line || fail "unknown run option: status $st, $(cat "$T/err")"
# --help: the usage on stdout, status 0
st=0; "$BUILD/bin/jwmalloc" --help >"$T/out" 2>"$T/err" || st=$?
[ $st -eq 0 ] && grep -q '^usage: jwmalloc run' "$T/out" && [ ! -s "$T/err" ] || fail "--help: status $st"
st=0; "$BUILD/bin/jwmalloc" run --lib 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q -- '--lib needs a PATH' "$T/err" || fail "--lib without a path: status $st, $(cat "$T/err")"
st=0; "$BUILD/bin/jwmalloc" run -- /nonexistent/prog 2>"$T/err" || st=$?
[ $st -eq 127 ] && grep -q 'cannot run /nonexistent/prog' "$T/err" || fail "missing program: status $st"
st=0; "$BUILD/bin/jwmalloc" run --lib /nonexistent.so -- true 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q 'library not found' "$T/err" || fail "bad --lib: status $st"

# --lib naming a file ld.so cannot preload (it would print its own error and
# run the program on glibc, status 0): refused before running, one line,
# status 2, and the program does not run.
printf 'not a library\n' >"$T/text.so"
printf 'int f(void) { return 1; }\n' >"$T/f.c"
gcc -c "$T/f.c" -o "$T/f.o" || fail "cannot build an object file"
printf 'int main(void) { return 0; }\n' >"$T/m.c"
gcc -fPIE -pie "$T/m.c" -o "$T/pie" || fail "cannot build a PIE"
# an ELF shared object of another class (32-bit, i386): header only
{ printf '\177ELF\001\001\001'; head -c 9 /dev/zero; printf '\003\000\003\000'; head -c 44 /dev/zero; } >"$T/elf32.so"
for bad in "$T/text.so:no ELF header" "$T/f.o:not ET_DYN" "$T/pie:position-independent executable" \
  "$T/elf32.so:another machine" "$T:Is a directory"; do
  file=${bad%%:*} why=${bad#*:}
  st=0; "$BUILD/bin/jwmalloc" run --stats --lib "$file" -- touch "$T/ran" >"$T/out" 2>"$T/err" || st=$?
  [ $st -eq 2 ] && [ "$(wc -l <"$T/err")" -eq 1 ] && grep -q "^jwmalloc: .*$why" "$T/err" ||
    fail "--lib $file ($why): status $st, $(cat "$T/err")"
  [ ! -e "$T/ran" ] || fail "--lib $file: the program ran"
done

# A library path LD_PRELOAD cannot carry (ld.so splits it at spaces and colons
# and would run the program on glibc): refused in one line, status 2.
mkdir -p "$T/a b"
cp "$BUILD/lib/libjwmalloc.so" "$T/a b/"
st=0; "$BUILD/bin/jwmalloc" run --lib "$T/a b/libjwmalloc.so" -- true 2>"$T/err" || st=$?
[ $st -eq 2 ] && grep -q 'space or colon' "$T/err" && [ "$(wc -l <"$T/err")" -eq 1 ] ||
  fail "library path with a space: status $st, $(cat "$T/err")"

# Installed with a prefix, and staged with DESTDIR.
cmake --install "$BUILD" --prefix "$T/prefix" >/dev/null
check_tool "$T/prefix/bin/jwmalloc"
DESTDIR="$T/stage" cmake --install "$BUILD" --prefix /opt/jw >/dev/null
[ -x "$T/stage/opt/jw/bin/jwmalloc" ] || fail "DESTDIR not honoured"
check_tool "$T/stage/opt/jw/bin/jwmalloc"
for f in include/jwmalloc.h; do [ -f "$T/prefix/$f" ] || fail "$f not installed"; done
pc=$(find "$T/prefix" -name jwmalloc.pc)
[ -n "$pc" ] || fail "jwmalloc.pc not installed"
libdir=$(dirname "$(dirname "$pc")")
for f in libjwmalloc.so libjwmalloc.a libjwmalloc_api.a; do [ -e "$libdir/$f" ] || fail "$f not installed"; done
cat >"$T/use.c" <<'C'
#include <jwmalloc.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  char *p = jw_malloc(100);
  strcpy(p, "ok");
  jw_stats s;
  jw_stats_get(&s, sizeof s);
  printf("%s %d\n", p, s.small_mallocs > 0);
  jw_free(p);
  return 0;
}
C
flags=$(PKG_CONFIG_PATH=$(dirname "$pc") pkg-config --cflags --libs jwmalloc)
gcc "$T/use.c" -o "$T/use" $flags -Wl,-rpath,"$libdir" || fail "cannot build against the installed library"
[ "$("$T/use")" = "ok 1" ] || fail "program built against the installed library"
gcc "$T/use.c" -o "$T/use_static" -I"$T/prefix/include" "$libdir/libjwmalloc_api.a" -lpthread || fail "static api"
[ "$("$T/use_static")" = "ok 1" ] || fail "program built against libjwmalloc_api.a"
echo "tool and install: ok"
