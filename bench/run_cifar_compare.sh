#!/usr/bin/env bash
# Side-by-side loader comparison on the real CIFAR-10 train split (50,000 JPEGs), pinned to one core
# (and then on both cores), alternating the contenders round by round; prints medians and ratios.
# usage: bench/run_cifar_compare.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
source "$(dirname "$0")/common.sh"
rounds=${2:-5}
g++ -O2 -std=c++17 -o "$work/decode_ceiling" "$here/../shared/tools/decode_ceiling.cpp" -lturbojpeg
"$build/dsc" build "$data/train" "$work/jpg.beton" --quiet >/dev/null
"$build/dsc" build "$data/train" "$work/raw.beton" --encoding raw --quiet >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
declare -A r
for k in ceiling dsc_jpg_1 dsc_raw_1 naive_1 dsc_jpg_2 dsc_raw_2 naive_2; do r[$k]=''; done
for i in $(seq "$rounds"); do
  r[ceiling]+="$(taskset -c 0 "$work/decode_ceiling" "$data/train" 3) "
  r[dsc_jpg_1]+="$(taskset -c 0 "$build/bench/dsc_compare" dsc "$work/jpg.beton" 1 4) "
  r[dsc_raw_1]+="$(taskset -c 0 "$build/bench/dsc_compare" dsc "$work/raw.beton" 1 4) "
  r[naive_1]+="$(taskset -c 0 "$build/bench/dsc_compare" naive "$data/train" 1 2 2>/dev/null) "
  r[dsc_jpg_2]+="$("$build/bench/dsc_compare" dsc "$work/jpg.beton" 2 4) "
  r[dsc_raw_2]+="$("$build/bench/dsc_compare" dsc "$work/raw.beton" 2 4) "
  r[naive_2]+="$("$build/bench/dsc_compare" naive "$data/train" 2 2 2>/dev/null) "
done
declare -A m
for k in "${!r[@]}"; do m[$k]=$(echo ${r[$k]} | tr ' ' '\n' | median); done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); rounds: $rounds (medians)"
printf "%-34s %12s\n" "contender" "images/s"
for k in ceiling dsc_jpg_1 dsc_raw_1 naive_1 dsc_jpg_2 dsc_raw_2 naive_2; do printf "%-34s %12.0f\n" "$k" "${m[$k]}"; done
awk -v c="${m[ceiling]}" -v j1="${m[dsc_jpg_1]}" -v j2="${m[dsc_jpg_2]}" -v r1="${m[dsc_raw_1]}" -v r2="${m[dsc_raw_2]}" -v n1="${m[naive_1]}" 'BEGIN {
  printf "dsc JPEG, 1 core / decode ceiling        %.3f\n", j1 / c;
  printf "dsc JPEG, 1 core / naive loader, 1 core  %.2f\n", j1 / n1;
  printf "dsc JPEG, 2 threads / 1 thread           %.2f\n", j2 / j1;
  printf "dsc raw, 2 threads / 1 thread            %.2f\n", r2 / r1;
}'
