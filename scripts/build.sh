#!/usr/bin/env bash
# Configures and builds one configuration: build.sh release|sanitize [extra cmake args]
# release  -> build/        (-O3 -march=native; the benchmarks too unless
#                           FUSETUNE_BUILD_BENCH=OFF, as the test command and
#                           the example set it: neither runs them)
# sanitize -> build-asan/   (ASan + UBSan, -O1, line tables only, no benchmarks),
#                           built with clang so that the same build also makes
#                           the libFuzzer harnesses of tests/fuzz
set -euo pipefail
cd "$(dirname "$0")/.."
config=${1:-release}
shift || true
jobs=$(nproc)
case "$config" in
  release) dir=build; args=(-DCMAKE_BUILD_TYPE=Release -DFUSETUNE_BUILD_BENCH="${FUSETUNE_BUILD_BENCH:-ON}") ;;
  sanitize) dir=build-asan; args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo -DFUSETUNE_SANITIZE=ON -DFUSETUNE_BUILD_BENCH=OFF
                                  "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
                                  -DCMAKE_CXX_COMPILER=clang++ -DFUSETUNE_FUZZ=ON) ;;
  # -g1 keeps the file:line of every frame in sanitizer reports and builds in
  # 60% of the time full debug information takes (CI has 2 cores).
  *) echo "usage: $0 release|sanitize" >&2; exit 2 ;;
esac
# lld (Debian's lld) links the sanitizer build's test binaries, with their
# debug lines, in a third of ld.bfd's time; either compiler takes -fuse-ld=lld.
if command -v ld.lld >/dev/null; then
  args+=(-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld
         -DCMAKE_MODULE_LINKER_FLAGS=-fuse-ld=lld)
fi
cmake -S . -B "$dir" "${args[@]}" "$@" >/dev/null
cmake --build "$dir" -j "$jobs"
