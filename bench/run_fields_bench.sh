#!/usr/bin/env bash
# Issue 56 §5: what typed fields cost per sample over the image alone, on one core.
# Data: the 500 ImageNet photos (those over 512 px shrunk first, PIL, so the build passes every JPEG
# through), each given 1-50 synthetic boxes (x, y, w, h inside the image) with category ids, and a
# fixed float32[256] (1 KiB) array; three files built from JSON Lines tables of the same photos:
#   image   the image alone (and its class label)
#   boxes   + boxes float32[*,4], category_id int32[*], loaded with boxes=boxes,category_id (the
#           boxes mapped through each sample's crop and flip, those left empty dropped)
#   fixed   + emb float32[256]
#   mask    + mask (1 channel, PNG): the boxes painted as instance ids, built with --masks; decoded and
#           cropped, resized and flipped with its image (nearest) by the consumer thread
# Whole process: `dsc bench --preset imagenet-train` (RandomResizedCrop 224 + flip, batch 64),
# --threads 1, pinned to core 1 (taskset -c 1: the consumer thread shares the core), the three
# alternated round by round; medians of the rounds and of the per-round ratios to `image`.
# In-process: bench/fields_bench (FillFieldColumns, the consumer thread's whole per-batch field work)
# against a memcpy of the fixed field's bytes.
# usage: bench/run_fields_bench.sh [BUILD_DIR] [ROUNDS] [EPOCHS]
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
rounds=${2:-5}
epochs=${3:-10}
work=$build/bench-work/fields
py=${DSC_PYTHON:-/usr/bin/python3}  # Debian's, with PIL
mkdir -p "$work"
if [ ! -f "$work/.done" ]; then
  rm -rf "$work/src" "$work/orig" "$work/masks" && mkdir -p "$work/src" "$work/orig" "$work/masks"
  zstd -dc "$here/../shared/data/imagenet-photos-500.tar.zst" | tar -x -C "$work/orig"
  "$py" - "$work/orig/imagenet-photos-500" "$work" <<'PY'
import json, os, random, sys
from PIL import Image
src, work = sys.argv[1:3]
rng = random.Random(56)
rows = []
for root, _, files in sorted(os.walk(src)):
    for f in sorted(files):
        p = os.path.join(root, f)
        q = os.path.join(work, "src", f)
        im = Image.open(p)
        if max(im.size) > 512:
            s = 512 / max(im.size)
            im = im.convert("RGB").resize((max(1, round(im.width * s)), max(1, round(im.height * s))), Image.BILINEAR)
            im.save(q, quality=90)
        else:
            with open(p, "rb") as a, open(q, "wb") as b:
                b.write(a.read())
        w, h = im.size
        boxes = []
        for _ in range(rng.randint(1, 50)):
            bw, bh = rng.uniform(4, w / 2), rng.uniform(4, h / 2)
            boxes.append([round(rng.uniform(0, w - bw), 2), round(rng.uniform(0, h - bh), 2), round(bw, 2), round(bh, 2)])
        m = Image.new("P", (w, h), 0)
        for k, (x, y, bw, bh) in enumerate(boxes):
            m.paste(k + 1, (int(x), int(y), int(x + bw), int(y + bh)))
        m.save(os.path.join(work, "masks", os.path.splitext(f)[0] + ".png"))
        rows.append({"image": q, "label": len(rows), "boxes": boxes, "category_id": [rng.randint(1, 90) for _ in boxes],
                     "emb": [round(rng.uniform(-1, 1), 4) for _ in range(256)]})
for name, cols in (("image", ["image", "label"]), ("boxes", ["image", "label", "boxes", "category_id"]), ("fixed", ["image", "label", "emb"])):
    with open(os.path.join(work, name + ".jsonl"), "w") as out:
        for r in rows:
            out.write(json.dumps({c: r[c] for c in cols}) + "\n")
n = sum(len(r["boxes"]) for r in rows)
print(f"{len(rows)} photos, {n} boxes ({n / len(rows):.1f} per photo)")
PY
  rm -rf "$work/orig"
  "$build/dsc" build "$work/image.jsonl" "$work/image.beton" --max-resolution 512 --quiet
  "$build/dsc" build "$work/boxes.jsonl" "$work/boxes.beton" --max-resolution 512 --schema 'boxes:float32[*,4] category_id:int32[*]' --quiet
  "$build/dsc" build "$work/fixed.jsonl" "$work/fixed.beton" --max-resolution 512 --schema 'emb:float32[256]' --quiet
  "$build/dsc" build "$work/src" "$work/mask.beton" --masks "$work/masks" --quiet  # the photos are <= 512 already
  touch "$work/.done"
fi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
field() { "$py" -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
run() {  # name file extra-args...
  local name=$1 file=$2; shift 2
  taskset -c 1 "$build/dsc" bench "$file" --preset imagenet-train --threads 1 --epochs $((epochs + 1)) --json "$@" >"$work/$name.json"
}
declare -A ips cpu
names=(image boxes fixed mask)
for i in $(seq "$rounds"); do
  # Rotate the order each round, so that no contender always runs first.
  for k in 0 1 2 3; do
    n=${names[$(((i + k) % 4))]}
    case $n in
      image) run image "$work/image.beton" ;;
      boxes) run boxes "$work/boxes.beton" --boxes boxes,category_id ;;
      fixed) run fixed "$work/fixed.beton" --fields emb ;;
      mask) run mask "$work/mask.beton" ;;
    esac
    ips[$n]+="$(field "$work/$n.json" images_per_second) "
    cpu[$n]+="$(field "$work/$n.json" cpu_us_per_image) "
  done
done
echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "whole process, dsc bench --preset imagenet-train --threads 1, core 1 pinned; $rounds rounds (medians), $epochs epochs each (+1 warm-up)"
printf "%-8s %10s %14s %22s %22s\n" file images/s "CPU us/image" "images/s vs image" "CPU/image vs image"
ratios() {  # the per-round ratios of $1 to $2 (space-separated lists), one a line
  local -a a b
  read -r -a a <<<"$1"; read -r -a b <<<"$2"
  for j in "${!a[@]}"; do awk -v x="${a[$j]}" -v y="${b[$j]}" 'BEGIN {print x / y}'; done
}
for n in "${names[@]}"; do
  rc=$(ratios "${cpu[$n]}" "${cpu[image]}" | sort -g)
  printf "%-8s %10.0f %14.1f %22.3f %14.3f (%.3f-%.3f)\n" "$n" "$(echo "${ips[$n]}" | tr ' ' '\n' | median)" \
    "$(echo "${cpu[$n]}" | tr ' ' '\n' | median)" "$(ratios "${ips[$n]}" "${ips[image]}" | median)" \
    "$(echo "$rc" | median)" "$(echo "$rc" | head -1)" "$(echo "$rc" | tail -1)"
done
taskset -c 1 "$build/bench/fields_bench" "$work/boxes.beton" boxes,category_id "$work/fixed.beton" emb 7 200
