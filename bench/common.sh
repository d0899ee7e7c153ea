# Sourced by the bench scripts: folders, and the real CIFAR-10 unpacked into the build tree.
# Expects $1 = BUILD_DIR (optional) and sets here, build, data, work.
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
data=$build/testdata/cifar10
work=$build/bench-work
mkdir -p "$work"
[ -f "$data/.unpacked" ] || sh "$here/tests/unpack_cifar.sh" "$here/../shared/data/cifar10-jpg.tar.zst" "$data"
