#!/usr/bin/env bash
# The loader's throughput before and after a change, side by side in one run: two dsc binaries read
# the same files (real CIFAR-10 train, JPEG and raw), one thread pinned to one core, alternating round
# by round; prints medians and the after/before ratio (whole-process `dsc bench`, in-process figures).
# usage: bench/run_before_after.sh BEFORE_DSC [BUILD_DIR] [ROUNDS]
set -euo pipefail
before=$(realpath "$1")
shift
source "$(dirname "$0")/common.sh"
rounds=${2:-5}
after=$build/dsc
"$after" build "$data/train" "$work/jpg.beton" --quiet >/dev/null
"$after" build "$data/train" "$work/raw.beton" --encoding raw --quiet >/dev/null
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
rate() { taskset -c 1 "$1" bench "$2" --threads 1 --epochs 4 --json | grep -m1 -o '"images_per_second": *[0-9.]*' | grep -o '[0-9.]*$'; }
declare -A r
for i in $(seq "$rounds"); do
  for f in jpg raw; do
    r[before_$f]+="$(rate "$before" "$work/$f.beton") "
    r[after_$f]+="$(rate "$after" "$work/$f.beton") "
  done
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'); rounds: $rounds (medians), 1 thread on core 1"
for f in jpg raw; do
  b=$(echo ${r[before_$f]} | tr ' ' '\n' | median)
  a=$(echo ${r[after_$f]} | tr ' ' '\n' | median)
  awk -v f="$f" -v b="$b" -v a="$a" 'BEGIN { printf "%-4s before %10.0f img/s   after %10.0f img/s   after/before %.3f\n", f, b, a, a / b }'
done
