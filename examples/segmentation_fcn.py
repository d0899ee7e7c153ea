"""Semantic segmentation with dsc: images and their masks in one file, the masks following every crop
and flip, and a small fully-convolutional net that learns them on the CPU.

    PYTHONPATH=build/python /usr/bin/python3 examples/segmentation_fcn.py [OUT_DIR]

It draws 256 scenes (noise with rectangles and ellipses of three classes) and their class masks,
writes them with dsc.Writer ({"image": "image", "mask": "mask"}), loads them with RandomResizedCrop
and a flip (each mask cropped, resized and flipped as its image, nearest-neighbour), and trains for a
few epochs: the loss falls and the pixel accuracy passes the all-background guess. For your own data,
`dsc build IMAGES OUT --masks MASKS` pairs a folder of images with a folder of PNG masks by file stem.
"""
import os
import sys
import tempfile

import numpy as np
import torch
from PIL import Image, ImageDraw

import dsc

CLASSES = 4  # 0 background, 1 rectangle, 2 ellipse, 3 triangle
COLOURS = {1: (220, 60, 40), 2: (40, 200, 90), 3: (60, 80, 230)}


def make_scenes(n, size=64, seed=0):
    """n (image, mask) pairs: PIL RGB images and H x W uint8 class maps."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        img = Image.fromarray(rng.integers(0, 120, (size, size, 3), dtype=np.uint8))
        mask = Image.new("L", (size, size), 0)
        di, dm = ImageDraw.Draw(img), ImageDraw.Draw(mask)
        for _ in range(int(rng.integers(1, 4))):
            c = int(rng.integers(1, CLASSES))
            x0, y0 = (int(v) for v in rng.integers(0, size - 20, 2))
            x1, y1 = x0 + int(rng.integers(12, 28)), y0 + int(rng.integers(12, 28))
            shape = [(x0, y0), (x1, y1)]
            if c == 1:
                di.rectangle(shape, fill=COLOURS[c]), dm.rectangle(shape, fill=c)
            elif c == 2:
                di.ellipse(shape, fill=COLOURS[c]), dm.ellipse(shape, fill=c)
            else:
                tri = [(x0, y1), (x1, y1), ((x0 + x1) // 2, y0)]
                di.polygon(tri, fill=COLOURS[c]), dm.polygon(tri, fill=c)
        out.append((img, np.asarray(mask)))
    return out


def write(path, scenes):
    with dsc.Writer(path, {"image": "image", "mask": "mask"}, threads=2) as w:
        for img, mask in scenes:
            w.add({"image": img, "mask": mask})


def fcn():
    return torch.nn.Sequential(
        torch.nn.Conv2d(3, 24, 3, padding=1), torch.nn.ReLU(),
        torch.nn.Conv2d(24, 24, 3, padding=2, dilation=2), torch.nn.ReLU(),
        torch.nn.Conv2d(24, 24, 3, padding=4, dilation=4), torch.nn.ReLU(),
        torch.nn.Conv2d(24, CLASSES, 1))


def train(path, epochs=6, seed=0, log=print):
    """Returns (mean loss, pixel accuracy, background fraction) per epoch."""
    torch.manual_seed(seed)
    loader = dsc.Loader(path, batch_size=32, crop="random_resized", out_size=48, scale=(0.35, 1.0), flip=True,
                        normalize=dict(mean=(0.5, 0.5, 0.5), std=(0.25, 0.25, 0.25), scale="unit"), seed=seed, threads=2)
    net = fcn()
    opt = torch.optim.Adam(net.parameters(), lr=3e-3)
    history = []
    for epoch in range(epochs):
        loader.set_epoch(epoch)
        losses, right, background, total = [], 0, 0, 0
        for batch in loader:
            target = batch["mask"].long()  # [B, 48, 48]: the crop and flip of each image
            logits = net(batch["image"])
            loss = torch.nn.functional.cross_entropy(logits, target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
            right += int((logits.argmax(1) == target).sum())
            background += int((target == 0).sum())
            total += target.numel()
        history.append((float(np.mean(losses)), right / total, background / total))
        log(f"epoch {epoch}: loss {history[-1][0]:.3f}, pixel accuracy {history[-1][1]:.3f} "
            f"(all background would be {history[-1][2]:.3f})")
    return history


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else tempfile.mkdtemp(prefix="dsc-seg-")
    os.makedirs(out, exist_ok=True)
    path = os.path.join(out, "shapes.beton")
    write(path, make_scenes(256))
    print(f"wrote {path}: {dsc.info(path)['samples']} images with masks")
    train(path)


if __name__ == "__main__":
    main()
