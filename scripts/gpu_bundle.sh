#!/usr/bin/env bash
# Makes a self-contained folder for a GPU machine that is not Debian 12 and has no network (but has
# nvcc 13, CMake, ninja, a C++20 compiler and, for dsc train, Python 3 with a CUDA PyTorch):
#
#   scripts/gpu_bundle.sh [DIR]        # default: gpu-bundle/ in the repo (ignored by git)
#   ... copy DIR to the GPU machine ...
#   bash DIR/run.sh                    # configure, build, CUDA tests, dsc bench, dsc train
#
# DIR holds: deps/ (Debian packages unpacked with dpkg -x, never into /: headers, libraries,
# pkg-config files made relocatable, GoogleTest, cxxopts, pkgconf), src/ (this working tree's
# tracked and untracked-not-ignored files), data/ (cifar10-jpg.tar.zst and a subset of the photos), and run.sh
# (scripts/gpu_run.sh). Debian's libtorch is CPU-only and is not bundled: run.sh builds dsc train
# against the PyTorch it finds there.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
out=${1:-$repo/gpu-bundle}
data=${DSC_SHARED_DATA:-$repo/../shared/data}
case "$out" in /|/usr|/usr/*|/lib*|/etc*) echo "gpu_bundle.sh: refusing to write into $out" >&2; exit 2 ;; esac

# Build and test dependencies, with the runtime libraries they link to (the GPU machine may lack
# them) and pkgconf (CMake's FindPkgConfig needs a pkg-config program).
pkgs=(libturbojpeg0 libturbojpeg0-dev libjpeg62-turbo libjpeg62-turbo-dev libzstd1 libzstd-dev libxxhash0 libxxhash-dev
      libpng16-16 libpng-dev zlib1g zlib1g-dev libcxxopts-dev libgtest-dev libgmock-dev googletest
      pkgconf pkgconf-bin libpkgconf3 zstd libjpeg-turbo-progs)

rm -rf "$out"
mkdir -p "$out/debs" "$out/deps" "$out/data"
sandbox=()
[ "$(id -u)" -eq 0 ] && sandbox=(-o APT::Sandbox::User=root)  # _apt cannot write into the repo
(cd "$out/debs" && apt-get "${sandbox[@]}" download "${pkgs[@]}" >/dev/null)
for d in "$out"/debs/*.deb; do dpkg -x "$d" "$out/deps"; done
rm -rf "$out/debs" "$out/deps/usr/share/doc" "$out/deps/usr/share/man" "$out/deps/usr/share/lintian"

# Absolute symlinks (libz.so -> /lib/...) would point into the GPU machine's own tree: make them
# relative inside deps/.
while IFS= read -r link; do
  target=$(readlink "$link")
  case "$target" in
    /*) if [ -e "$out/deps$target" ]; then ln -sfn "$(realpath --relative-to="$(dirname "$link")" "$out/deps$target")" "$link"; fi ;;
  esac
done < <(find "$out/deps" -type l)

# pkg-config files say prefix=/usr: make every /usr path relative to the .pc file's own folder.
while IFS= read -r pc; do
  up=$(realpath --relative-to="$(dirname "$pc")" "$out/deps/usr")
  sed -i -E "s#^([A-Za-z_]+)=/usr(/|\$)#\\1=\${pcfiledir}/$up\\2#" "$pc"
done < <(find "$out/deps" -name '*.pc')
# Debian's libzstd.pc says libdir=/usr/lib (the linker finds it there anyway): the multiarch files'
# libraries are beside their pkgconfig/ folder.
sed -i -E 's#^libdir=.*#libdir=${pcfiledir}/..#' "$out"/deps/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc

# The source: what git tracks plus untracked files it does not ignore (the bundle itself is ignored).
mkdir -p "$out/src"
(cd "$repo" && git ls-files -co --exclude-standard -z | tar --null -T - -cf -) | tar -xf - -C "$out/src"
cp "$repo/scripts/gpu_run.sh" "$out/run.sh"
chmod +x "$out/run.sh"
cp "$data/cifar10-jpg.tar.zst" "$out/data/"
# The GPU crop tests need photos, and the whole archive (54 MB) does not fit: the first
# DSC_BUNDLE_PHOTOS of them (default 150, about 16 MB), under the archive's own name so the tests find
# it, and a marker saying it is a subset (gpu_run.sh then skips the tests that count all 500).
nphotos=${DSC_BUNDLE_PHOTOS:-150}
if [ "$nphotos" -gt 0 ] && [ -e "$data/imagenet-photos-500.tar.zst" ]; then
  tmp=$(mktemp -d)
  zstd -dc "$data/imagenet-photos-500.tar.zst" | tar -x -C "$tmp"
  (cd "$tmp" && find imagenet-photos-500 -type f | sort | head -n "$nphotos" >list &&
   tar -cf - -T list | zstd -q -19 -o "$out/data/imagenet-photos-500.tar.zst")
  rm -rf "$tmp"
  echo "$nphotos" >"$out/data/photos-subset"
fi

size=$(du -sm "$out" | cut -f1)
echo "gpu bundle: $out (${size} MiB): ${#pkgs[@]} packages, src/, data/ ($(ls "$out/data" | tr '\n' ' ')), run.sh"
if [ "$size" -ge 60 ]; then
  echo "gpu_bundle.sh: the bundle is ${size} MiB, over the 60 MiB it must stay under" >&2
  exit 1
fi
