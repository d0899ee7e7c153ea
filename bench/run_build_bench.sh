#!/usr/bin/env bash
# dsc build on the real CIFAR-10 train split (50,000 JPEGs): images/s with 1 and 2 threads for each
# encoding (median of ROUNDS runs, page cache warm), and the file sizes.
# usage: bench/run_build_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
rounds=${2:-3}
find "$data/train" -name "*.jpg" -exec cat {} + > /dev/null  # warm the page cache
src_bytes=$(find "$data/train" -name "*.jpg" -printf "%s\n" | awk "{s+=\$1} END {print s}")
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); source JPEGs: $src_bytes bytes"
printf "%-28s %8s %12s %12s\n" "encoding" "threads" "images/s" "file MiB"
run() {  # name threads args...
  local name=$1 t=$2; shift 2
  local rates=()
  for i in $(seq "$rounds"); do
    local s=$(date +%s.%N)
    "$build/dsc" build "$data/train" "$work/b.beton" --threads "$t" --quiet "$@" >/dev/null
    local e=$(date +%s.%N)
    rates+=("$(echo "50000 / ($e - $s)" | bc -l)")
  done
  local med=$(printf "%s\n" "${rates[@]}" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
  printf "%-28s %8s %12.0f %12.1f\n" "$name" "$t" "$med" "$(echo "$(stat -c %s "$work/b.beton") / 1048576" | bc -l)"
}
for t in 1 2; do
  run "jpeg pass-through, shared" "$t"
  run "jpeg pass-through, inline" "$t" --jpeg-tables inline
  run "raw" "$t" --encoding raw
  run "raw-zstd" "$t" --encoding raw-zstd
  run "jpeg re-encode q90" "$t" --encoding jpeg --reencode --quality 90
done
