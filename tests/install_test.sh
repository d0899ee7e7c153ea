#!/bin/sh
# Installs dsc into a scratch prefix, builds tests/consumer against it with find_package(dsc), and
# runs it on a freshly built file. usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
work=$build/testdata/scratch/install
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/dsc" generate "$work/data" --classes 3 --train 40 --test 0 >/dev/null
"$work/prefix/bin/dsc" build "$work/data" "$work/f.beton" --quiet >/dev/null
cmake -S "$src/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" >/dev/null
cmake --build "$work/consumer" >/dev/null
test "$("$work/consumer/consumer" "$work/f.beton")" = 120
echo "installed package works"
