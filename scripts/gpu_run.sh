#!/usr/bin/env bash
# Runs on the GPU machine, as run.sh inside the folder scripts/gpu_bundle.sh made (no network
# needed; nvcc 13, CMake >= 3.20, ninja and a C++20 compiler must be there; Python 3 with a CUDA
# PyTorch for dsc train):
#
#   bash run.sh                  # all steps: build test bench train
#   bash run.sh build test       # some of them
#   DSC_EPOCHS=24 bash run.sh train
#   DSC_CUDA_ARCHS=90 bash run.sh     # build for this GPU alone (minutes less nvcc time)
#   DSC_SANITIZE=1 bash run.sh test   # also run the GPU tests under compute-sanitizer memcheck
#   DSC_TARGETS="dsc dsc-train gpu_decode_test" bash run.sh build   # only these (default: all)
#   DSC_SUITE=0 bash run.sh test      # the GPU test binaries only, not the rest of the unit suite
#   bash run.sh build python          # `import dsc` built for the machine's python3 (pybind11 from pip),
#                                     # its pytest suite run there (pin_memory pins with a GPU)
#
# Builds dsc with CUDA against the bundled Debian headers and libraries (deps/) and, for dsc train,
# the PyTorch that `python3 -c 'import torch; print(torch.utils.cmake_prefix_path)'` names (Debian's
# libtorch is CPU-only). Runs the GPU tests and the rest of the unit suite, `dsc bench` (with
# `--decoder gpu` when this dsc has it) and `dsc train --device cuda`. Writes what it saw to $OUT
# (when set) or results/: env.txt, build.log, tests.txt, bench.txt, train.txt, train.json.
# Run on H100 and H200 machines (PyTorch 2.11, GCC 13, no network): bench/RESULTS.md, "On a GPU (H100, H200)".
set -uo pipefail
B=$(cd "$(dirname "$0")" && pwd)
SRC=${DSC_SRC:-$B/src}
WORK=${DSC_WORK:-$B/work}
RES=${OUT:-$B/results}
EPOCHS=${DSC_EPOCHS:-4}
JOBS=${DSC_JOBS:-$(nproc)}
steps=("$@")
[ ${#steps[@]} -eq 0 ] && steps=(build test bench train python)
step() { echo "$(date -u +%T) $*" >>"$RES/steps.txt"; }
want() { local s; for s in "${steps[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }
mkdir -p "$WORK" "$RES"
deps=$B/deps
libs=$deps/usr/lib/x86_64-linux-gnu:$deps/lib/x86_64-linux-gnu
status=0
fail() { echo "FAILED: $*" | tee -a "$RES/env.txt"; status=1; }

# The bundled pkgconf needs its own library; nothing else runs with the bundle's libraries on
# LD_LIBRARY_PATH (they could shadow the machine's for Python and PyTorch). dsc's binaries find them
# through the RPATH CMake gives the build tree.
pkgconfig=$(command -v pkg-config || true)
if [ -z "$pkgconfig" ]; then
  pkgconfig=$WORK/pkg-config
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$deps/usr/bin/pkgconf" >"$pkgconfig"
  chmod +x "$pkgconfig"
fi
# Tools the tests call by name (zstd to unpack CIFAR-10, jpegtran and cjpeg for fixtures): the bundled
# ones, each with the bundle's libraries, where the machine has none.
mkdir -p "$WORK/bin"
for tool in zstd jpegtran cjpeg djpeg; do
  command -v "$tool" >/dev/null && continue
  printf '#!/bin/sh\nLD_LIBRARY_PATH=%s exec %s "$@"\n' "$libs" "$deps/usr/bin/$tool" >"$WORK/bin/$tool"
  chmod +x "$WORK/bin/$tool"
done
export PATH=$WORK/bin:$PATH
export PKG_CONFIG_PATH=$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig
nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
torch_prefix=$(python3 -c 'import torch; print(torch.utils.cmake_prefix_path)' 2>/dev/null || true)
build=$WORK/build
dsc=$build/dsc

{
  date -u
  uname -a
  nvidia-smi 2>&1 | head -20
  "$nvcc" --version 2>&1 | tail -2
  cmake --version | head -1
  python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())' 2>&1
  echo "torch cmake prefix: ${torch_prefix:-none}"
} >"$RES/env.txt" 2>&1

# Debian keeps jconfig.h (libjpeg's version and struct sizes) in the multiarch folder: without it
# first, jpeglib.h would pick up the machine's own and disagree with the bundled libjpeg.so.62.
inc="-isystem $deps/usr/include/x86_64-linux-gnu -isystem $deps/usr/include"
args=(-S "$SRC" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_COMPILER="$nvcc"
      -DCMAKE_PREFIX_PATH="$deps/usr;${torch_prefix}" -DCMAKE_CXX_FLAGS="$inc" -DCMAKE_C_FLAGS="$inc"
      -DPKG_CONFIG_EXECUTABLE="$pkgconfig" -DDSC_SHARED_DATA="$B/data"
      ${DSC_CUDA_ARCHS:+-DCMAKE_CUDA_ARCHITECTURES=$DSC_CUDA_ARCHS})

if want build; then
  step build
  if ! cmake "${args[@]}" >"$RES/build.log" 2>&1; then
    echo "configure with PyTorch failed; again without dsc train" >>"$RES/build.log"
    rm -rf "$build"
    cmake "${args[@]}" -DDSC_WITH_TORCH=OFF >>"$RES/build.log" 2>&1 || fail "configure (see build.log)"
  fi
  # NCCL's headers come from PyTorch's wheels and are compiled here alone: should they fail to build,
  # dsc train is rebuilt without NCCL (single-rank) rather than losing the rest of the run.
  if ! ninja -C "$build" -j "$JOBS" ${DSC_TARGETS:-} >>"$RES/build.log" 2>&1; then
    if grep -q "dsc train has c10d NCCL" "$RES/build.log"; then
      fail "build with NCCL (see build.log); building again without it"
      sed -i 's/dsc train has c10d NCCL/(not built) dsc train with c10d NCCL/' "$RES/build.log"
      cmake "${args[@]}" -DDSC_WITH_NCCL=OFF >>"$RES/build.log" 2>&1 &&
        ninja -C "$build" -j "$JOBS" ${DSC_TARGETS:-} >>"$RES/build.log" 2>&1 || fail "build (see build.log)"
    else
      fail "build (see build.log)"
    fi
  fi
  grep -E "^-- dsc:" "$RES/build.log" >>"$RES/env.txt"
fi

if want test; then
  step test
  {
    "$dsc" --version 2>&1
    # The GPU tests first, each binary whole (they skip nothing when a GPU is usable)...
    # (distributed_test: its NCCL case forms a group of one on this GPU; its Gloo cases need gloo headers.)
    for t in "$build"/tests/*gpu* "$build"/tests/*cuda* "$build"/tests/amp_test "$build"/tests/distributed_test; do
      [ -x "$t" ] || continue
      echo "== $(basename "$t")"
      (cd "$build" && "$t") 2>&1 | tail -40 || fail "$(basename "$t")"
    done
    if [ "${DSC_SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
      for t in "$build"/tests/*gpu*; do
        [ -x "$t" ] || continue
        echo "== compute-sanitizer memcheck $(basename "$t")"
        (cd "$build" && compute-sanitizer --tool memcheck --error-exitcode 1 "$t") 2>&1 | tail -15 ||
          fail "compute-sanitizer $(basename "$t")"
      done
    fi
    # ...then the unit suite, less the slow CPU-training and Python-matrix tests.
    # (Fuzz seeds and the photo tests need what the bundle leaves out: CI runs them.)
    skip='Train\.|Matrix\.|Install\.|Fuzz\.'
    # The tests that unpack the photos (resample, crop, restart, twin) need an archive the bundle leaves out.
    # A bundle holds a subset of them at most (data/photos-subset): the GPU binaries above use it.
    [ -e "$B/data/imagenet-photos-500.tar.zst" ] && [ ! -e "$B/data/photos-subset" ] ||
      skip="$skip|Photo|Resample\.|JpegCrop\.|Restart\.|JpegTwin\.|GpuCrop\."
    [ "${DSC_SUITE:-1}" = 0 ] || ctest --test-dir "$build" -j "$JOBS" -E "$skip" --output-on-failure 2>&1 | tail -60
  } >"$RES/tests.txt" 2>&1
  grep -q "FAILED" "$RES/tests.txt" && fail "tests (see tests.txt)"
fi

if want bench || want train; then
  if [ ! -e "$WORK/test.beton" ]; then
    mkdir -p "$WORK/cifar10"
    zstd -dc "$B/data/cifar10-jpg.tar.zst" | tar -x -C "$WORK/cifar10"
    "$dsc" build "$WORK/cifar10" "$WORK/train.beton" >/dev/null && "$dsc" build "$WORK/cifar10" "$WORK/test.beton" --split test >/dev/null ||
      fail "dsc build"
  fi
fi

if want bench; then
  step bench
  {
    "$dsc" bench "$WORK/train.beton" --preset cifar-train --epochs 3 --threads auto
    if [[ $("$dsc" bench --help 2>&1) == *--decoder* ]]; then  # not grep -q: under pipefail its early exit (SIGPIPE to dsc) read as "no"
      "$dsc" bench "$WORK/train.beton" --preset cifar-train --epochs 3 --threads auto --decoder gpu
    else
      echo "(this dsc has no --decoder: no GPU decode to measure)"
    fi
    # Photos (the bundle's subset, built as the issue asks): the GPU decoder's rate and its host staging
    # per photo (twin_stage_us_per_staged), on 2 loader threads and on 1.
    if [ -e "$B/data/imagenet-photos-500.tar.zst" ] && [[ $("$dsc" bench --help 2>&1) == *--decoder* ]]; then
      if [ ! -e "$WORK/photos.beton" ]; then
        mkdir -p "$WORK/photos"
        zstd -dc "$B/data/imagenet-photos-500.tar.zst" | tar -x -C "$WORK/photos"
        "$dsc" build "$WORK/photos/imagenet-photos-500" "$WORK/photos.beton" --max-resolution 512 >/dev/null || fail "dsc build photos"
      fi
      for preset in imagenet-train imagenet-test; do
        for threads in 2 1; do
          echo "== photos $preset --decoder gpu --threads $threads"
          "$dsc" bench "$WORK/photos.beton" --preset $preset --decoder gpu --threads $threads --epochs 6 --batch-size 64 --json \
            >"$WORK/photos.json" && grep -E '"(images_per_second|twin_stage_us_per_staged|cpu_us_per_image)"' "$WORK/photos.json"
        done
      done
      # The list transforms on the CPU workers against the same list deferred to the GPU (Batch::steps).
      for decoder in cpu gpu; do
        echo "== photos imagenet-train + rand_augment(2,9) --decoder $decoder --threads 1"
        "$dsc" bench "$WORK/photos.beton" --preset imagenet-train --transforms "rand_augment(2,9)" --decoder $decoder \
          --threads 1 --epochs 4 --batch-size 64 --json >"$WORK/photos.json" &&
          grep -E '"(images_per_second|cpu_us_per_image)"' "$WORK/photos.json"
      done
    fi
  } >"$RES/bench.txt" 2>&1 || fail "dsc bench (see bench.txt)"
fi

if want train; then
  step train
  {
    # The default precision (bf16 on sm_80+), then fp16 with loss scaling for one epoch.
    "$dsc" train "$WORK/train.beton" --test "$WORK/test.beton" --device cuda --epochs "$EPOCHS" \
      --loader-threads "$(( JOBS > 4 ? JOBS - 2 : 2 ))" --json "$RES/train.json"
    "$dsc" train "$WORK/train.beton" --test "$WORK/test.beton" --device cuda --epochs 1 --precision fp16 \
      --loader-threads "$(( JOBS > 4 ? JOBS - 2 : 2 ))"
    # The same training through an NCCL group (of one rank on a one-GPU machine): the collectives' cost.
    if [[ $("$dsc" train --help 2>&1) == *--dist-backend* ]] && grep -q "dsc train has c10d NCCL" "$RES/env.txt"; then
      "$dsc" train "$WORK/train.beton" --test "$WORK/test.beton" --device cuda --epochs "$EPOCHS" --dist-backend nccl \
        --loader-threads "$(( JOBS > 4 ? JOBS - 2 : 2 ))" --json "$RES/train-nccl.json"
    fi
  } >"$RES/train.txt" 2>&1 || fail "dsc train (see train.txt)"
fi

if want python; then
  step python
  {
    # Configured here, not in the build step, so that a pybind11 that does not fit fails this step
    # alone.
    py=$(command -v python3)
    pybind11_dir=$(python3 -c 'import pybind11; print(pybind11.get_cmake_dir())' 2>/dev/null || true)
    if [ -n "$pybind11_dir" ] &&
       cmake "${args[@]}" -DPython3_EXECUTABLE="$py" -DPython_EXECUTABLE="$py" \
         -Dpybind11_DIR="$pybind11_dir" >>"$RES/build.log" 2>&1 &&
       ninja -C "$build" -j "$JOBS" dsc_python dsc_testdata dsc >>"$RES/build.log" 2>&1; then
      # `import dsc` alone first, with the head of any crash report: a crash at import (e.g. two
      # libstdc++ copies, one static in the module) then shows apart from the suite's failures.
      PYTHONPATH=$build/python python3 -X faulthandler -c 'import torch, PIL.Image, dsc; print("import dsc:", dsc.__file__)' 2>&1 | head -30
      ctest --test-dir "$build" -R "Python\." --output-on-failure 2>&1  # whole: a crash report leads, the failed tests end it
      # The test that needs a GPU, by name, with its verdict (ctest shows only failures).
      (cd "$build" && PYTHONPATH=$build/python DSC_TESTDATA=$build/testdata DSC_BINARY=$dsc \
        python3 -m pytest -q -p no:cacheprovider -rs "$SRC/python/tests/test_module.py" -k pin_memory 2>&1 | tail -8)
    else
      echo "no Python module here (pybind11 or python3-dev missing; see build.log)"
    fi
  } >"$RES/python.txt" 2>&1
  grep -qE "tests failed|[0-9]+ failed" "$RES/python.txt" && fail "python (see python.txt)"
fi

step done
echo "results in $RES: $(ls "$RES" | tr '\n' ' ')"
exit $status
