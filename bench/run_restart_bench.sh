#!/usr/bin/env bash
# Restart-indexed JPEG payloads (issue 10 §2): file sizes with --restart-interval auto vs none on the
# 500 photos (those larger than 512 px shrunk first, so every payload is a pass-through transcode) and
# on CIFAR-10; dsc build images/s with 1 and 2 threads, with and without transcoding (median of ROUNDS;
# wall clock, and CPU seconds per image, which the shared machine disturbs less); then the restart
# target trade-off (bench/restart_bench: size, decode and marker-scan cost, RandomResizedCrop coverage).
# usage: bench/run_restart_bench.sh [BUILD_DIR] [ROUNDS]    (SKIP_T=1: without the restart_bench part)
set -euo pipefail
source "$(dirname "$0")/common.sh"
rounds=${2:-3}
photos=$work/photos512
if [ ! -f "$photos/.done" ]; then
  rm -rf "$work/photos-src" "$photos"
  mkdir -p "$work/photos-src"
  zstd -dc "$here/../shared/data/imagenet-photos-500.tar.zst" | tar -x -C "$work/photos-src"
  /usr/bin/python3 "$here/bench/shrink_photos.py" "$work/photos-src/imagenet-photos-500" "$photos" 512
  touch "$photos/.done"
fi
find "$photos" "$data/train" -type f -exec cat {} + > /dev/null  # warm the page cache
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
size() { stat -c %s "$1"; }
echo "== file sizes"
for src in photos cifar; do
  if [ $src = photos ]; then in=$photos; extra=(--max-resolution 512); else in=$data; extra=(); fi
  for mode in none auto; do
    "$build/dsc" build "$in" "$work/$src-$mode.beton" --restart-interval $mode --quiet "${extra[@]}" > "$work/$src-$mode.log"
  done
  n=$(size "$work/$src-none.beton"); a=$(size "$work/$src-auto.beton")
  printf "%-7s none %12d bytes   auto %12d bytes   auto/none %.4f   (%s)\n" $src "$n" "$a" "$(echo "$a / $n" | bc -l)" \
    "$(sed 's/.*samples from [^ ]* ([a-z]*), //' "$work/$src-auto.log")"
done
"$build/dsc" info "$work/photos-auto.beton" | grep -A1 "^restart markers"
echo "== dsc build on the photos: images/s (median of $rounds), CPU ms per image"
printf "%-10s %8s %10s %12s\n" mode threads images/s "CPU ms/img"
for t in 1 2; do
  for mode in none auto; do
    rates=(); cpus=()
    for i in $(seq "$rounds"); do
      /usr/bin/time -f "%e %U %S" -o "$work/time" "$build/dsc" build "$photos" "$work/b.beton" --max-resolution 512 \
        --restart-interval $mode --threads "$t" --quiet > /dev/null
      read -r wall user sys < "$work/time"
      rates+=("$(echo "500 / $wall" | bc -l)"); cpus+=("$(echo "($user + $sys) * 1000 / 500" | bc -l)")
    done
    med() { printf "%s\n" "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
    printf "%-10s %8s %10.1f %12.2f\n" $mode "$t" "$(med "${rates[@]}")" "$(med "${cpus[@]}")"
  done
done
[ "${SKIP_T:-0}" = 1 ] && exit 0
echo "== restart target T (bench/restart_bench, thread CPU time, median of 7 rounds)"
"$build/bench/restart_bench" "$photos" 7 2 3 4 6 8 16
