#!/usr/bin/env bash
# Sets up, builds (Release, warnings as errors) and runs the whole test suite.
# usage: scripts/test.sh [BUILD_DIR]   (extra CMake options through DSC_CMAKE_ARGS)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DDSC_WERROR=ON ${DSC_CMAKE_ARGS:-} >/dev/null
cmake --build "$build"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
