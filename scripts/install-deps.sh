#!/usr/bin/env bash
# Installs what dsc needs to build and test, from Debian/Ubuntu packages (skips apt when all are there).
set -euo pipefail
pkgs=(build-essential cmake ninja-build pkg-config zstd python3-numpy python3-pil
      libjpeg-turbo-progs           # cjpeg/jpegtran: unusual-JPEG fixtures for the input matrix
      valgrind                      # libjpeg's own memory errors (it is not built with the sanitizers)
      libturbojpeg0-dev libjpeg62-turbo-dev libzstd-dev libxxhash-dev libpng-dev libcxxopts-dev
      libgtest-dev libgmock-dev
      nlohmann-json3-dev            # JSON sources (COCO, JSON Lines manifests)
      libarchive-dev                # WebDataset tar shards as a build source
      clang-14 libclang-rt-14-dev   # libFuzzer (scripts/fuzz.sh)
      libtorch-dev                  # the torch adapter and dsc train (CPU-only libtorch 1.13)
      libgloo-dev                   # headers of c10d's Gloo process group (dsc train on several ranks)
      python3-dev pybind11-dev python3-pytest python3-torch python3-torchvision  # import dsc and its tests
      python3-setuptools python3-wheel python3-pip python3-venv  # pip install --no-build-isolation .
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl)  # dsc serve, remote workers
# Ubuntu names libjpeg-turbo's libjpeg API package differently.
if ! apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1 && apt-cache show libjpeg-turbo8-dev >/dev/null 2>&1; then
  pkgs=("${pkgs[@]/libjpeg62-turbo-dev/libjpeg-turbo8-dev}")
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
