# Sourced by the bench scripts: folders, and the real CIFAR-10 unpacked into the build tree.
# Expects $1 = BUILD_DIR (optional) and sets here, build, data, work.
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
data=$build/testdata/cifar10
work=$build/bench-work
mkdir -p "$work"
[ -f "$data/.unpacked" ] || sh "$here/tests/unpack_cifar.sh" "$here/../shared/data/cifar10-jpg.tar.zst" "$data"

# The remote benches' files in $rw (set here): CIFAR-10's train split and the 500 ImageNet photos at
# most 512 px a side, built with the dsc binary $1 when missing.
remote_files() {
  rw=$work/remote
  mkdir -p "$rw"
  [ -f "$rw/cifar.beton" ] || "$1" build "$data/train" "$rw/cifar.beton" --quiet
  if [ ! -f "$rw/photos.beton" ]; then
    rm -rf "$rw/orig" && mkdir -p "$rw/orig"
    zstd -dc "$here/../shared/data/imagenet-photos-500.tar.zst" | tar -x -C "$rw/orig"
    "$1" build "$rw/orig/imagenet-photos-500" "$rw/photos.beton" --max-resolution 512 --quiet
    rm -rf "$rw/orig"
  fi
}
