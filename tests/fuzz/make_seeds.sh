#!/bin/sh
# Seed corpus for the fuzz targets, made from the real CIFAR-10 in the build tree (never committed).
# usage: make_seeds.sh DSC CIFAR_ROOT OUT
set -eu
dsc=$1
cifar=$2
out=$3
rm -rf "$out"
mkdir -p "$out/open" "$out/load" "$out/pickle" "$out/sources" "$out/reply" "$out/tmp/tree/a" "$out/tmp/tree/b"
i=0
for f in $(ls "$cifar/train/cat" | head -3); do cp "$cifar/train/cat/$f" "$out/tmp/tree/a/"; done
for f in $(ls "$cifar/train/dog" | head -2); do cp "$cifar/train/dog/$f" "$out/tmp/tree/b/"; done
for enc in default raw raw-zstd; do
  "$dsc" build "$out/tmp/tree" "$out/open/$enc.beton" --encoding $enc --block-size 4096 --quiet >/dev/null
  cp "$out/open/$enc.beton" "$out/load/$enc.beton"
done
"$dsc" build "$out/tmp/tree" "$out/load/inline.beton" --jpeg-tables inline --quiet >/dev/null
# Restart markers every MCU: RandomResizedCrop then decodes only the intervals it needs (kernels/jpeg_crop.h).
mkdir -p "$out/tmp/rst/a"
for f in "$out"/tmp/tree/a/*.jpg; do jpegtran -restart 1B -outfile "$out/tmp/rst/a/$(basename "$f")" "$f"; done
"$dsc" build "$out/tmp/rst" "$out/load/restart1.beton" --quiet >/dev/null
# A format 1.1 file: JPEGs large enough for restart markers, so the optional-section table and the
# restart section are there to mutate.
"$dsc" generate "$out/tmp/gen" --classes 2 --train 2 --test 0 --size 160 >/dev/null
"$dsc" build "$out/tmp/gen" "$out/open/restart.beton" --block-size 4096 --quiet >/dev/null
cp "$out/open/restart.beton" "$out/load/restart.beton"
# A format 1.2 file (typed fields): every kind of field, the columns and varsizes sections to mutate.
ls "$out"/tmp/tree/a/*.jpg | head -3 | {
  n=0
  while read -r f; do
    n=$((n + 1))
    printf '{"image": "%s", "label": %d, "score": %d.5, "flag": true, "boxes": [[1, 2, 3, 4]%s], "ids": [%d], "caption": "c%d"}\n' \
      "$f" $((n % 2)) $n "$( [ $n -gt 1 ] && echo ', [5, 6, 7, 8]')" $n $n
  done
} > "$out/tmp/typed.jsonl"
"$dsc" build "$out/tmp/typed.jsonl" "$out/open/typed.beton" --block-size 4096 --quiet >/dev/null
cp "$out/open/typed.beton" "$out/load/typed.beton"
# A format 1.3 file (further images): a second column of image paths, a descriptor column to mutate.
ls "$out"/tmp/tree/a/*.jpg | head -3 | while read -r f; do printf '{"image": "%s", "side": "%s"}\n' "$f" "$f"; done > "$out/tmp/images.jsonl"
"$dsc" build "$out/tmp/images.jsonl" "$out/open/images.beton" --block-size 4096 --quiet >/dev/null
cp "$out/open/images.beton" "$out/load/images.beton"
# A typed file with masks (field type 8) in both stored encodings, which the loader decodes and moves
# with the image: runs (a smooth mask) and PNG (a noisy one, whose runs would be bigger).
mkdir -p "$out/tmp/seg/img" "$out/tmp/seg/mask"
cp "$out"/tmp/tree/a/*.jpg "$out/tmp/seg/img/"
/usr/bin/python3 - "$out/tmp/seg" <<'PY'
import os, random, sys
from PIL import Image
d = sys.argv[1]
for i, f in enumerate(sorted(os.listdir(os.path.join(d, "img")))):
    w, h = Image.open(os.path.join(d, "img", f)).size
    if i % 2:
        m = Image.frombytes("L", (w, h), random.Random(i).randbytes(w * h))
    else:
        m = Image.new("P", (w, h), 0)
        m.paste(i + 1, (2, 3, w // 2, h - 4))
    m.save(os.path.join(d, "mask", os.path.splitext(f)[0] + ".png"))
PY
"$dsc" build "$out/tmp/seg/img" "$out/open/mask.beton" --masks "$out/tmp/seg/mask" --block-size 4096 --quiet >/dev/null
cp "$out/open/mask.beton" "$out/load/mask.beton"
# sources: first byte picks the parser (fuzz_sources.cc): 4 = JPEG or PNG, 0 = CIFAR-10 binary, 3 = manifest, 2 = pickle
for f in "$out"/tmp/tree/a/*.jpg; do
  i=$((i + 1))
  { printf '\004'; cat "$f"; } > "$out/sources/jpeg$i"
done
"$dsc" export "$out/open/default.beton" --index 0 --count 2 --out "$out/tmp/ppm" --ppm >/dev/null
"$dsc" export "$out/open/default.beton" --index 0 --count 1 --out "$out/tmp/png" >/dev/null
{ printf '\004'; cat "$out/tmp/png/00000000.png"; } > "$out/sources/png1"
/usr/bin/python3 - "$out" <<'PY'
import os, pickle, sys
out = sys.argv[1]
def pixels(name):
    b = open(os.path.join(out, "tmp/ppm", name), "rb").read()
    hwc = b[b.index(b"255\n") + 4:]
    return bytes(hwc[i * 3 + c] for c in range(3) for i in range(1024))  # CIFAR's planar layout
imgs = [pixels("00000000.ppm"), pixels("00000001.ppm")]
open(os.path.join(out, "sources/cifar_bin"), "wb").write(b"\x00" + b"".join(bytes([3]) + p for p in imgs))
open(os.path.join(out, "sources/manifest"), "wb").write(b"\x03# path\tlabel\na.jpg\t1\nb/c.jpg\t0\n")
import numpy as np
d = {b"data": np.frombuffer(b"".join(imgs), dtype=np.uint8).reshape(2, 3072), b"labels": [3, 5], b"batch_label": b"seed"}
for proto in (2, 4, 5):
    blob = pickle.dumps(d, protocol=proto)
    open(os.path.join(out, "pickle/p%d" % proto), "wb").write(blob)
    open(os.path.join(out, "sources/pickle%d" % proto), "wb").write(b"\x02" + blob)
# reply: a split byte (fuzz_reply.cc), then a ProcessReply as a worker writes it (remote/codec.cc).
def varint(v):
    b = bytearray()
    while v >= 0x80:
        b.append(v & 0x7f | 0x80)
        v >>= 7
    return bytes(b + bytes([v]))
def field(n, payload):
    return varint(n << 3 | 2) + varint(len(payload)) + payload
params = bytes(range(52)) * 2
plain = varint(2 << 3) + varint(2 * 48) + field(4, params) + field(6, bytes(96))
forms = varint(1 << 3) + b"\x01" + varint(2 << 3) + varint(1024 + 3072) + field(4, params) + field(5, b"\x01\x00") + field(6, bytes(40))
for name, step, body in (("plain", 0, plain), ("plain7", 6, plain), ("forms", 16, forms), ("error", 3, field(3, b"a damaged sample"))):
    open(os.path.join(out, "reply", name), "wb").write(bytes([step]) + body)
PY
# ffcv: FFCV files laid out from docs/ffcv-format.md (every field type, mixed JPEG/raw, interleaved pages).
mkdir -p "$out/ffcv"
for chunk in 1 4; do
  /usr/bin/python3 "$(dirname "$0")/../ffcv/ffcv_ref.py" write "$out/tmp/ffcv$chunk.beton" 8192 $chunk
  cp "$out/tmp/ffcv$chunk.beton" "$out/ffcv/"
done
# jpegseek: JPEGs without restart markers, CIFAR-10's (32x32) and generated ones (160x160).
mkdir -p "$out/jpegseek"
cp "$out"/tmp/tree/a/*.jpg "$out/jpegseek/"
find "$out/tmp/gen" -name '*.jpg' | head -3 | while read -r f; do cp "$f" "$out/jpegseek/gen-$(basename "$f")"; done
rm -rf "$out/tmp"
echo "seed corpus in $out"
