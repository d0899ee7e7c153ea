#!/usr/bin/python3
"""Cost of each list transform per image, on one thread: microseconds per dsc._apply_transform call
minus an empty list's (the call's own overhead), on a real 32x32 CIFAR image and a 224x224 crop of a
photo; the median of 5 rounds. Prints docs/augment.md's table rows (exactness and max error come from
python/tests/test_augment_torchvision.py -s).

    PYTHONPATH=build/python /usr/bin/python3 bench/transform_cost.py CIFAR.jpg PHOTO.jpg"""
import statistics
import sys
import time

import numpy as np
from PIL import Image

from dsc import _dsc

SPECS = [
    ("random_crop(32,padding=4,padding_mode=reflect)", "RandomCrop(32, padding=4, padding_mode=...) (constant, edge, reflect, symmetric)", "exact"),
    ("flip", "RandomHorizontalFlip(p)", "exact"),
    ("random_vertical_flip", "RandomVerticalFlip(p)", "exact"),
    ("color_jitter(0.4,0.4,0.4)", "ColorJitter(0.4, 0.4, 0.4)", "within 1 (contrast's mean)"),
    ("color_jitter(0.4,0.4,0.4,0.1)", "ColorJitter(0.4, 0.4, 0.4, 0.1)", "within 1 (contrast's mean, hue's HSV)"),
    ("grayscale", "Grayscale(3)", "exact"),
    ("random_grayscale(p=1)", "RandomGrayscale(p)", "exact"),
    ("random_solarize(128,p=1)", "RandomSolarize(threshold, p)", "exact"),
    ("random_posterize(3,p=1)", "RandomPosterize(bits, p)", "exact"),
    ("random_autocontrast(p=1)", "RandomAutocontrast(p)", "exact"),
    ("random_equalize(p=1)", "RandomEqualize(p)", "exact"),
    ("random_invert(p=1)", "RandomInvert(p)", "exact"),
    ("random_adjust_sharpness(2,p=1)", "RandomAdjustSharpness(factor, p)", "within 1 (3x3 convolution)"),
    ("gaussian_blur(5)", "GaussianBlur(5, sigma=(0.1, 2.0))", "within 1 (convolution)"),
    ("random_rotation(30)", "RandomRotation(30) (nearest)", "exact on the test images (grid in float32)"),
    ("random_rotation(30,interpolation=bilinear)", "RandomRotation(30, BILINEAR)", "within 1 (bilinear)"),
    ("random_affine(15,translate=(0.1,0.1),scale=(0.8,1.2),shear=10)", "RandomAffine(15, (0.1,0.1), (0.8,1.2), 10)", "exact on the test images"),
    ("random_erasing(p=1)", "RandomErasing(p, scale, ratio, value)", "exact"),
    ("rand_augment(2,9)", "RandAugment(2, 9)", "within 1"),
    ("trivial_augment_wide", "TrivialAugmentWide()", "within 1"),
    ("auto_augment", "AutoAugment(IMAGENET)", "within 1"),
]


def cost(spec, img, n):
    rounds = []
    for r in range(5):
        t = time.perf_counter()
        for i in range(n):
            _dsc._apply_transform(spec, img, seed=1, index=i)
        rounds.append((time.perf_counter() - t) / n * 1e6)
    return statistics.median(rounds)


small = np.asarray(Image.open(sys.argv[1]).convert("RGB"))
photo = Image.open(sys.argv[2]).convert("RGB")
big = np.asarray(photo.resize((224, 224)))
base_s, base_b = cost("", small, 2000), cost("", big, 200)
for spec, tv, exact in SPECS:
    s = cost(spec, small, 2000) - base_s if "random_crop" in spec or True else 0
    b = cost(spec.replace("random_crop(32", "random_crop(224"), big, 200) - base_b
    print(f"| `{spec}` | {tv} | {exact} | MAXERR | {max(s, 0):.1f} | {max(b, 0):.0f} |")
