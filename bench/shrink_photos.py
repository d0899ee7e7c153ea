#!/usr/bin/python3
"""Copies a class-per-folder JPEG tree, shrinking every image whose longest side exceeds N so that it is
at most N (PIL, LANCZOS, saved as JPEG quality 90 with the source's chroma subsampling); the others are
copied byte for byte. `dsc build OUT x.beton --max-resolution N` then stores every image as a
pass-through JPEG, which is what the restart-marker transcoding and the photo benchmarks measure.
usage: shrink_photos.py SRC OUT [N=512]"""
import os
import shutil
import sys

from PIL import Image, JpegImagePlugin

src, out = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 512
shrunk = copied = 0
for root, _, files in os.walk(src):
    for f in sorted(files):
        if not f.lower().endswith((".jpg", ".jpeg")):
            continue
        s = os.path.join(root, f)
        d = os.path.join(out, os.path.relpath(s, src))
        os.makedirs(os.path.dirname(d), exist_ok=True)
        with Image.open(s) as im:
            if max(im.size) <= n:
                shutil.copyfile(s, d)
                copied += 1
                continue
            sub = JpegImagePlugin.get_sampling(im)
            scale = n / max(im.size)
            size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
            small = im.convert("L" if im.mode == "L" else "RGB").resize(size, Image.LANCZOS)
            small.save(d, "JPEG", quality=90, subsampling=sub if sub >= 0 else 2)
            shrunk += 1
print(f"{copied} copied, {shrunk} shrunk to <= {n} px")
