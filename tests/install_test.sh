#!/bin/sh
# Installs dsc into a scratch prefix, builds tests/consumer against it with find_package(dsc), and
# runs it on a freshly built file; with gRPC, also a remote-only loader (dsc::remote) against the
# installed `dsc serve`. usage: install_test.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
work=$build/testdata/scratch/install
rm -rf "$work"
mkdir -p "$work"
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/dsc" generate "$work/data" --classes 3 --train 40 --test 0 >/dev/null
"$work/prefix/bin/dsc" build "$work/data" "$work/f.beton" --quiet >/dev/null
torch=OFF
[ -x "$build/dsc-train" ] && torch=ON
cmake -S "$src/tests/consumer" -B "$work/consumer" -G Ninja -DCMAKE_PREFIX_PATH="$work/prefix" -DDSC_EXPECT_TORCH=$torch >/dev/null
cmake --build "$work/consumer" >/dev/null
test "$("$work/consumer/consumer" "$work/f.beton")" = 120
# Every installed header compiles on its own (torch_adapter.h needs libtorch's include paths: not here).
find "$work/prefix/include/dsc" -name '*.h' ! -name torch_adapter.h | sort |
  xargs -P 2 -I H sh -c 'printf "#include \"%s\"\n" "H" | c++ -std=c++20 -fsyntax-only -x c++ -I "$0" - || { echo "not self-contained: H"; exit 255; }' \
  "$work/prefix/include/dsc"
if [ -x "$work/consumer/remote_consumer" ]; then
  "$work/prefix/bin/dsc" serve "$work/f.beton" --threads 1 > "$work/serve.out" &
  serve=$!
  trap 'kill $serve 2>/dev/null || true' EXIT
  for _ in $(seq 200); do grep -q "listening on" "$work/serve.out" && break; sleep 0.1; done
  addr=$(sed -n 's/^listening on //p' "$work/serve.out")
  test -n "$addr"
  # 120 samples, every one decoded by the worker (the last batch of 100 is padded: 200 sent)
  test "$("$work/consumer/remote_consumer" "$work/f.beton" "$addr")" = "120 200"
  echo "installed dsc::remote works"
fi
echo "installed package works"
