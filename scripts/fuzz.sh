#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and fuzzes each for SECONDS, starting from the
# seed corpus made from the real CIFAR-10. The open and load targets mutate through a custom mutator
# that recomputes every checksum (tests/fuzz/dsc_mutator.cc), so their inputs reach the structural
# checks and decoders. A crash is saved under tests/fuzz/regressions/<target>/
# (commit it: ctest replays it from then on) and makes this script fail.
# usage: scripts/fuzz.sh [SECONDS] [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
secs=${1:-20}
build=${2:-$root/build-fuzz}
mkdir -p "$build"
build=$(cd "$build" && pwd)  # absolute: the targets run from inside it
cc=$(command -v clang-14 || command -v clang)
cxx=$(command -v clang++-14 || command -v clang++)
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" \
  -DDSC_FUZZ=ON -DDSC_BUILD_TESTS=OFF -DDSC_WITH_CUDA=OFF -DDSC_WITH_TORCH=OFF >/dev/null
targets=(open load pickle sources reply ffcv jpegseek)
cmake --build "$build" --target dsc $(printf "fuzz_%s " "${targets[@]}") >/dev/null
cifar=$root/build/testdata/cifar10
[ -f "$cifar/.unpacked" ] || cifar=$build/cifar10
[ -f "$cifar/.unpacked" ] || sh "$root/tests/unpack_cifar.sh" "$root/../shared/data/cifar10-jpg.tar.zst" "$cifar"
sh "$root/tests/fuzz/make_seeds.sh" "$build/dsc" "$cifar" "$build/seeds" >/dev/null
status=0
printf "%-10s %10s %12s %8s\n" target seconds executions crashes
for t in "${targets[@]}"; do
  mkdir -p "$build/corpus/$t" "$root/tests/fuzz/regressions/$t"
  cp -n "$build/seeds/$t"/* "$build/corpus/$t/" 2>/dev/null || true
  log=$build/fuzz_$t.log
  before=$(ls "$root/tests/fuzz/regressions/$t" | wc -l)
  if ! (cd "$build" && ASAN_OPTIONS=detect_leaks=1 "$build/tests/fuzz/fuzz_$t" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$root/tests/fuzz/regressions/$t/" "corpus/$t" >"$log" 2>&1); then
    status=1
  fi
  execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' || echo 0)
  crashes=$(( $(ls "$root/tests/fuzz/regressions/$t" | wc -l) - before ))
  printf "%-10s %10s %12s %8s\n" "$t" "$secs" "$execs" "$crashes"
  [ "$crashes" -eq 0 ] || { status=1; tail -40 "$log"; }
done
exit $status
