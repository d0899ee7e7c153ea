#!/usr/bin/env bash
# Crop-aware JPEG decode (bench/crop_decode_bench.cc) on the 500 ImageNet photos, given restart markers
# by jpegtran (lossless) every T MCUs (the divisor of the MCUs per row nearest T; default 4), one core.
#   bench/run_crop_bench.sh [BUILD_DIR] [T] [passes]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
target=${2:-4}
passes=${3:-5}
src=$build/bench-work/photos
dst=$build/bench-work/photos-rst$target
if [ ! -e "$src/.unpacked" ]; then
  mkdir -p "$src"
  zstd -dc "$here/../shared/data/imagenet-photos-500.tar.zst" | tar -x -C "$src"
  touch "$src/.unpacked"
fi
if [ ! -e "$dst/.done" ]; then
  mkdir -p "$dst"
  # The interval per image: MCUs per row from the sampling factors (PIL's layer), nearest divisor to T.
  /usr/bin/python3 - "$src" "$dst" "$target" <<'PY'
import os, subprocess, sys
from PIL import Image
src, dst, t = sys.argv[1], sys.argv[2], int(sys.argv[3])
for root, _, files in os.walk(src):
    for f in sorted(files):
        if not f.endswith('.JPEG'):
            continue
        im = Image.open(os.path.join(root, f))
        hmax = max(l[1] for l in im.layer) if len(im.layer) > 1 else 1
        mpr = -(-im.size[0] // (8 * hmax))
        n = min((d for d in range(1, mpr + 1) if mpr % d == 0), key=lambda d: (abs(d - t), d))
        subprocess.run(['jpegtran', '-restart', '%dB' % n, '-optimize', '-copy', 'none',
                        '-outfile', os.path.join(dst, f), os.path.join(root, f)], check=True)
PY
  touch "$dst/.done"
fi
taskset -c 1 "$build/bench/crop_decode_bench" "$dst" "$passes"
