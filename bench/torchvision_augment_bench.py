#!/usr/bin/python3
"""torchvision's version of a dsc transform recipe on one thread: the baseline of bench/RESULTS.md's
augmentation table. Each photo's bytes are read from the tree, decoded by torchvision.io.decode_jpeg,
then RandomResizedCrop(224) + RandomHorizontalFlip + RandAugment(2, 9) on uint8 tensors, then float
and Normalize; images per second over `--epochs` passes (the first excluded), torch on one thread.

    /usr/bin/python3 bench/torchvision_augment_bench.py /tmp/photos512 --epochs 3 [--no-randaugment]

The tree is bench/shrink_photos.py's (the JPEGs `dsc build --max-resolution 512` stores as they are)."""
import argparse
import os
import statistics
import time

import torch
import torchvision
import torchvision.transforms as T

p = argparse.ArgumentParser()
p.add_argument("tree")
p.add_argument("--epochs", type=int, default=3)
p.add_argument("--no-randaugment", action="store_true")
a = p.parse_args()
torch.set_num_threads(1)
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(a.tree) for f in fs if f.lower().endswith((".jpg", ".jpeg")))
ops = [T.RandomResizedCrop(224), T.RandomHorizontalFlip()]
if not a.no_randaugment:
    ops.append(T.RandAugment(2, 9))
aug = T.Compose(ops)
norm = T.Normalize([123.675, 116.28, 103.53], [58.395, 57.12, 57.375])
rates = []
for epoch in range(a.epochs):
    t = time.perf_counter()
    for f in files:
        with open(f, "rb") as fh:
            data = torch.frombuffer(bytearray(fh.read()), dtype=torch.uint8)
        img = torchvision.io.decode_jpeg(data, mode=torchvision.io.ImageReadMode.RGB)
        out = norm(aug(img).float())
    rates.append(len(files) / (time.perf_counter() - t))
print(f"torchvision {'RRC+flip' if a.no_randaugment else 'RRC+flip+RandAugment(2,9)'}: "
      f"{statistics.median(rates[1:] or rates):.0f} images/s (1 thread, {len(files)} photos, median of epochs after the first)")
