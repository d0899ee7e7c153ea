#!/usr/bin/env bash
# Issue 10 §6: the loader on real photos against TurboJPEG's full decode of the same files and an
# FFCV-style baseline, one core pinned (taskset -c 1) and two threads, alternating the contenders round
# by round; prints medians, per-stage times and ratios. Every sample is decoded every epoch.
# The 500 ImageNet photos are unpacked into the build tree and those larger than 512 px shrunk first
# (PIL), so that `dsc build --max-resolution 512` stores every payload as it is (a pass-through) and
# the ceiling decodes the very images the loader reads.
# usage: bench/run_photos_bench.sh [BUILD_DIR] [ROUNDS] [EPOCHS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
rounds=${2:-5}
epochs=${3:-10}
work=$build/bench-work/photos
py=${DSC_PYTHON:-/usr/bin/python3}  # Debian's, with PIL (DSC_PYTHON: another with PIL)
mkdir -p "$work"
src=$work/src
if [ ! -f "$src/.done" ]; then
  rm -rf "$src" "$work/orig"
  mkdir -p "$work/orig" "$src"
  zstd -dc "$here/../shared/data/imagenet-photos-500.tar.zst" | tar -x -C "$work/orig"
  "$py" - "$work/orig/imagenet-photos-500" "$src" <<'PY'
import os, shutil, sys
from PIL import Image
src, dst = sys.argv[1:3]
shrunk = kept = 0
for root, _, files in os.walk(src):
    for f in files:
        p = os.path.join(root, f)
        q = os.path.join(dst, os.path.relpath(p, src))
        os.makedirs(os.path.dirname(q), exist_ok=True)
        im = Image.open(p)
        if max(im.size) > 512:
            s = 512 / max(im.size)
            size = (max(1, round(im.width * s)), max(1, round(im.height * s)))
            im.convert('RGB').resize(size, Image.BILINEAR).save(q, quality=90)
            shrunk += 1
        else:
            shutil.copyfile(p, q)
            kept += 1
print(f"photos: {shrunk} shrunk to 512 px, {kept} kept as they are")
PY
  rm -rf "$work/orig"
  touch "$src/.done"
fi
g++ -O2 -std=c++17 -o "$work/decode_ceiling" "$here/../shared/tools/decode_ceiling.cpp" -lturbojpeg
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
ips() { grep -o '[0-9.]* images/s' | awk '{print $1}'; }

# dsc build: images/s with 1 and 2 threads, restart-indexed (the default where the flag exists) and not.
variants=(default)
if [[ $("$build/dsc" build --help 2>&1) == *--restart-interval* ]]; then variants+=(none); fi  # not grep -q under pipefail
declare -A b
for i in $(seq "$rounds"); do
  for v in "${variants[@]}"; do
    extra=()
    [ "$v" = none ] && extra=(--restart-interval none)
    b[${v}_1]+="$(taskset -c 1 "$build/dsc" build "$src" "$work/$v.beton" --max-resolution 512 --threads 1 "${extra[@]}" --quiet | ips) "
    b[${v}_2]+="$("$build/dsc" build "$src" "$work/$v.beton" --max-resolution 512 --threads 2 "${extra[@]}" --quiet | ips) "
  done
done
file=$work/default.beton

# Loaders. dsc bench: median epoch after the first; --json keeps the per-stage times of the last round.
run_dsc() {  # name taskset-args... -- bench-args...
  local name=$1; shift
  local pin=()
  while [ "$1" != -- ]; do pin+=("$1"); shift; done
  shift
  "${pin[@]}" "$build/dsc" bench "$file" --batch-size 64 --epochs $((epochs + 1)) --json "$@" >"$work/$name.json"
  "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))["images_per_second"])' "$work/$name.json"
}
declare -A r
names=(ceiling_1 baseline_1 train_f32_1 train_u8_1 test_f32_1 test_u8_1 baseline_2 train_f32_2 test_f32_2)
for i in $(seq "$rounds"); do
  r[ceiling_1]+="$(taskset -c 1 "$work/decode_ceiling" "$src" "$epochs") "
  r[baseline_1]+="$(taskset -c 1 "$build/bench/photo_baseline" "$src" 1 $((epochs + 1))) "
  r[train_f32_1]+="$(run_dsc train_f32_1 taskset -c 1 -- --preset imagenet-train --threads 1) "
  r[train_u8_1]+="$(run_dsc train_u8_1 taskset -c 1 -- --preset imagenet-train --threads 1 --dtype uint8) "
  r[test_f32_1]+="$(run_dsc test_f32_1 taskset -c 1 -- --preset imagenet-test --threads 1) "
  r[test_u8_1]+="$(run_dsc test_u8_1 taskset -c 1 -- --preset imagenet-test --threads 1 --dtype uint8) "
  r[baseline_2]+="$("$build/bench/photo_baseline" "$src" 2 $((epochs + 1))) "
  r[train_f32_2]+="$(run_dsc train_f32_2 env -- --preset imagenet-train --threads 2) "
  r[test_f32_2]+="$(run_dsc test_f32_2 env -- --preset imagenet-test --threads 2) "
done
declare -A m
for k in "${names[@]}"; do m[$k]=$(echo ${r[$k]} | tr ' ' '\n' | median); done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "photos: $(find "$src" -type f -iname '*.jp*g' | wc -l) JPEGs; rounds: $rounds (medians), $epochs epochs each (+1 warm-up for the loaders)"
printf "%-40s %10s %12s\n" "contender (1 = one core pinned, 2 = two threads)" "images/s" "x ceiling"
for k in "${names[@]}"; do
  awk -v k="$k" -v v="${m[$k]}" -v c="${m[ceiling_1]}" 'BEGIN {printf "%-40s %10.0f %12.2f\n", k, v, v / c}'
done
awk -v t1="${m[train_f32_1]}" -v t2="${m[train_f32_2]}" -v s1="${m[test_f32_1]}" -v s2="${m[test_f32_2]}" \
    -v b1="${m[baseline_1]}" -v b2="${m[baseline_2]}" 'BEGIN {
  printf "two threads / one: imagenet-train %.2f, imagenet-test %.2f, baseline %.2f\n", t2 / t1, s2 / s1, b2 / b1 }'
echo "per-stage time per image (worker wall time), last round (dsc bench --json, epochs after the first):"
for k in train_f32_1 train_u8_1 test_f32_1 test_u8_1; do
  "$py" - "$work/$k.json" "$k" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
e = j["epochs"][1:]
n = sum(x["images_decoded"] for x in e)
f = lambda s: sum(x[s] for x in e) / n / 1e3
print(f"  {sys.argv[2]:<14} read {f('read_ns'):7.1f} us  decode {f('decode_ns'):7.1f} us  augment {f('augment_ns'):7.1f} us  ({n} decodes)")
PY
done
echo "dsc build (--max-resolution 512), images/s, medians:"
for v in "${variants[@]}"; do
  m1=$(echo ${b[${v}_1]} | tr ' ' '\n' | median)
  m2=$(echo ${b[${v}_2]} | tr ' ' '\n' | median)
  printf "  %-22s 1 thread %7.0f   2 threads %7.0f   file %d bytes\n" "restart-interval $v" "$m1" "$m2" "$(stat -c %s "$work/$v.beton")"
done
[ ${#variants[@]} -eq 1 ] && echo "  (this dsc has no --restart-interval: restart-indexed payloads are not in this build)"
exit 0
