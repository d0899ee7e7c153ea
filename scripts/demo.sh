#!/usr/bin/env bash
# The main job end to end: set up, build dsc, compile a dataset into one file, check it, benchmark the
# loader on it. With no argument the dataset is generated (10 classes of 32x32 JPEGs).
# usage: scripts/demo.sh [SRC]   SRC: a CIFAR-10/100 download folder, a class-per-folder tree, or a manifest
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
bash "$root/scripts/install-deps.sh"
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$build" --target dsc
dsc=$build/dsc
work=$build/demo
mkdir -p "$work"
src=${1:-}
if [ -z "$src" ]; then
  src=$work/synthetic
  [ -d "$src" ] || "$dsc" generate "$src" --classes 10 --train 5000 --test 1000
fi
"$dsc" build "$src" "$work/train.beton"
"$dsc" info "$work/train.beton" | sed -n 1,20p  # sed reads it all: head would end dsc info with SIGPIPE (exit 141 under pipefail)
"$dsc" verify "$work/train.beton"
"$dsc" bench "$work/train.beton" --preset cifar-train --epochs 3
