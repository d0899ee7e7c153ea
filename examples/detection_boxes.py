"""Detection data with dsc: boxes that follow each image's random crop and flip, drawn so you can see it.

It generates a small detection set (coloured rectangles and ellipses on noise, with their exact boxes
and class ids), writes it with dsc.Writer, loads it with RandomResizedCrop + horizontal flip and
`boxes=["boxes", "category_id"]`, and draws one batch's boxes on its augmented images into a PNG grid.
Every outline should sit on the edges of a shape of its own colour, whatever the crop and the flip did.

Run it from the repository root after building (the Python package lies in BUILD/python; the
interpreter is the one it was built for, with NumPy and PIL: Debian's /usr/bin/python3):

    PYTHONPATH=build/python /usr/bin/python3 examples/detection_boxes.py detection.png

Options: --samples N (64), --batch-size B (16), --out-size S (128), --seed K (0), --work DIR (where
the .beton goes; a temporary folder by default).

A COCO instances file works the same way: `dsc build instances.json coco.beton --images DIR` stores
image, image_id, boxes (x, y, w, h pixels), category_id, iscrowd and area, and
`boxes=["boxes", "category_id", "iscrowd", "area"]` makes them follow the crop.
"""
import argparse
import pathlib
import sys
import tempfile

import numpy as np
from PIL import Image, ImageDraw

import dsc

# One colour per class; the background noise stays below 70 in every channel, far from all of them.
# Classes 0 and 1 are rectangles, 2 and 3 ellipses (the box of an ellipse is its bounding box).
COLOURS = [(230, 40, 40), (40, 210, 40), (50, 70, 240), (235, 220, 40)]
NAMES = ["red rectangle", "green rectangle", "blue ellipse", "yellow ellipse"]
SCHEMA = {"image": "image", "boxes": "float32[*,4]", "category_id": "int32[*]"}


def make_sample(rng):
    """One image (H x W x 3 uint8) with 1-4 shapes that do not overlap, their boxes (x, y, w, h) and classes."""
    w, h = int(rng.integers(140, 221)), int(rng.integers(110, 171))
    img = Image.fromarray(rng.integers(0, 70, (h, w, 3), dtype=np.uint8))
    draw = ImageDraw.Draw(img)
    boxes, cats = [], []
    for _ in range(int(rng.integers(1, 5))):
        for _attempt in range(20):  # rejection: shapes apart by 4 px, so each box holds one shape
            bw, bh = int(rng.integers(18, w // 2)), int(rng.integers(18, h // 2))
            x, y = int(rng.integers(0, w - bw + 1)), int(rng.integers(0, h - bh + 1))
            if all(x + bw + 4 <= bx or bx + bbw + 4 <= x or y + bh + 4 <= by or by + bbh + 4 <= y
                   for bx, by, bbw, bbh in boxes):
                c = int(rng.integers(0, len(COLOURS)))
                # PIL's rectangle/ellipse include their end pixel: [x, x + bw - 1] covers bw pixels,
                # whose box in continuous pixel coordinates is [x, x + bw).
                shape = draw.rectangle if c < 2 else draw.ellipse
                shape([x, y, x + bw - 1, y + bh - 1], fill=COLOURS[c])
                boxes.append((x, y, bw, bh))
                cats.append(c)
                break
    return np.asarray(img), np.array(boxes, np.float32).reshape(-1, 4), np.array(cats, np.int32)


def write_dataset(path, samples=64, seed=0):
    """Writes `samples` generated images with their boxes and classes to `path` (raw pixels, lossless)."""
    rng = np.random.default_rng(seed)
    with dsc.Writer(path, SCHEMA) as w:
        for _ in range(samples):
            img, boxes, cats = make_sample(rng)
            w.add({"image": img, "boxes": boxes, "category_id": cats})
    return path


def load_batch(path, batch_size=16, out_size=128, seed=0, boxes=("boxes", "category_id")):
    """The first batch of a RandomResizedCrop + flip loader: a list of (image H x W x 3 uint8, boxes [N, 4]
    in output pixels, category ids [N]). `boxes=None` leaves the boxes as stored (for comparison)."""
    opts = dict(batch_size=batch_size, crop="random_resized", out_size=out_size, flip=True, scale=(0.2, 1.0),
                dtype="uint8", layout="NHWC", normalize=False, seed=seed, order="random", threads=1)
    if boxes:
        opts["boxes"] = list(boxes)
    loader = dsc.Loader(path, **opts)
    b = next(iter(loader.epoch(0)))
    out = [(np.array(img), np.array(bx, np.float32).reshape(-1, 4), np.array(c, np.int32))
           for img, bx, c in zip(b["image"], b["boxes"], b["category_id"])]
    return out


def draw_grid(batch, png, columns=4, scale=2):
    """Draws each image (enlarged `scale` times) with its boxes outlined, in a grid, into `png`."""
    side = batch[0][0].shape[0] * scale
    rows = (len(batch) + columns - 1) // columns
    grid = Image.new("RGB", (columns * (side + 4), rows * (side + 4)), (255, 255, 255))
    for i, (img, boxes, cats) in enumerate(batch):
        tile = Image.fromarray(img).resize((img.shape[1] * scale, img.shape[0] * scale), Image.NEAREST)
        d = ImageDraw.Draw(tile)
        for (x, y, w, h), c in zip(boxes.tolist(), cats.tolist()):
            # Outline just outside the box, in white, so the shape's own edge stays visible inside it.
            d.rectangle([x * scale - 1, y * scale - 1, (x + w) * scale, (y + h) * scale], outline=(255, 255, 255))
        grid.paste(tile, ((i % columns) * (side + 4) + 2, (i // columns) * (side + 4) + 2))
    grid.save(png)
    return png


def class_pixels(img, c, tolerance=60):
    """Mask of the pixels within `tolerance` (per channel) of class c's colour."""
    return (np.abs(img.astype(np.int16) - np.array(COLOURS[c], np.int16)) <= tolerance).all(axis=-1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("png", help="the PNG grid to write")
    ap.add_argument("--samples", type=int, default=64)
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--out-size", type=int, default=128)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--work", help="folder for the .beton (default: a temporary one)")
    a = ap.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        work = pathlib.Path(a.work or tmp)
        work.mkdir(parents=True, exist_ok=True)
        path = write_dataset(work / "shapes.beton", a.samples, a.seed)
        batch = load_batch(path, a.batch_size, a.out_size, a.seed)
        draw_grid(batch, a.png)
    n = sum(len(b) for _, b, _ in batch)
    print(f"{a.png}: {len(batch)} augmented images, {n} boxes ({', '.join(NAMES)}); "
          f"each white outline should frame one shape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
