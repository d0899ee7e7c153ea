"""dsc.T: torchvision's transform names and arguments, run by dsc's C++ workers (kernels/transforms.h).

    loader = dsc.Loader("train.beton", preset="cifar-train",
                        transforms=[dsc.T.RandomCrop(32, padding=4, padding_mode="reflect"),
                                    dsc.T.ColorJitter(0.4, 0.4, 0.4)])

Each object only names a transform and its arguments; str(t) is its text in a transform list, the
form the CLI (--transforms) and remote workers take. The transforms run per sample in the loader's
threads, after decode and crop, with the sample's own random stream: batches are the same for any
thread, rank or worker count. docs/augment.md lists them with their exactness against torchvision.

Per-sample Python callables are refused: a loader thread would need the GIL for every image, which
serialises the threads (and the trainer) on it. Write a C++ transform (RegisterTransform,
examples/custom_transform.cc) and name it with dsc.T.Named("my_op", ...), or transform whole batches
on the consumer side with Loader(..., batch_transform=fn)."""
import enum as _enum

from . import _dsc


def _text(v):
    if v is None:
        return "None"
    if isinstance(v, bool):
        return "True" if v else "False"
    if isinstance(v, _enum.Enum):
        return _text(v.value)
    if isinstance(v, (list, tuple)):
        return "(" + ",".join(_text(x) for x in v) + ")"
    if isinstance(v, (int, float)):
        return repr(v)
    if isinstance(v, str):
        if any(c in v for c in "(),="):
            raise ValueError(f"transform argument {v!r} may not contain '(', ')', ',' or '='")
        return v.lower() if v.upper() in ("NEAREST", "BILINEAR", "IMAGENET") else v
    raise TypeError(f"transform argument {v!r} of type {type(v).__name__} is not a number, string, tuple or None")


class Transform:
    """A named transform of a dsc transform list (see dsc.T)."""

    name = None

    def __init__(self, *args, **kwargs):
        parts = [_text(a) for a in args] + [f"{k}={_text(v)}" for k, v in kwargs.items()]
        self.spec = self.name + ("(" + ",".join(parts) + ")" if parts else "")
        _dsc.check_transforms(self.spec)  # a bad argument fails here, naming it

    def __str__(self):
        return self.spec

    def __repr__(self):
        return f"dsc.T<{self.spec}>"


def Named(name, *args, **kwargs):
    """A transform registered by name in C++ (RegisterTransform), e.g. dsc.T.Named("my_op", 3)."""
    return type(name, (Transform,), {"name": name})(*args, **kwargs)


def _make(cls_name, name, doc):
    return type(cls_name, (Transform,), {"name": name, "__doc__": doc})


RandomCrop = _make("RandomCrop", "random_crop", "RandomCrop(size, padding=None, pad_if_needed=False, fill=0, padding_mode='constant')")
RandomHorizontalFlip = _make("RandomHorizontalFlip", "random_horizontal_flip", "RandomHorizontalFlip(p=0.5)")
RandomVerticalFlip = _make("RandomVerticalFlip", "random_vertical_flip", "RandomVerticalFlip(p=0.5)")
ColorJitter = _make("ColorJitter", "color_jitter", "ColorJitter(brightness=0, contrast=0, saturation=0, hue=0)")
Grayscale = _make("Grayscale", "grayscale", "Grayscale(num_output_channels=3)")
RandomGrayscale = _make("RandomGrayscale", "random_grayscale", "RandomGrayscale(p=0.1)")
RandomSolarize = _make("RandomSolarize", "random_solarize", "RandomSolarize(threshold, p=0.5)")
RandomPosterize = _make("RandomPosterize", "random_posterize", "RandomPosterize(bits, p=0.5)")
RandomAutocontrast = _make("RandomAutocontrast", "random_autocontrast", "RandomAutocontrast(p=0.5)")
RandomEqualize = _make("RandomEqualize", "random_equalize", "RandomEqualize(p=0.5)")
RandomInvert = _make("RandomInvert", "random_invert", "RandomInvert(p=0.5)")
RandomAdjustSharpness = _make("RandomAdjustSharpness", "random_adjust_sharpness", "RandomAdjustSharpness(sharpness_factor, p=0.5)")
GaussianBlur = _make("GaussianBlur", "gaussian_blur", "GaussianBlur(kernel_size, sigma=(0.1, 2.0))")
RandomRotation = _make("RandomRotation", "random_rotation", "RandomRotation(degrees, interpolation='nearest', expand=False, center=None, fill=0)")
RandomAffine = _make("RandomAffine", "random_affine", "RandomAffine(degrees, translate=None, scale=None, shear=None, interpolation='nearest', fill=0, center=None)")
RandomErasing = _make("RandomErasing", "random_erasing", "RandomErasing(p=0.5, scale=(0.02, 0.33), ratio=(0.3, 3.3), value=0)")
RandAugment = _make("RandAugment", "rand_augment", "RandAugment(num_ops=2, magnitude=9, num_magnitude_bins=31, interpolation='nearest', fill=None)")
TrivialAugmentWide = _make("TrivialAugmentWide", "trivial_augment_wide", "TrivialAugmentWide(num_magnitude_bins=31, interpolation='nearest', fill=None)")
AutoAugment = _make("AutoAugment", "auto_augment", "AutoAugment(policy='imagenet', interpolation='nearest', fill=None)")


def to_spec(transforms):
    """A transform list's text from a str or a sequence of dsc.T transforms / strings."""
    if isinstance(transforms, str):
        return transforms
    if isinstance(transforms, Transform):
        transforms = [transforms]
    parts = []
    for t in transforms:
        if isinstance(t, (Transform, str)):
            parts.append(str(t))
        elif callable(t):
            raise TypeError(
                f"transforms: {t!r} is a Python callable; dsc runs transforms per sample in C++ threads, where "
                "calling Python would take the GIL for every image and serialise the loader (and the trainer) "
                "on it. Use a dsc.T transform, a C++ transform registered with RegisterTransform "
                "(examples/custom_transform.cc; dsc.T.Named('name', ...)), or Loader(..., batch_transform=fn) "
                "for whole batches on the consumer side (e.g. torch ops on the GPU batch)")
        else:
            raise TypeError(f"transforms: {t!r} is not a dsc.T transform or a string")
    return ",".join(parts)


class MixUpCutMix:
    """Batch-level MixUp / CutMix for Loader(..., batch_transform=dsc.T.MixUpCutMix(num_classes)):
    each sample is mixed with the batch's previous one (torchvision's reference RandomMixup /
    RandomCutmix, timm's switch between them); labels come out as float [B, num_classes] soft labels
    (label_smoothing spreads that much mass evenly). The draws depend only on (seed, epoch, batch
    index): the same batch is mixed the same way in every run, resumed or not. Images must be float32
    (NCHW or NHWC) on the CPU; the work is in C++ without the GIL."""

    takes_batch_index = True  # the Loader passes epoch= and batch=

    def __init__(self, num_classes, mixup_alpha=0.2, cutmix_alpha=1.0, prob=1.0, switch_prob=0.5,
                 label_smoothing=0.0, seed=0, layout="NCHW"):
        if num_classes <= 0:
            raise ValueError("num_classes must be positive")
        self.args = (int(num_classes), float(mixup_alpha), float(cutmix_alpha), float(prob), float(switch_prob),
                     float(label_smoothing), layout == "NCHW")
        self.seed = int(seed)
        self.last_draw = None

    def __call__(self, images, labels, epoch=0, batch=0):
        import numpy as np
        arr = images.numpy() if hasattr(images, "numpy") else images
        if arr.dtype != np.float32 or not arr.flags.c_contiguous:
            raise TypeError("MixUpCutMix needs a C-contiguous float32 batch (dtype='float32')")
        lab = labels.numpy() if hasattr(labels, "numpy") else labels
        soft, self.last_draw = _dsc._mix_batch(arr, lab, *self.args, self.seed, epoch, batch)
        if hasattr(images, "numpy"):
            import torch
            soft = torch.from_numpy(soft)
        return images, soft
