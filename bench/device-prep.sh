#!/usr/bin/env bash
# Prepares, on this machine, what bench/device-run.sh needs on a lent machine
# that has no Debian peers and cannot install any: copies the peer allocators'
# libraries into .device/peers (ignored by git) next to the built tree.
#   bench/device-prep.sh            (after make build)
# Then run there, carrying build/bin, build/lib and .device:
#   bench/device-run.sh "$OUT"
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x build/bin/jwbench-run ] || { echo "device-prep: build first (make build)" >&2; exit 1; }
mkdir -p .device/peers
for lib in /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 /usr/lib/x86_64-linux-gnu/libmimalloc.so.2 \
           /usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \
           /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.scudo_standalone-x86_64.so; do
  if [ -r "$lib" ]; then cp -L "$lib" .device/peers/; else echo "device-prep: $lib missing (scripts/install-deps.sh)" >&2; fi
done
for pkg in libjemalloc2 libmimalloc2.0 libtcmalloc-minimal4 libclang-rt-14-dev; do
  printf '%s\t%s\n' "$pkg" "$(dpkg-query -W -f='${Version}' "$pkg" 2>/dev/null || echo unknown)"
done >.device/peers/versions.tsv
[ -r build/lib/libjwmalloc.so ] || echo "device-prep: note: build/lib/libjwmalloc.so is not built: it will be listed as such"
du -sh build/bin build/lib .device | sed 's/^/device-prep: carry /'
echo "device-prep: now run bench/device-run.sh \"\$OUT\" there, carrying build/bin, build/lib and .device"
