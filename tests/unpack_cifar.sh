#!/bin/sh
# usage: unpack_cifar.sh ARCHIVE DEST  — unpacks the real CIFAR-10 JPEG tree for the tests.
set -eu
mkdir -p "$2"
zstd -dc "$1" | tar -x -C "$2"
touch "$2/.unpacked"
