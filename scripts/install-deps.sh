#!/usr/bin/env bash
# Installs, from Debian 12 packages, what one kind of work needs and this machine lacks.
# Idempotent: a second run installs nothing.
# Usage: scripts/install-deps.sh [build|test|all]   (default: all)
#   build  a compiler, CMake, Ninja and liburing: what `make` needs to compile both libraries
#   test   build's, and what the tests run or compare with: clang (sanitizers, libFuzzer), the i386
#          compilers, valgrind and strace (counts), python3, sqlite3 and git (real programs), the peer
#          allocators (comparisons), gnuplot (the report tests' plots), fio (the IOSR evaluation's test)
#   all    test's, and what the demo and the benchmarks add: GNU time (wall time and peak RSS),
#          stress-ng (the test suite on a busy machine)
set -euo pipefail

profile=${1:-all}
build=(build-essential cmake ninja-build pkg-config liburing-dev)
test=(clang libclang-rt-14-dev gcc-multilib g++-multilib valgrind strace python3 sqlite3 git
      libjemalloc2 libmimalloc2.0 libmimalloc-dev libtcmalloc-minimal4 gnuplot-nox fio)
all=(time stress-ng)
case "$profile" in
  build) pkgs=("${build[@]}") ;;
  test) pkgs=("${build[@]}" "${test[@]}") ;;
  all) pkgs=("${build[@]}" "${test[@]}" "${all[@]}") ;;
  *) echo "install-deps: unknown profile '$profile' (build, test or all)" >&2; exit 2 ;;
esac

missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}"
SUDO=
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null
echo "install-deps: done"
