#!/usr/bin/env bash
# Installs, from Debian 12 packages, whatever the build, the tests, the demo and the
# benchmarks need and this machine lacks. Idempotent: a second run installs nothing.
# Usage: scripts/install-deps.sh [--bench]
set -euo pipefail

pkgs=(
  build-essential cmake ninja-build pkg-config clang libclang-rt-14-dev  # compilers, sanitizers, libFuzzer
  gcc-multilib g++-multilib                                    # the i386 build (gcc -m32)
  valgrind strace                                              # callgrind counts, syscall counts
  liburing-dev                                                 # IOSR swap I/O
  python3 sqlite3 git                                          # real programs run under jwmalloc
  libjemalloc2 libmimalloc2.0 libmimalloc-dev libtcmalloc-minimal4  # peer allocators
  gnuplot-nox fio                                              # reports and disk limits
  time                                                         # jwmalloc demo: wall time and peak RSS
  stress-ng                                                    # the test suite under load (a busy machine)
)

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
