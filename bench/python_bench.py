#!/usr/bin/python3
"""`import dsc` throughput, side by side in one run (medians over alternating rounds):

1. a Python loop over dsc.Loader against `dsc bench` on the same file (CIFAR-10 train, JPEG, preset
   cifar-train, batch 512), 1 and 2 decode threads: the cost of the Python layer (goal >= 0.95x);
2. what a PyTorch user has today: torchvision ImageFolder + PIL + DataLoader with the same
   augmentations (flip, translate 2 filled with the mean, cutout 4, normalise) on the CIFAR-10 JPEG
   tree, 1 and 2 workers, against dsc.Loader with 1 and 2 threads;
3. the same on the 500 ImageNet photos with RandomResizedCrop(224) + flip + normalise (batch 64),
   against dsc.Loader(preset="imagenet-train").

    PYTHONPATH=build/python /usr/bin/python3 bench/python_bench.py --build build --work /tmp/pybench

Every figure is images per second of the consumer loop (images handed over per wall second, the
consumer doing nothing else), the median of the timed epochs over all rounds.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import time

import numpy as np
import torch

import dsc

CIFAR_MEAN = [125.307, 122.961, 113.8575]
CIFAR_STD = [51.5865, 50.847, 51.255]
IMAGENET_MEAN = [123.675, 116.28, 103.53]
IMAGENET_STD = [58.395, 57.12, 57.375]


def sh(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def dsc_loop(path, preset, threads, epochs, batch, subset=None):
    """images/s of each epoch after the first, for a bare Python loop over dsc.Loader."""
    loader = dsc.Loader(path, preset=preset, batch_size=batch, threads=threads, seed=0,
                        subset=subset)
    rates = []
    for e in range(epochs):
        n = 0
        t0 = time.perf_counter()
        for images, labels in loader.epoch(e):
            n += images.shape[0]
        if e:
            rates.append(n / (time.perf_counter() - t0))
    return rates


def dsc_bench(dsc_bin, path, preset, threads, epochs, batch):
    j = json.loads(sh([dsc_bin, "bench", str(path), "--preset", preset, "--threads", str(threads), "--epochs", str(epochs),
                       "--batch-size", str(batch), "--json"]))
    return [e["images_per_second"] for e in j["epochs"][1:]]


class Cutout:
    """FFCV's Cutout: a size x size square at a uniformly random centre-clipped position, filled."""

    def __init__(self, size, fill):
        self.size, self.fill = size, torch.tensor(fill, dtype=torch.uint8).view(3, 1, 1)

    def __call__(self, img):  # uint8 CHW tensor
        _, h, w = img.shape
        y, x = np.random.randint(0, h - self.size + 1), np.random.randint(0, w - self.size + 1)
        img = img.clone()
        img[:, y:y + self.size, x:x + self.size] = self.fill
        return img


def torchvision_loop(root, transform, workers, epochs, batch, limit=0):
    import torchvision
    ds = torchvision.datasets.ImageFolder(root, transform=transform)
    if limit:
        ds = torch.utils.data.Subset(ds, list(range(0, len(ds), max(1, len(ds) // limit)))[:limit])
    dl = torch.utils.data.DataLoader(ds, batch_size=batch, shuffle=True, num_workers=workers, drop_last=False,
                                     persistent_workers=workers > 0)
    rates = []
    for e in range(epochs):
        n = 0
        t0 = time.perf_counter()
        for images, labels in dl:
            n += images.shape[0]
        if e:
            rates.append(n / (time.perf_counter() - t0))
    return rates


def cifar_transform():
    import torchvision.transforms as T
    fill = tuple(int(m + 0.5) for m in CIFAR_MEAN)
    return T.Compose([
        T.RandomHorizontalFlip(), T.RandomCrop(32, padding=2, fill=fill), T.PILToTensor(), Cutout(4, fill),
        T.ConvertImageDtype(torch.float32),
        T.Normalize([m / 255 for m in CIFAR_MEAN], [s / 255 for s in CIFAR_STD])])


def imagenet_transform():
    import torchvision.transforms as T
    return T.Compose([T.RandomResizedCrop(224), T.RandomHorizontalFlip(), T.PILToTensor(), T.ConvertImageDtype(torch.float32),
                      T.Normalize([m / 255 for m in IMAGENET_MEAN], [s / 255 for s in IMAGENET_STD])])


def med(v):
    return statistics.median(v) if v else float("nan")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--build", default="build")
    p.add_argument("--work", default="/tmp/dsc-pybench")
    p.add_argument("--shared", default=str(pathlib.Path(__file__).resolve().parents[1] / ".." / "shared" / "data"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--epochs", type=int, default=3, help="per measurement; the first is warm-up")
    p.add_argument("--tv-limit", type=int, default=10000, help="CIFAR images per torchvision epoch (it is slow)")
    p.add_argument("--only", default="", help="comma list of: overhead, cifar, photos")
    args = p.parse_args()
    only = set(args.only.split(",")) if args.only else {"overhead", "cifar", "photos"}
    dsc_bin = str(pathlib.Path(args.build) / "dsc")
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    tree = pathlib.Path(args.build).resolve() / "testdata" / "cifar10"
    if not (tree / ".unpacked").exists():
        sh(["sh", str(pathlib.Path(__file__).resolve().parents[1] / "tests" / "unpack_cifar.sh"), str(pathlib.Path(args.shared) / "cifar10-jpg.tar.zst"), str(tree)])
    train = work / "cifar10-train.beton"
    if not train.exists():
        dsc.build(tree, train, split="train")
    results = {}

    if "overhead" in only:
        for t in (1, 2):
            py, cli = [], []
            for _ in range(args.rounds):
                cli += dsc_bench(dsc_bin, train, "cifar-train", t, args.epochs, 512)
                py += dsc_loop(train, "cifar-train", t, args.epochs, 512)
            results[f"cifar overhead t{t}"] = (med(py), med(cli))
            print(f"CIFAR-10 train, cifar-train, {t} thread(s): Python loop over dsc.Loader {med(py):.0f} images/s, "
                  f"dsc bench {med(cli):.0f} images/s, ratio {med(py) / med(cli):.3f}", flush=True)

    if "cifar" in only:
        subset = list(range(0, 50000, 50000 // args.tv_limit))[:args.tv_limit]
        for w in (1, 2):
            tv, ds = [], []
            for _ in range(args.rounds):
                tv += torchvision_loop(tree / "train", cifar_transform(), w, args.epochs, 512, args.tv_limit)
                ds += dsc_loop(train, "cifar-train", w, args.epochs, 512, subset)
            print(f"CIFAR-10 JPEG tree ({args.tv_limit} images/epoch), {w} worker(s)/thread(s): torchvision ImageFolder+PIL+"
                  f"DataLoader {med(tv):.0f} images/s, dsc.Loader {med(ds):.0f} images/s, {med(ds) / med(tv):.1f}x", flush=True)

    if "photos" in only:
        photos = work / "imagenet-photos-500"
        if not photos.exists():
            subprocess.run(f"zstd -dc {args.shared}/imagenet-photos-500.tar.zst | tar -x -C {work}", shell=True, check=True)
        pb = work / "photos.beton"
        if not pb.exists():
            dsc.build(photos, pb, max_resolution=512)
        ep = max(args.epochs, 4)
        for w in (1, 2):
            tv, ds = [], []
            for _ in range(args.rounds):
                tv += torchvision_loop(photos, imagenet_transform(), w, ep, 64)
                ds += dsc_loop(pb, "imagenet-train", w, ep, 64)
            print(f"500 ImageNet photos, RandomResizedCrop(224)+flip+normalise, batch 64, {w} worker(s)/thread(s): "
                  f"torchvision {med(tv):.0f} images/s, dsc.Loader {med(ds):.0f} images/s, {med(ds) / med(tv):.1f}x", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
