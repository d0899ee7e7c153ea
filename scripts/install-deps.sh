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
      libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc openssl  # dsc serve, remote workers
      libcurl4-openssl-dev libssl-dev nginx-light  # streaming from URLs (stream/), and the real server its tests start
      libarchive-dev)  # WebDataset tar shards as a dsc build source
# Ubuntu names libjpeg-turbo's libjpeg API package differently.
if ! apt-cache show libjpeg62-turbo-dev >/dev/null 2>&1 && apt-cache show libjpeg-turbo8-dev >/dev/null 2>&1; then
  pkgs=("${pkgs[@]/libjpeg62-turbo-dev/libjpeg-turbo8-dev}")
fi
# s3rver (npm, where npm is installed): the S3 loopback test (tests/stream_test.cc skips without it).
if command -v npm >/dev/null 2>&1 && [ ! -e "$(npm root -g 2>/dev/null)/s3rver/bin/s3rver.js" ]; then
  npm install -g --silent s3rver >/dev/null 2>&1 || echo "note: npm install -g s3rver failed: the S3 loopback test will be skipped"
fi
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
[ ${#missing[@]} -eq 0 ] && exit 0
sudo=""
[ "$(id -u)" -ne 0 ] && sudo=sudo
echo "installing: ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
