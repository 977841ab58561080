#!/usr/bin/env bash
# jwmalloc.i386: configures and builds jwmalloc and its tests for i386
# (cmake/i386.cmake, gcc -m32) and runs a quick subset of their tests.
# Usage: tests/i386/run.sh SOURCE_DIR BUILD_DIR
# Exit 77 (SKIP) when gcc -m32 cannot link a program (no gcc-multilib).
set -euo pipefail
src=${1:?source dir} out=${2:?build dir}
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
echo 'int main(void) { return 0; }' >"$probe/t.c"
if ! gcc -m32 "$probe/t.c" -o "$probe/t" 2>"$probe/err" || ! "$probe/t"; then
  echo "jwmalloc.i386: SKIP: gcc -m32 cannot link or run a program (install gcc-multilib g++-multilib: make deps)"
  sed -n 1,3p "$probe/err"
  exit 77
fi
gen=(); [ -f "$out/CMakeCache.txt" ] || ! command -v ninja >/dev/null || gen=(-G Ninja)
cmake "${gen[@]}" -S "$src" -B "$out" -DCMAKE_TOOLCHAIN_FILE="$src/cmake/i386.cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
jobs=$(nproc); [ "$jobs" -gt 2 ] && jobs=2
# only what the subset below runs (the whole suite's binaries took most of
# this test's time): the shared library and the subset's programs
cmake --build "$out" -j"$jobs" --target jwmalloc_shared test_log test_size_class test_api_dropin test_api_jw \
  test_bad_input test_glibc_names test_dlopen test_cxx test_concurrency test_pool test_lazy_park test_android \
  test_backend_size_class test_backend_tree >/dev/null
# A quick subset: the library's API, drop-in, C++ and log tests, the
# backend's unit tests, plain concurrency and the Android extensions.
ctest --test-dir "$out" --output-on-failure -j"$jobs" --timeout 300 \
  -R '^(jwmalloc\.(log|size_class|api\.(dropin|jw)|bad_input|glibc_names|cxx|dlopen|pool|lazy_park|concurrency\.(prodcons|short|fork)|android\..*)|backend\.(size_class|tree))$' \
  -E '(asan|tsan)'
