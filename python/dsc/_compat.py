"""What dsc.Loader needs to meet a PyTorch user's habits without traps or silent differences: option
values in torch's and NumPy's spellings, normalisation constants in either unit, rank and world size,
a path that is not a dsc file yet, a last batch without padding on one rank, and a
torch.utils.data.IterableDataset over the loader's batches."""
import os
import warnings

from . import _dsc

Error = _dsc.Error


def dtype_name(v):
    """'float16' for torch.float16, np.float16 or np.dtype('float16'); anything else as given (the
    option's own check then names what is accepted)."""
    if v is None or isinstance(v, str):
        return v
    text = str(v)
    if text.startswith("torch."):  # torch.float16, torch.int64
        return text[len("torch."):]
    try:
        import numpy as np
        return np.dtype(v).name
    except TypeError:
        return v


_SCALES = {"unit": 255.0, "pixel": 1.0}


def normalize_option(options):
    """normalize=dict(mean=..., std=..., scale='unit' | 'pixel') as the table's normalize, mean and std
    (0..255 pixel units): 'unit' is torchvision's Normalize after ToTensor (0..1)."""
    n = options.get("normalize")
    if not isinstance(n, dict):
        return options
    unknown = set(n) - {"mean", "std", "scale"}
    if unknown or "mean" not in n or "std" not in n:
        raise TypeError("normalize takes True/False or dict(mean=(R, G, B), std=(R, G, B), scale='unit' or 'pixel')"
                        + (f"; unknown keys {sorted(unknown)}" if unknown else "; mean and std are required"))
    if "mean" in options or "std" in options:
        raise TypeError("give mean and std either in normalize=dict(...) or as mean= and std=, not both")
    scale = n.get("scale", "pixel")
    if scale not in _SCALES:
        raise ValueError(f"normalize scale must be 'unit' (mean and std in 0..1, torchvision's Normalize after ToTensor) "
                         f"or 'pixel' (0..255), got {scale!r}")
    k = _SCALES[scale]
    try:
        mean, std = [float(x) * k for x in n["mean"]], [float(x) * k for x in n["std"]]
    except TypeError:
        raise TypeError(f"normalize mean and std must be sequences of 3 numbers, got {n['mean']!r} and {n['std']!r}") from None
    return dict(options, normalize=True, mean=mean, std=std)


def distributed(rank, world_size, torch):
    """rank / world_size: as given; rank='env': RANK and WORLD_SIZE; else an initialised
    torch.distributed's; else the environment's with a warning that says so; else 0 and 1."""
    env = os.environ
    if isinstance(rank, str):
        if rank != "env":
            raise ValueError(f"rank must be an int, None or 'env', got {rank!r}")
        if "RANK" not in env or "WORLD_SIZE" not in env:
            raise ValueError("rank='env' needs RANK and WORLD_SIZE in the environment (torchrun sets them)")
        r, w = int(env["RANK"]), int(env["WORLD_SIZE"])
        return r, (w if world_size is None else world_size)
    if rank is not None and world_size is not None:
        return rank, world_size
    dist = getattr(torch, "distributed", None) if torch is not None else None
    if dist is not None and dist.is_available() and dist.is_initialized():
        r, w = dist.get_rank(), dist.get_world_size()
    elif "RANK" in env and "WORLD_SIZE" in env:
        r, w = int(env["RANK"]), int(env["WORLD_SIZE"])
        if (r, w) != (0, 1):
            warnings.warn(f"dsc.Loader: torch.distributed is not initialised; took rank {r} and world_size {w} from the "
                          f"environment (RANK, WORLD_SIZE), so this process reads 1/{w} of each epoch: pass rank='env' to "
                          "say so, or rank= and world_size= (0 and 1 for a single process)", RuntimeWarning, stacklevel=4)
    else:
        r, w = 0, 1
        if "RANK" in env or "WORLD_SIZE" in env:
            given = "WORLD_SIZE=" + env["WORLD_SIZE"] + " without RANK" if "WORLD_SIZE" in env else "RANK=" + env["RANK"] + " without WORLD_SIZE"
            warnings.warn(f"dsc.Loader: {given} in the environment and no initialised torch.distributed: ignored, this "
                          "process reads the whole epoch as rank 0 of 1; pass rank= and world_size= to shard",
                          RuntimeWarning, stacklevel=4)
    return (r if rank is None else rank), (w if world_size is None else world_size)


def not_a_dsc_file(path):
    """dsc.Error for a folder of images, or the C++ error's text with the next step for an image file; None otherwise."""
    p = os.fsdecode(os.fspath(path))
    if os.path.isdir(p):
        return Error(f"{p} is a folder, not a dsc file: compile it first, dsc.build({p!r}, 'data.beton') in Python "
                     f"(or `dsc build {p} data.beton`), then dsc.Loader('data.beton', ...)")
    return None


def build_hint(path, error):
    """The loader's 'not a dsc file' error with what to do next."""
    p = os.fsdecode(os.fspath(path))
    what = str(error)
    if "not a dsc file" not in what or "FFCV" in what:
        return error
    folder = os.path.dirname(os.path.dirname(os.path.abspath(p))) or "."
    return Error(f"{what}: {p} is not a dsc file (an image?); dsc.Loader reads a file compiled from a folder of "
                 f"images, a CIFAR download or a manifest: dsc.build({folder!r}, 'data.beton') in Python "
                 f"(or `dsc build {folder} data.beton`), then dsc.Loader('data.beton', ...)")


class Batch(tuple):
    """A batch: the tuple (images, labels), so `for x, y in loader` unpacks it, with
    .padding: bool per sample, True where the sample only repeats another to fill the batch (the last
      batch of an epoch on several ranks, or with pad_last=True); None where it is unknown;
    .indices: each sample's index in the dataset (int64); None where it is unknown."""

    def __new__(cls, items, padding=None, indices=None):
        self = super().__new__(cls, items)
        self.padding = padding
        self.indices = indices
        return self


def trim_padding(images, labels, indices, padding):
    """The batch without its padding samples, which the plan puts at the end of a rank's last batch."""
    n = len(padding) - int(padding.sum())
    if padding[:n].any():  # the order's contract (reader/order.h) says they come last
        raise Error("internal: padding samples are not at the end of the batch")
    return images[:n], [x[:n] for x in labels], indices[:n], padding[:n]


_dataset_class = None


def dataset(loader):
    """A torch.utils.data.IterableDataset over the loader's batches (see Loader.dataset)."""
    global _dataset_class
    import torch.utils.data as tud

    if _dataset_class is None:
        class LoaderDataset(tud.IterableDataset):
            """dsc.Loader's batches, for torch.utils.data.DataLoader(ds, batch_size=None) and libraries that
            want a Dataset: each item is a whole batch, handed through without a copy."""

            def __init__(self, loader):
                self.loader = loader

            def __len__(self):
                return len(self.loader)

            def __iter__(self):
                if tud.get_worker_info() is not None:
                    raise Error("dsc.Loader decodes in its own C++ threads, not in DataLoader workers: wrap it with "
                                "num_workers=0 (threads= sets dsc's decode threads)")
                return iter(self.loader)

            def set_epoch(self, epoch):
                self.loader.set_epoch(epoch)

            def __reduce__(self):
                raise TypeError("a dsc.Loader's dataset cannot be pickled: use DataLoader(loader.dataset(), "
                                "batch_size=None, num_workers=0)")

        _dataset_class = LoaderDataset
    return _dataset_class(loader)
