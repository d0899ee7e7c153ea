"""dsc: compile a dataset into one indexed file and stream augmented batches out of it, from C++.

    import dsc
    dsc.build("cifar10/", "train.beton", split="train")
    loader = dsc.Loader("train.beton", preset="cifar-train", batch_size=512, seed=0)
    for epoch in range(24):
        for images, labels in loader.epoch(epoch):
            ...

Batches are torch tensors when torch is importable (NumPy arrays otherwise) that view the loader's
batch memory without a copy; see Loader for their lifetime, distributed use and checkpoints.
"""
import json as _json
import operator as _operator
import os as _os
import sys as _sys
import atexit as _atexit
import warnings as _warnings
import weakref as _weakref

from . import _compat
from . import _dsc
from . import trace
from ._compat import Batch
from .trace import Tracer
from .writer import Writer
from . import writer as _writer
from . import transforms as T
from .views import Views


def _path(p, what):
    """`p` (str, bytes or os.PathLike) as the bytes the OS is given: a name that is not UTF-8 reaches
    the library unchanged, and a NUL is refused (C++ would have cut the path short there, opening or
    writing another file)."""
    b = _os.fsencode(p)
    if b"\0" in b:
        raise ValueError(f"{what}: embedded null byte in {p!r}")
    return b


def _index(v, what):
    """An int (or numpy integer), not a float or str quietly truncated by int()."""
    try:
        return _operator.index(v)
    except TypeError:
        raise TypeError(f"{what} must be an int, got {type(v).__name__} ({v!r})") from None

Error = _dsc.Error
OptionError = _dsc.OptionError
PRESETS = tuple(_dsc.presets)
LOADER_OPTIONS = tuple(_dsc.loader_option_names())
__version__ = _dsc.__version__

try:
    import torch as _torch
except ImportError:  # NumPy arrays then
    _torch = None

__all__ = ["build", "convert", "merge", "info", "Loader", "Views", "Batch", "Writer", "Tracer", "trace", "T", "Error", "OptionError", "merge_state_dicts", "checksum", "random_subset", "PRESETS", "LOADER_OPTIONS"]


_live_loaders = _weakref.WeakSet()


def _close_loaders_at_exit():
    """Closes this process's live loaders before the interpreter finalizes. A daemon thread still
    iterating one otherwise raced Python's teardown (a crash in about 1 exit in 100); closed, its
    iteration ends with dsc.Error instead. Loaders inherited through fork belong to the parent."""
    pid = _os.getpid()
    for loader in list(_live_loaders):
        if getattr(loader, "_pid", None) == pid:
            try:
                loader.close()
            except Exception:  # noqa: BLE001 -- exiting: nothing left to tell
                pass


_atexit.register(_close_loaders_at_exit)


def build(source, out, *, progress=None, **options):
    """Compile `source` into the dsc file `out`, as `dsc build SOURCE OUT` does.

    source: a CIFAR-10/100 download folder (binary or python version), a class-per-folder image tree
    (ROOT/<class>/*.jpg or ROOT/{train,test}/<class>/*.jpg), a manifest of 'path<TAB>label' lines, or
    WebDataset tar shards (a .tar, a folder of them, or 'shards-{000..099}.tar').
    Options (the flags of `dsc build`, with underscores): format ('auto', 'cifar-binary', 'cifar-python',
    'tree', 'manifest', 'webdataset'), split ('train', 'test'), encoding ('default', 'jpeg', 'raw', 'raw-zstd',
    'auto'), quality, subsampling ('444', '422', '420', 'gray'), max_resolution, center_crop, reencode,
    restart_interval ('auto', 'none' or MCUs per interval), jpeg_tables ('shared', 'inline'), block_size,
    threads, max_pixels, max_file_size, skip_invalid, shard ((index, count): that part of the source, for
    dsc.merge). Errors name these keywords, not the flags.
    progress: draw a progress bar on stderr (default: when stderr is a terminal).

    Returns a dict: format, samples, skipped, file_size, payload_bytes, jpeg_tables, encodings, seconds.
    Raises dsc.Error naming the file or sample at fault (`out` is then left untouched). The GIL is
    released while building.
    """
    if progress is None:
        progress = bool(getattr(_sys.stderr, "isatty", lambda: False)())
    return _dsc.build(_path(source, "source"), _path(out, "out"), dict(options, progress=progress))


def merge(parts, out, *, progress=None):
    """Join the parts of a sharded build (dsc.build(..., shard=(i, n)) for i in range(n)) into `out`,
    as `dsc merge PART... OUT` does: the file a one-machine build with the same options writes, byte for
    byte; payloads are copied, never re-encoded. Parts may come in any order. Raises dsc.Error naming
    the part when one is missing, repeated, damaged or built with other options (`out` is then left
    untouched). Returns a dict: parts, samples, file_size, payload_bytes, seconds.
    """
    if progress is None:
        progress = bool(getattr(_sys.stderr, "isatty", lambda: False)())
    return _dsc.merge([_path(p, "part") for p in parts], _path(out, "out"), progress)


def convert(ffcv_file, out, *, progress=None, **options):
    """Convert an FFCV .beton file into the dsc file `out`, as `dsc convert FFCV OUT` does: the same
    samples in the same order, JPEGs passed through (restart markers added losslessly), raw images
    raw, IntFields as labels. Every other FFCV field becomes a typed field of its name (IntField int64,
    FloatField float64, NDArrayField an array of its dtype and shape, JSONField text, BytesField bytes;
    docs/ffcv-format.md). Options as build's (threads, restart_interval, block_size). `ffcv_file` may be
    a URL (https://, s3://), streamed through cache_dir under cache_budget as dsc.Loader streams one
    (docs/streaming.md): the file written equals that of a local copy, byte for byte."""
    return build(ffcv_file, out, progress=progress, **dict(options, format="ffcv"))


def info(path):
    """A dict describing the dsc file at `path`: exactly the JSON object of `dsc info --json`."""
    return _json.loads(_dsc.info_json(_path(path, "path")))


def _distributed(rank, world_size):
    """rank / world_size: given (rank='env': RANK / WORLD_SIZE), else torch.distributed's when initialised,
    else RANK / WORLD_SIZE with a warning, else 0 / 1."""
    return _compat.distributed(rank, world_size, _torch)


class Loader:
    """Augmented, normalised batches of a dsc file, prepared by C++ threads (no GIL, no worker processes).

        loader = dsc.Loader("train.beton", preset="cifar-train", batch_size=512, seed=0)
        len(loader)                                   # batches per epoch on this rank
        for images, labels in loader.epoch(3): ...    # epoch 3 (any epoch, any order)
        for images, labels in loader: ...             # the next epoch (DataLoader-style)
        state = loader.state_dict()                   # torchdata StatefulDataLoader semantics
        loader.load_state_dict(state)                 # the next `for ... in loader` resumes there

    preset: 'cifar-train' (flip, translate 2, cutout 4 filled with the CIFAR mean, normalise),
    'cifar-test' (normalise, sequential), 'imagenet-train' (RandomResizedCrop(224), flip, normalise),
    'imagenet-test' (Resize(256) + CenterCrop(224), normalise, sequential), or None (no augmentation, no normalisation). Keyword options then override single fields; every
    field of the C++ LoaderOptions is reachable (dsc.LOADER_OPTIONS lists them; the same options are
    `dsc bench`'s flags in kebab-case, from one table). They are listed at the end of this text.

    - global_batch_size: fix this one, not batch_size, to keep batches the same when the rank count
      changes; with order 'sequential' every sample comes once, unpadded: on several ranks a rank's
      last batch may be short or hold 0 images, so that every rank yields the same number of batches;
    - drop_last=False (the default) and pad_last: on one rank the epoch's last batch is short, as
      torch's DataLoader gives it (every sample once); on several ranks (random, quasi_random) it is
      filled with repeats so that ranks have equal batches, as DistributedSampler pads, and each batch's
      .padding says which samples only pad. pad_last=True pads on one rank too, False never;
    - max_leases and lease_memory: batch buffers that may stand in for batches Python still holds (see below);
    - remote workers (`dsc serve`, docs/remote.md): batches are identical to a local run's;
    - dtype 'uint8' needs layout='NHWC' and normalize=False; defer_augment=True is C++ only (refused);
    - files larger than RAM (quasi_random on a mapped file, docs/distributed.md): cache_budget and
      readahead_bytes;
    - mean and std are in 0..255 pixel units; torchvision's 0..1 units are taken as
      normalize=dict(mean=..., std=..., scale='unit'), and 0..1-looking values passed as mean= and
      std= raise dsc.OptionError naming both conventions;
    - dtype and label_dtype take torch and NumPy dtypes (torch.float16, np.float16) as well as str.

    An unknown option raises TypeError naming the option meant (shuffle -> order, num_workers -> threads,
    batchsize -> batch_size, ...), a value of the wrong type TypeError, a bad value ValueError
    (dsc.OptionError), each naming the option and what is accepted; so does a crop option the crop mode
    does not use (out_size with crop 'none', scale with 'center', ...) set to other than its default.

    rank / world_size default to None: torch.distributed's when it is initialised, else the RANK and
    WORLD_SIZE environment variables with a RuntimeWarning that says what was taken (rank='env' takes
    them without one), else 0 and 1.

    Batches: dsc.Batch, the tuple (images, labels) with images N x C x H x W (layout 'NCHW') or
    N x H x W x C, labels int64 of shape (N,) (label_dtype='int32' for int32; a tuple of arrays for
    files with several label fields), and the attributes .padding (bool per sample: it only repeats
    another to fill the batch) and .indices (dataset index per sample, int64); with with_indices=True,
    the plain tuple (images, labels, indices, padding). Torch tensors when torch imports, NumPy arrays
    otherwise. A Loader runs one epoch at a time: starting another (loader.epoch(), iter(loader))
    makes a running iterator raise dsc.Error at its next step, so zip(loader, loader) needs two Loaders.

    torch.utils.data: len(loader), loader.set_epoch(e) (what the next `for` iterates), loader.classes,
    and loader.dataset() for torch.utils.data.DataLoader(loader.dataset(), batch_size=None) (whole
    batches, no copy, num_workers=0).

    Lifetime: by default the images are views of the loader's batch memory (no copy); labels, indices
    and padding are owned copies, so holding them keeps nothing. A batch's images stay valid as long
    as Python holds them (or a view of them); meanwhile the loader prepares the next batches in other
    buffers: max_leases spares beyond its ring of prefetch + 1, so an ordinary loop needs at most
    (prefetch + 1 + max_leases) batches. A loop that keeps more (a list of batches, outputs with their
    graphs over gradient accumulation) gets further buffers, freed as they come back, up to
    lease_memory bytes (default a quarter of this machine's memory), with one RuntimeWarning. Past
    it, after 3 s of waiting for a buffer for the next batch, it raises dsc.Error saying how many
    batches Python holds: keep fewer or copies (copy=True), or raise lease_memory. A batch that is
    merely slow to make is waited for however long it takes.
    copy=True hands out owned tensors instead; pin_memory=True owned tensors in pinned memory (needs a
    CUDA build of torch; without one it warns and behaves as copy=True, as torch's DataLoader does).

    transforms: torchvision's augmentations by name, run per sample by the C++ threads after decode and
    crop (dsc.T mirrors torchvision's classes: [dsc.T.RandomCrop(32, padding=4), dsc.T.ColorJitter(0.4,
    0.4, 0.4)], or the text 'random_crop(32,padding=4),color_jitter(0.4,0.4,0.4)'); docs/augment.md.
    Python callables are refused (they would need the GIL per image); batch_transform=fn instead calls
    fn(images, labels) -> (images, labels) on each whole batch in the consumer's thread, after the
    loader (e.g. torch ops on the GPU batch): its cost is the consumer's, once per batch.

    tracer: a dsc.Tracer (e.g. dsc.trace.default()) to record the workers' read / decode / augment /
    collate spans into, next to the training loop's own phases (see dsc.trace); None records nothing.

    Errors: a damaged sample raises dsc.Error naming the file and the sample index. Ctrl-C interrupts
    a wait for a batch within 100 ms (KeyboardInterrupt). A Loader created before fork() raises
    dsc.Error("create the Loader after fork ...") in the child: create it inside the worker instead.

    Options:
    """

    def __new__(cls, *args, views=None, **options):
        # Loader(path, views=N or [dict, ...]) is dsc.Views: N independently augmented views per sample.
        if views is not None:
            return Views(*args, views=views, **options)
        return super().__new__(cls)

    def __init__(self, path, preset=None, *, rank=None, world_size=None, copy=False, pin_memory=False, tracer=None,
                 pad_last=None, batch_transform=None, ragged="list", views=None, **options):
        rank, world_size = _distributed(rank, world_size)
        if ragged not in ("list", "offsets", "padded"):
            raise ValueError(f"ragged must be 'list', 'offsets' or 'padded', got {ragged!r}")
        self._ragged = ragged  # typed files' variable arrays: see dsc.writer.field_value
        if options.get("transforms") is not None and not isinstance(options["transforms"], str):
            options["transforms"] = T.to_spec(options["transforms"])
        if batch_transform is not None and not callable(batch_transform):
            raise TypeError(f"batch_transform must be callable (images, labels) -> (images, labels), got {batch_transform!r}")
        self.batch_transform = batch_transform
        self._path = _os.fspath(path)
        if tracer is not None and not isinstance(tracer, Tracer):
            raise TypeError(f"tracer must be a dsc.Tracer, got {type(tracer).__name__}")
        if pad_last not in (None, True, False):
            raise TypeError(f"pad_last must be None, True or False, got {pad_last!r}")
        folder = _compat.not_a_dsc_file(path)
        if folder is not None:
            raise folder
        for name in ("dtype", "label_dtype"):  # torch.float16, np.float16 as well as 'float16'
            if name in options:
                options[name] = _compat.dtype_name(options[name])
        options = _compat.normalize_option(options)
        try:
            self._core = _dsc.Loader(_path(path, "path"), preset, dict(options, rank=rank, world_size=world_size), tracer)
        except Error as e:
            hinted = _compat.build_hint(path, e)
            if hinted is e:
                raise
            raise hinted from None
        self._pid = _os.getpid()
        _live_loaders.add(self)
        core_info = self._core.info()
        # One rank hands its last batch out short, as torch's DataLoader does; several keep the padding
        # that gives every rank equal batches (as DistributedSampler pads), flagged in Batch.padding.
        self._trim = pad_last is False or (pad_last is None and core_info["world_size"] == 1)
        self._max_leases = core_info["max_leases"]
        self._pool_base = core_info["prefetch"] + 1 + core_info["max_leases"]  # buffers before lease_memory's
        self._lease_memory = core_info.get("lease_memory", 0)
        self._warned_held = False
        self._classes = None
        self._restored_epoch = None
        self.copy = bool(copy)
        self.pin_memory = bool(pin_memory)
        if self.pin_memory and not (_torch is not None and _torch.cuda.is_available()):
            _warnings.warn("dsc.Loader: pin_memory=True needs a CUDA build of torch with a GPU; "
                           "handing out owned (unpinned) tensors instead", RuntimeWarning, stacklevel=2)
            self.pin_memory = False
            self.copy = True
        self._next_epoch = 0
        self._resume = False
        self._range = 0  # bumped by each start: an older iterator then ends instead of reading the new range
        # torchdata's rule for a state saved after an epoch's last batch but before its loop ended:
        # the first iteration after load_state_dict is that epoch's (empty) rest, not the next epoch.
        self._open = False         # the current range has not reported its end yet
        self._last_index = None    # index of the last batch it handed out
        self._range_len = 0        # batches in its plan (len(self), but for a resumed quasi_random rest)
        self._empty_rest = False   # restored such a state: the next __iter__ yields nothing

    def __len__(self):
        """Batches per epoch on this rank (a full epoch)."""
        return len(self._core)

    @property
    def rank(self):
        return self._core.info()["rank"]

    @property
    def world_size(self):
        return self._core.info()["world_size"]

    @property
    def batch_size(self):
        """Samples per batch on this rank."""
        return self._core.info()["batch_size"]

    @property
    def image_size(self):
        """(height, width) of the images handed out."""
        i = self._core.info()
        return i["height"], i["width"]

    @property
    def threads(self):
        return self._core.info()["threads"]

    def epoch(self, epoch, *, first_batch=0, with_indices=False, copy=None):
        """An iterator over the batches of `epoch` (from `first_batch`). Starting one ends any other (which
        then raises dsc.Error at its next step).

        The same epoch with the same seed gives the same batches, whatever the thread count.
        """
        epoch, first_batch = _index(epoch, "epoch"), _index(first_batch, "first_batch")
        if not (0 <= epoch < 2**64 and 0 <= first_batch < 2**64):
            raise ValueError(f"epoch and first_batch must be in [0, 2**64), got {epoch} and {first_batch}")
        core_range = self._core.start(epoch, first_batch)
        self._range += 1
        self._next_epoch = epoch + 1
        self._resume = False
        self._empty_rest = False
        self._open, self._last_index, self._range_len = True, None, self._core.range_size()
        return self._batches(with_indices, self.copy if copy is None else copy, self._range, core_range)

    def __iter__(self):
        """The next epoch; after load_state_dict, the rest of the checkpointed epoch, exactly the batches
        an uninterrupted run would have produced. As torchdata's StatefulDataLoader: a state taken after
        the epoch's last batch but inside its loop gives an empty rest first, one taken after the loop
        ended resumes at the next epoch."""
        if self._empty_rest:
            # The checkpointed epoch had handed out its last batch: its rest is empty, and the next
            # iteration resumes (at the next epoch), as torchdata's StatefulDataLoader does.
            self._empty_rest = False
            self._range += 1
            self._open, self._last_index = False, None
            return iter(())
        if self._resume:
            self._resume = False
            core_range = self._core.resume()
        else:
            if self._next_epoch > 2**64 - 1:  # else a bare TypeError from the binding
                raise Error("epoch 2**64-1 was the last: there is no next epoch")
            core_range = self._core.start(self._next_epoch, 0)
            self._next_epoch += 1
        self._range += 1
        self._open, self._last_index, self._range_len = True, None, self._core.range_size()
        return self._batches(False, self.copy, self._range, core_range)

    def _batches(self, with_indices, copy, token, core_range):
        # token: this iterator's range here; core_range: the same in the core, which checks it under its
        # lock (a thread that starts another range between the check above and next() cannot lose a batch).
        core = self._core
        wrap = _torch.from_numpy if _torch is not None else (lambda a: a)
        pin = self.pin_memory
        while True:
            if token != self._range:
                raise _ended_by_another()
            b = core.next(bool(copy or pin), core_range)
            if b is None:
                if token != self._range:
                    raise _ended_by_another()
                self._open = False
                return
            images, labels, indices, padding, epoch, index = b[:6]
            typed = b[6] if len(b) > 6 else []
            self._next_epoch = epoch + 1
            self._last_index = index
            if not (copy or pin):
                self._check_held()
            if self._trim and padding.any():
                images, labels, indices, padding = _compat.trim_padding(images, labels, indices, padding)
            images = wrap(images)
            labels = [wrap(x) for x in labels]
            if pin:
                images = images.pin_memory()
                labels = [x.pin_memory() for x in labels]
            if typed:  # typed fields (format 1.2): a dict per batch, by field name
                if getattr(self, "_names", None) is None:  # the image's and the labels' names, once
                    self._names = core.info()["image_and_labels"]
                out = {self._names[0]: images}
                for name, x in zip(self._names[1:], labels):
                    out[name] = x
                for name, kind, values, offsets, shape in typed:
                    out[name] = _writer.field_value(kind, values, offsets, shape, len(indices), wrap, self._ragged)
                if with_indices:
                    out["indices"], out["padding"] = wrap(indices.astype("int64")), wrap(padding)
                yield out
                continue
            labels = labels[0] if len(labels) == 1 else tuple(labels)
            if self.batch_transform is not None:
                if getattr(self.batch_transform, "takes_batch_index", False):
                    images, labels = self.batch_transform(images, labels, epoch=epoch, batch=index)
                else:
                    images, labels = self.batch_transform(images, labels)
            # int64: torch has no uint32 tensors (a copy of N integers)
            indices = wrap(indices.astype("int64"))
            if with_indices:
                yield images, labels, indices, wrap(padding)
            else:
                yield Batch((images, labels), wrap(padding), indices)

    def _check_held(self):
        """Warns once when Python keeps so many batches that the loader lends it buffers beyond its ring
        and max_leases spares (up to lease_memory): memory a loop that drops its batches does not need."""
        if self._warned_held or self._core.buffers_allocated() <= self._pool_base:
            return
        held = self._core.leased()
        self._warned_held = True
        _warnings.warn(f"dsc.Loader: Python holds {held} batches of this loader, more than its ring and max_leases "
                       f"({self._max_leases}) spares cover: it lends more batch buffers, up to lease_memory "
                       f"({self._lease_memory >> 20} MiB), and raises past it. If that is not meant, keep fewer "
                       "(loss.item(), detached outputs) or copies (copy=True, or .clone() what you keep). "
                       "Said once per Loader.", RuntimeWarning, stacklevel=3)

    def set_epoch(self, epoch):
        """The epoch the next `for ... in loader` iterates, as DistributedSampler.set_epoch (Lightning and
        Accelerate call it). After load_state_dict, naming the checkpoint's epoch keeps the resume."""
        epoch = _index(epoch, "epoch")
        if not 0 <= epoch < 2**64:
            raise ValueError(f"epoch must be in [0, 2**64), got {epoch}")
        if (self._resume or self._empty_rest) and epoch == self._restored_epoch:
            return
        self._resume = self._empty_rest = False
        self._next_epoch = epoch

    @property
    def classes(self):
        """The class names of the first label field (dsc.info(path)['classes']), indexed by label."""
        if self._classes is None:
            self._classes = info(self._path).get("classes", [])  # FFCV files name no classes
        return self._classes

    def dataset(self):
        """This loader as a torch.utils.data.IterableDataset of whole batches, for code that insists on a
        Dataset: torch.utils.data.DataLoader(loader.dataset(), batch_size=None) yields the loader's
        batches, without a copy (num_workers must stay 0: dsc decodes in its own threads)."""
        if _torch is None:
            raise ImportError("Loader.dataset() needs torch")
        return _compat.dataset(self)

    def __getitem__(self, i):
        raise TypeError("a dsc.Loader yields whole batches and has no samples to index: iterate it (for x, y in loader), "
                        "or, where a Dataset is required, torch.utils.data.DataLoader(loader.dataset(), batch_size=None)")

    def state_dict(self):
        """Where the run is, as torchdata's StatefulDataLoader.state_dict(): a dict to save with a checkpoint.

        It counts the batches handed out so far in global batches and carries the run's fingerprint
        (file, options, seed), so load_state_dict refuses another run's state, and a state saved on W
        ranks resumes on W' ranks (for quasi_random, merge the ranks' states with dsc.merge_state_dicts).
        """
        # Taken after an epoch's last batch but before its loop ended: restoring it replays the loop's
        # end (an empty rest of the epoch) before the next epoch, so epoch counts stay aligned.
        pending = self._empty_rest or (self._open and self._last_index is not None and self._last_index + 1 == self._range_len)
        return {"dsc_loader_state": self._core.state(), "version": 1, "epoch_end_pending": bool(pending)}

    def load_state_dict(self, state):
        """Continue from `state` (from state_dict()): the next `for ... in loader` resumes there."""
        raw, pending = _checked_state(state, "load_state_dict")
        self._core.restore(raw)
        self._restored_epoch = _dsc.state_epoch(raw)
        self._range += 1
        self._resume = True
        self._empty_rest = pending
        self._open, self._last_index = False, None

    def stats(self, reset=False):
        """Worker time per stage since the loader started (or the last reset=True), as dsc bench reports it:
        read_s, decode_s, augment_s, collate_s (summed over threads), consumer_wait_s (time the training loop
        waited for batches), samples, payload_bytes, advised_bytes (block readahead asked of storage),
        largest_stage ('read', 'decode', 'augment' or 'collate'; None before any sample) and largest_share.
        All zeros unless the Loader was made with collect_stats=True."""
        if not isinstance(reset, bool):
            raise TypeError(f"reset must be a bool, got {type(reset).__name__}")
        return self._core.stats(reset)

    def buffers_allocated(self):
        """Batch buffers alive: ring, spares and leased ones (at most prefetch + 1 + max_leases)."""
        return self._core.buffers_allocated()

    def leased(self):
        """Batches whose memory Python still holds."""
        return self._core.leased()

    def close(self):
        """Stops the worker threads now (else when the Loader is garbage collected). Batches still held stay valid.

        Safe from another thread (a call in progress there finishes first, later ones raise dsc.Error) and
        from a signal handler that interrupted a wait for a batch (the iteration then ends). A handler
        may not start, resume or restore the loader it interrupted: that raises dsc.Error."""
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def _not_copyable(self, *args):
        # A shallow copy shared the C++ loader: iterating the copy cut the original's epoch short and
        # closing it closed both. Its threads and memory cannot travel to another process either.
        raise TypeError("a dsc.Loader cannot be copied or pickled: make another dsc.Loader with the same options "
                        "(in a DataLoader worker or a spawned process, build it there)")

    __copy__ = __deepcopy__ = __reduce__ = __reduce_ex__ = _not_copyable


def _ended_by_another():
    return Error("this iteration over a dsc.Loader was ended by another iteration of the same Loader (loader.epoch(), "
                 "iter(loader), set_epoch or load_state_dict): a Loader runs one epoch at a time, so zip(loader, loader) or "
                 "nested loops over one loader need two Loaders")


def checksum(array):
    """dsc's checksum (XXH3-64, docs/format.md) of a C-contiguous array's bytes (a tensor: pass .numpy())."""
    return _dsc.checksum(array)


def random_subset(total, n, seed):
    """The seeded random subset of n of `total` sample indices that `dsc train --limit n --seed seed`
    trains on ([] = all samples when n is 0 or >= total); pass it as Loader(subset=...)."""
    return _dsc.random_subset(int(total), int(n), int(seed))


def _checked_state(state, what):
    """(state bytes, epoch_end_pending) of a state_dict() dict, its types checked: bytes(300000000) of a
    mistyped checkpoint would allocate 300 MB of zeros before the state's own checks refused them."""
    if not isinstance(state, dict) or "dsc_loader_state" not in state:
        raise TypeError(what + " expects a dict made by dsc.Loader.state_dict()")
    raw = state["dsc_loader_state"]
    if not isinstance(raw, (bytes, bytearray, memoryview)):
        raise TypeError(what + ": 'dsc_loader_state' must be bytes, not " + type(raw).__name__)
    version = state.get("version", 1)
    if isinstance(version, bool) or version != 1:
        raise ValueError(what + ": state_dict version " + repr(version) + " is not 1 (made by another dsc?)")
    pending = state.get("epoch_end_pending", False)
    if not isinstance(pending, bool) and type(pending).__name__ != "bool_":  # numpy.bool_ too
        raise TypeError(what + ": 'epoch_end_pending' must be a bool, not " + type(pending).__name__)
    return bytes(raw), bool(pending)


def merge_state_dicts(states):
    """One state from the state_dict() of every rank of one run (quasi_random on another rank count).

    The ranks must have saved at the same point of their loops: all inside it after the epoch's last
    batch, or none (epoch_end_pending), else ValueError."""
    checked = [_checked_state(s, "merge_state_dicts") for s in states]
    pending = {p for _, p in checked}
    if len(pending) > 1:
        raise ValueError("merge_state_dicts: some ranks saved after their epoch's last batch inside the loop and "
                         "others not (epoch_end_pending differs): save every rank's state at the same step")
    return {"dsc_loader_state": _dsc.merge_states([raw for raw, _ in checked]), "version": 1,
            "epoch_end_pending": pending.pop() if pending else False}


# help(dsc.Loader) lists every option from the option table (reader/option_table.h).
Loader.__doc__ += "\n" + _dsc.loader_options_doc()
