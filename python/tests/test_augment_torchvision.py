"""dsc's list transforms (kernels/transforms.h) against torchvision 0.14 on uint8 tensors.

For each transform: dsc applies it to a real image with a sample's own random stream and reports the
parameters it drew; torchvision.transforms.functional (or autoaugment._apply_op) is applied to the
same image with those parameters, and the two images are compared: bit-exact where torchvision
computes in integers or in float32 expressions dsc repeats operation by operation, within one level
where torchvision's own float reductions (means, convolutions, the affine grid) may round either way.
The measured maxima are docs/augment.md's table (run with -s to print them).

Then the parameter draws themselves: for each transform, dsc's over many samples against
torchvision's get_params over as many torch draws, by a two-sample chi-square on binned values at
p = 0.001 (as tests/kernels_test.cc's MakeParamsStats)."""
import math
import pathlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
tv = pytest.importorskip("torchvision")
import torchvision.transforms as T  # noqa: E402
import torchvision.transforms.functional as F  # noqa: E402
from torchvision.transforms import autoaugment as AA  # noqa: E402
from torchvision.transforms import InterpolationMode as IM  # noqa: E402
from PIL import Image  # noqa: E402

from dsc import _dsc  # noqa: E402

OPS = ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Brightness", "Color", "Contrast",
       "Sharpness", "Posterize", "Solarize", "AutoContrast", "Equalize", "Invert"]


@pytest.fixture(scope="module")
def images(testdata):
    """A few real CIFAR-10 images (32x32) and two larger, non-square ones made of their pixels."""
    files = sorted((testdata / "train").glob("*/000[1-4].jpg"))[:6]
    small = [np.asarray(Image.open(f).convert("RGB")) for f in files]
    big = np.concatenate([np.concatenate(small[:3], axis=1), np.concatenate(small[3:6], axis=1)], axis=0)  # 64x96
    big2 = np.ascontiguousarray(big[:45, :77])
    return small + [big, big2]


def chw(a):
    return torch.from_numpy(np.ascontiguousarray(a)).permute(2, 0, 1).contiguous()


def hwc(t):
    return t.permute(1, 2, 0).contiguous().numpy()


def values(log, name):
    return [v for k, v in log if k == name]


def interp(spec):
    return IM.BILINEAR if "bilinear" in spec else IM.NEAREST


# Replays: torchvision's functional ops with the parameters dsc drew (log: [(name, value), ...]).
def replay_crop(spec, pad, mode):
    def f(img, log):
        d = dict(log)
        size = img.shape[-1]
        return F.crop(F.pad(img, pad, fill=0, padding_mode=mode), int(d["top"]), int(d["left"]), size, size)
    return f


def replay_flip(fn):
    return lambda img, log: fn(img) if log[0][1] else img


def replay_jitter(img, log):
    order = [int(v) for v in values(log, "order")]
    d = dict(log)
    for i in order:
        if i == 0 and "brightness" in d:
            img = F.adjust_brightness(img, d["brightness"])
        elif i == 1 and "contrast" in d:
            img = F.adjust_contrast(img, d["contrast"])
        elif i == 2 and "saturation" in d:
            img = F.adjust_saturation(img, d["saturation"])
        elif i == 3 and "hue" in d:
            img = F.adjust_hue(img, d["hue"])
    return img


def replay_apply(fn):
    return lambda img, log: fn(img) if log[0][1] else img


def replay_blur(k):
    return lambda img, log: F.gaussian_blur(img, [k, k], [log[0][1], log[0][1]])


def replay_rotation(mode):
    return lambda img, log: F.rotate(img, dict(log)["angle"], interpolation=mode, fill=[0.0, 0.0, 0.0])


def replay_affine(mode):
    def f(img, log):
        d = dict(log)
        return F.affine(img, d["angle"], [int(d["tx"]), int(d["ty"])], d["scale"], [d["shear_x"], d["shear_y"]],
                        interpolation=mode, fill=[0.0, 0.0, 0.0])
    return f


def replay_perspective(mode):
    def f(img, log):
        d = dict(log)
        if not d["applied"]:
            return img
        h, w = img.shape[-2:]
        start = [[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]]
        end = [[int(d[f"x{k}"]), int(d[f"y{k}"])] for k in range(4)]
        return F.perspective(img, start, end, interpolation=mode, fill=[0.0, 0.0, 0.0])
    return f


def replay_erasing(img, log):
    d = dict(log)
    if not d["applied"]:
        return img
    return F.erase(img, int(d["i"]), int(d["j"]), int(d["h"]), int(d["w"]), torch.tensor(0, dtype=torch.uint8))


def replay_ops(mode):
    def f(img, log):
        ops = values(log, "op")
        mags = values(log, "magnitude")
        for op, mag in zip(ops, mags):
            img = AA._apply_op(img, OPS[int(op)], mag, interpolation=mode, fill=None)
        return img
    return f


def replay_autoaugment(img, log):
    policy = AA.AutoAugment(AA.AutoAugmentPolicy.IMAGENET).policies[int(log[0][1])]
    rest = log[1:]
    i = 0
    for step in policy:
        applied = rest[i][1]
        i += 1
        if applied:
            img = AA._apply_op(img, step[0], rest[i][1], interpolation=IM.NEAREST, fill=None)
            i += 1
    return img


# (spec, replay, tolerance): tolerance 0 = bit-exact, 1 = within one level; a third value, where
# given, bounds the fraction of pixels that may differ (nearest-neighbour geometry: a float32 grid
# coordinate on the other side of .5 picks the neighbour pixel).
CASES = [
    ("random_crop(32,padding=4,padding_mode=reflect)", replay_crop(None, 4, "reflect"), 0),
    ("random_crop(32,padding=4)", replay_crop(None, 4, "constant"), 0),
    ("random_crop(32,padding=(2,5),padding_mode=edge)", replay_crop(None, [2, 5], "edge"), 0),
    ("random_crop(32,padding=3,padding_mode=symmetric)", replay_crop(None, 3, "symmetric"), 0),
    ("flip(p=0.5)", replay_flip(F.hflip), 0),
    ("random_vertical_flip(0.5)", replay_flip(F.vflip), 0),
    ("color_jitter(0.4,0.4,0.4)", replay_jitter, 1),
    ("color_jitter(brightness=0.5)", replay_jitter, 0),
    ("color_jitter(saturation=(0.2,1.8))", replay_jitter, 0),
    ("color_jitter(contrast=0.6)", replay_jitter, 1),
    ("color_jitter(hue=0.3)", replay_jitter, 1),
    ("color_jitter(0.4,0.4,0.4,0.1)", replay_jitter, 1),
    ("grayscale", lambda img, log: F.rgb_to_grayscale(img, 3), 0),
    ("random_grayscale(p=0.5)", replay_apply(lambda i: F.rgb_to_grayscale(i, 3)), 0),
    ("random_solarize(threshold=128,p=0.5)", replay_apply(lambda i: F.solarize(i, 128.0)), 0),
    ("random_posterize(bits=3,p=0.5)", replay_apply(lambda i: F.posterize(i, 3)), 0),
    ("random_autocontrast(p=0.5)", replay_apply(F.autocontrast), 0),
    ("random_equalize(p=0.5)", replay_apply(F.equalize), 0),
    ("random_invert(p=0.5)", replay_apply(F.invert), 0),
    ("random_adjust_sharpness(sharpness_factor=2,p=0.5)", replay_apply(lambda i: F.adjust_sharpness(i, 2.0)), 1),
    ("gaussian_blur(5,sigma=(0.1,2.0))", replay_blur(5), 1),
    ("random_rotation(30)", replay_rotation(IM.NEAREST), 0, 0.002),
    ("random_rotation(30,interpolation=bilinear)", replay_rotation(IM.BILINEAR), 1),
    ("random_affine(15,translate=(0.1,0.1),scale=(0.8,1.2),shear=10)", replay_affine(IM.NEAREST), 0, 0.002),
    ("random_affine(15,translate=(0.1,0.1),scale=(0.8,1.2),shear=10,interpolation=bilinear)", replay_affine(IM.BILINEAR), 1),
    ("random_perspective(0.5,p=0.5)", replay_perspective(IM.BILINEAR), 1),
    ("random_perspective(0.6,p=1,interpolation=nearest)", replay_perspective(IM.NEAREST), 0, 0.01),
    ("random_erasing(p=0.5)", replay_erasing, 0),
    ("rand_augment(2,9)", replay_ops(IM.NEAREST), 1, 0.002),
    ("rand_augment(2,9,interpolation=bilinear)", replay_ops(IM.BILINEAR), 1),
    ("trivial_augment_wide", replay_ops(IM.NEAREST), 1, 0.002),
    ("auto_augment", replay_autoaugment, 1, 0.002),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_equal_to_torchvision(images, case):
    spec, replay, tol = case[0], case[1], case[2]
    max_frac = case[3] if len(case) > 3 else 0.0
    worst, worst_frac, n = 0, 0.0, 0
    for k, img in enumerate(images):
        if spec.startswith("random_crop") and img.shape[:2] != (32, 32):
            continue
        for index in range(12):
            out, log = _dsc._apply_transform(spec, img, seed=7, epoch=1, index=index + 100 * k)
            ref = hwc(replay(chw(img), log))
            assert ref.shape == out.shape
            diff = np.abs(out.astype(int) - ref.astype(int))
            worst = max(worst, int(diff.max()))
            frac = float((diff > tol).mean())
            worst_frac = max(worst_frac, frac)
            n += 1
            if frac > max_frac:
                bad = np.argwhere(diff > tol)[0]
                pytest.fail(f"{spec}: image {k} sample {index}: {frac:.4%} of values differ by more than {tol} "
                            f"(first at {tuple(bad)}: dsc {out[tuple(bad)]}, torchvision {ref[tuple(bad)]}); log {log}")
    print(f"\n{spec}: {n} images, max |dsc - torchvision| = {worst}, worst fraction over {tol}: {worst_frac:.4%}")


def test_magnitude_bins_match_torch_linspace(images):
    """The bins dsc's RandAugment draws from are torch.linspace's float32 values (to one ulp)."""
    img = images[-2]
    h, w = img.shape[:2]
    space = AA.RandAugment()._augmentation_space(31, (h, w))
    seen = {}
    for index in range(400):
        _, log = _dsc._apply_transform("rand_augment(1,9)", img, seed=3, index=index)
        seen[OPS[int(log[0][1])]] = abs(log[1][1])
    for name, mag in seen.items():
        mags, _ = space[name]
        ref = float(mags[9].item()) if mags.ndim > 0 else 0.0
        assert mag == pytest.approx(ref, rel=2e-7, abs=1e-6), name
    assert len(seen) == 14


def test_errors_name_the_transform():
    img = np.zeros((8, 8, 3), np.uint8)
    for spec, words in [("colour_jitter(0.4)", "unknown transform 'colour_jitter'"),
                        ("color_jitter(0.4,bright=2)", "unknown argument 'bright'"),
                        ("random_crop(32)", "the image is 8x8"),
                        ("random_erasing(value=random)", "value='random'"),
                        ("gaussian_blur(4)", "odd"),
                        ("flip(p=2)", "not in [0, 1]"),
                        ("rand_augment(2,31)", "magnitude"),
                        ("flip(", "unbalanced")]:
        with pytest.raises(Exception, match=None) as e:
            _dsc._apply_transform(spec, img)
        assert words in str(e.value), (spec, str(e.value))


# --- the parameter distributions --------------------------------------------------------------------

N = 4000


def chi2_critical(df):
    k = 2.0 / (9.0 * df)
    return df * (1 - k + 3.0902 * math.sqrt(k)) ** 3


def two_sample(a, b, bins):
    """Two-sample chi-square of equal-size samples a and b over `bins` (edges) or categories (None)."""
    if bins is None:
        cats = sorted(set(a) | set(b))
        ca = np.array([a.count(c) for c in cats])
        cb = np.array([b.count(c) for c in cats])
    else:
        ca, _ = np.histogram(a, bins)
        cb, _ = np.histogram(b, bins)
    keep = (ca + cb) > 0
    chi = float((((ca - cb) ** 2)[keep] / (ca + cb)[keep]).sum())
    df = max(1, int(keep.sum()) - 1)
    return chi, df


def dsc_draws(spec, name, w=32, h=32):
    return [v for log in _dsc._transform_draws(spec, w, h, 11, N) for k, v in log if k == name]


def check(label, a, b, bins=None):
    chi, df = two_sample(list(a), list(b), bins)
    print(f"\n{label}: chi2 {chi:.1f} (df {df}, bound {chi2_critical(df):.1f})")
    assert chi < chi2_critical(df), f"{label}: dsc's draws do not follow torchvision's distribution (chi2 {chi:.1f})"


def test_distributions_match_torchvision():
    torch.manual_seed(0)
    # ColorJitter: the order (a permutation) and each factor.
    cj = T.ColorJitter(0.4, 0.4, 0.4, 0.1)
    tv_params = [cj.get_params(cj.brightness, cj.contrast, cj.saturation, cj.hue) for _ in range(N)]
    d = _dsc._transform_draws("color_jitter(0.4,0.4,0.4,0.1)", 8, 8, 11, N)
    d_first = [int(dict(log)["order"]) for log in d]  # dict keeps the last "order": the fourth applied
    t_first = [int(p[0][3]) for p in tv_params]
    check("color_jitter order (last op)", d_first, t_first)
    for k, name in enumerate(["brightness", "contrast", "saturation", "hue"]):
        edges = np.linspace(-0.1, 0.1, 21) if name == "hue" else np.linspace(0.6, 1.4, 21)
        check(f"color_jitter {name}", [dict(log)[name] for log in d], [float(p[k + 1]) for p in tv_params], edges)
    # Flip and the RandomApply family: a Bernoulli(p).
    flips = dsc_draws("flip", "flip")
    check("flip", flips, [float(torch.rand(1) < 0.5) for _ in range(N)])
    check("random_grayscale", dsc_draws("random_grayscale", "applied"), [float(torch.rand(1) < 0.1) for _ in range(N)])
    # RandomCrop's offsets.
    rc = T.RandomCrop(32, padding=4)
    padded = torch.zeros(3, 40, 40, dtype=torch.uint8)
    tv_crop = [rc.get_params(padded, (32, 32)) for _ in range(N)]
    check("random_crop top", dsc_draws("random_crop(32,padding=4)", "top"), [p[0] for p in tv_crop])
    check("random_crop left", dsc_draws("random_crop(32,padding=4)", "left"), [p[1] for p in tv_crop])
    # GaussianBlur's sigma.
    check("gaussian_blur sigma", dsc_draws("gaussian_blur(3)", "sigma"),
          [T.GaussianBlur.get_params(0.1, 2.0) for _ in range(N)], np.linspace(0.1, 2.0, 20))
    # RandomAffine: angle, translation, scale, shear.
    tv_aff = [T.RandomAffine.get_params([-15.0, 15.0], [0.1, 0.1], [0.8, 1.2], [-10.0, 10.0], [32, 32])
              for _ in range(N)]
    spec = "random_affine(15,translate=(0.1,0.1),scale=(0.8,1.2),shear=10)"
    check("random_affine angle", dsc_draws(spec, "angle"), [p[0] for p in tv_aff], np.linspace(-15, 15, 21))
    check("random_affine tx", dsc_draws(spec, "tx"), [p[1][0] for p in tv_aff])
    check("random_affine scale", dsc_draws(spec, "scale"), [p[2] for p in tv_aff], np.linspace(0.8, 1.2, 21))
    check("random_affine shear", dsc_draws(spec, "shear_x"), [p[3][0] for p in tv_aff], np.linspace(-10, 10, 21))
    check("random_rotation angle", dsc_draws("random_rotation(30)", "angle"),
          [T.RandomRotation.get_params([-30.0, 30.0]) for _ in range(N)], np.linspace(-30, 30, 21))
    # RandomPerspective's end points (each corner's x and y).
    tv_per = [T.RandomPerspective.get_params(32, 32, 0.5)[1] for _ in range(N)]
    per = [dict(log) for log in _dsc._transform_draws("random_perspective(0.5,p=1)", 32, 32, 11, N)]
    for k in range(4):
        check(f"random_perspective x{k}", [e[f"x{k}"] for e in per], [p[k][0] for p in tv_per])
        check(f"random_perspective y{k}", [e[f"y{k}"] for e in per], [p[k][1] for p in tv_per])
    # RandomErasing's rectangle (over the samples where it applies).
    img = torch.zeros(3, 32, 32, dtype=torch.uint8)
    tv_er = [T.RandomErasing.get_params(img, (0.02, 0.33), (0.3, 3.3), [0]) for _ in range(N)]
    er = [dict(log) for log in _dsc._transform_draws("random_erasing(p=1)", 32, 32, 11, N)]
    check("random_erasing h", [e["h"] for e in er], [p[2] for p in tv_er], np.arange(0, 33, 2))
    check("random_erasing w", [e["w"] for e in er], [p[3] for p in tv_er], np.arange(0, 33, 2))
    check("random_erasing i", [e["i"] for e in er], [p[0] for p in tv_er], np.arange(0, 33, 2))
    # RandAugment / TrivialAugmentWide: the op (uniform over the space) and the sign; TrivialAugment's
    # magnitude bin. torchvision's draws are made by the same torch.randint calls its forward makes.
    check("rand_augment op", [int(v) for v in dsc_draws("rand_augment(1,9)", "op")],
          [int(torch.randint(14, (1,)).item()) for _ in range(N)])
    ta = [dict(log) for log in _dsc._transform_draws("trivial_augment_wide", 32, 32, 11, N)]
    check("trivial_augment_wide op", [int(e["op"]) for e in ta], [int(torch.randint(14, (1,)).item()) for _ in range(N)])
    rot = [abs(e["magnitude"]) for e in ta if int(e["op"]) == 5]
    tv_rot = [float(torch.linspace(0.0, 135.0, 31)[torch.randint(31, (1,))].item()) for _ in range(len(rot))]
    check("trivial_augment_wide rotate magnitude", rot, tv_rot, np.linspace(-2, 137, 16))
    # AutoAugment: the policy (uniform over 25).
    aa = [int(log[0][1]) for log in _dsc._transform_draws("auto_augment", 32, 32, 11, N)]
    check("auto_augment policy", aa, [AA.AutoAugment.get_params(25)[0] for _ in range(N)])
