"""dsc.Writer: write any samples (typed fields, format 1.2) from Python.

    schema = {"image": "image", "label": ("label", ["cat", "dog"]), "boxes": "float32[*,4]",
              "embedding": "float32[128]", "score": "float64", "caption": "text", "raw": "bytes"}
    with dsc.Writer("out.beton", schema) as w:
        w.add({"image": jpeg_bytes_or_PIL_image, "label": 1, "boxes": np.zeros((3, 4), "float32"),
               "embedding": emb, "score": 0.5, "caption": "a cat", "raw": b"..."})

Types: "image" (JPEG/PNG bytes, a pathlib.Path (or any os.PathLike) of such a file, read by the
writer's encode threads, a PIL image or an H x W x 3 uint8 array; the first field, and any later ones
for further images of any size, format 1.3, each loaded with dsc.Loader(..., image=NAME)), "mask" or "mask[3]" (a
1- or 3-channel map of the image's size: an H x W (x 3) uint8 array, a PIL image of mode L or P
(palette indices are kept) or PNG bytes; stored losslessly, it follows the image's crops and flips
when loaded, nearest-neighbour), "label"
(an int32 class; ("label", class_names) names them), a dtype ("int8" .. "uint64", "float16",
"float32", "float64", "bool") for a scalar, "DTYPE[D1,D2]" for a fixed-shape array, "DTYPE[*,D2]" for
a variable first dimension, "bytes" (bytes, or a path whose file's contents they are),
"text". ("DTYPE", class_names) names an integer scalar's values.
The file is byte-identical for any `threads`, and appears only when close() succeeds.
"""
import os as _os

import numpy as _np

from . import _dsc

_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "bool")


def _parse_type(name, spec):
    classes = []
    if isinstance(spec, (tuple, list)):
        spec, classes = spec
        classes = [str(c) for c in classes]
    if not isinstance(spec, str):
        raise TypeError(f"field {name!r}: type must be a str such as 'float32[*,4]', got {spec!r}")
    if spec in ("image", "label", "text", "bytes"):
        return (name, spec, "", [], classes)
    if spec in ("mask", "mask[1]", "mask[3]"):
        return (name, "mask", "uint8", [3 if spec == "mask[3]" else 1], classes)
    base, _, rest = spec.partition("[")
    if base not in _DTYPES:
        raise ValueError(f"field {name!r}: unknown type {spec!r} (image, label, text, bytes, a dtype, DTYPE[D,..], DTYPE[*,D,..])")
    if not rest:
        return (name, "scalar", base, [], classes)
    if not rest.endswith("]"):
        raise ValueError(f"field {name!r}: {spec!r} lacks its closing ]")
    dims = [d.strip() for d in rest[:-1].split(",")] if rest[:-1] else []
    var = bool(dims) and dims[0] == "*"
    if var:
        dims = dims[1:]
    try:
        shape = [int(d) for d in dims]
    except ValueError:
        raise ValueError(f"field {name!r}: bad shape in {spec!r}") from None
    return (name, "var_array" if var else "array", base, shape, classes)


def _mask_value(name, v, channels):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ("image", bytes(v), 0, 0, "")  # PNG bytes, checked and kept as they are
    if isinstance(v, _os.PathLike):  # a PNG file, read by the writer
        return ("file", _os.fsencode(v), 0, 0, "")
    if hasattr(v, "mode") and hasattr(v, "tobytes"):  # a PIL image: L or P keep their values, RGB for mask[3]
        if channels == 1 and v.mode not in ("L", "P", "1"):
            raise TypeError(f"field {name!r}: a 1-channel mask from a PIL image of mode {v.mode} (expected L or P)")
        if channels == 3 and v.mode != "RGB":
            v = v.convert("RGB")
        v = _np.asarray(v, dtype=_np.uint8)
    a = _np.asarray(v)
    if a.dtype == _np.bool_:
        a = a.astype(_np.uint8)
    if a.dtype != _np.uint8 or not (a.ndim == 2 and channels == 1 or a.ndim == 3 and a.shape[2] == channels):
        want = "H x W" if channels == 1 else "H x W x 3"
        raise TypeError(f"field {name!r}: a mask is PNG bytes, a PIL image or an {want} uint8 array, got "
                        f"{getattr(a, 'dtype', type(v).__name__)} of shape {getattr(a, 'shape', None)}")
    return ("mask", _np.ascontiguousarray(a).tobytes(), a.shape[1], a.shape[0], channels)


def _image_value(name, v):
    if isinstance(v, (bytes, bytearray, memoryview)):
        return ("image", bytes(v), 0, 0, "")
    if isinstance(v, _os.PathLike):  # read on the encode threads, checked (exists, size) in add()
        return ("file", _os.fsencode(v), 0, 0, "")
    if isinstance(v, str):
        raise TypeError(f"field {name!r}: a str is not read as a path; pass pathlib.Path({v[:40]!r}) for a file")
    if hasattr(v, "mode") and hasattr(v, "tobytes"):  # a PIL image: its pixels, in RGB
        rgb = v.convert("RGB") if v.mode != "RGB" else v
        return ("pixels", rgb.tobytes(), rgb.width, rgb.height, "")
    a = _np.asarray(v)
    if a.dtype != _np.uint8 or a.ndim != 3 or a.shape[2] != 3:
        raise TypeError(f"field {name!r}: an image is encoded bytes, a path (os.PathLike), a PIL image or an H x W x 3 uint8 array, got {type(v).__name__}")
    return ("pixels", _np.ascontiguousarray(a).tobytes(), a.shape[1], a.shape[0], "")


class Writer:
    """Writes samples of `schema` (a dict name -> type, in field order; see the module's doc) to `path`.

    Options: threads (0 = all cores), block_size, jpeg_tables, encoding, quality, subsampling,
    max_resolution, restart_interval, max_file_size (as `dsc build`'s flags). Use as a context manager,
    or call close(). A full window of samples is encoded in the background while add() takes the next,
    so an image that fails to encode (or a file that fails to read) may be reported by a later add()
    or by close(), naming its own sample; the writer has failed then, and leaves no file.
    """

    def __init__(self, path, schema, **options):
        items = list(schema.items())
        self._fields = [_parse_type(n, t) for n, t in items]
        self._core = _dsc.Writer(str(path), self._fields, options)
        self._closed = False

    def add(self, sample):
        """Adds one sample: a dict with a value for every field of the schema."""
        values = {}
        for name, kind, dtype, shape, _ in self._fields:
            if name not in sample:
                raise ValueError(f"field {name!r}: missing from the sample")
            v = sample[name]
            if kind == "image":
                values[name] = _image_value(name, v)
            elif kind == "mask":
                values[name] = _mask_value(name, v, shape[0])
            elif kind == "label":
                try:
                    values[name] = ("raw", int(v).to_bytes(4, "little", signed=True), 0, 0, "int32")
                except OverflowError:
                    raise ValueError(f"field {name!r}: label {int(v)} out of range (int32)") from None
            elif kind == "text":
                if not isinstance(v, str):
                    raise TypeError(f"field {name!r}: expected str, got {type(v).__name__}")
                values[name] = ("text", v.encode("utf-8"), 0, 0, "")
            elif kind == "bytes":
                if isinstance(v, _os.PathLike):
                    values[name] = ("file", _os.fsencode(v), 0, 0, "")
                    continue
                if not isinstance(v, (bytes, bytearray, memoryview)):
                    raise TypeError(f"field {name!r}: expected bytes, got {type(v).__name__}")
                values[name] = ("bytes", bytes(v), 0, 0, "")
            else:
                a = _np.asarray(v)
                want = _np.dtype(dtype).newbyteorder("<")
                if a.dtype != want and not _np.can_cast(a.dtype, want, casting="same_kind"):
                    raise TypeError(f"field {name!r}: {a.dtype} values do not convert to {dtype}")
                if a.dtype.kind == "f" and want.kind in "iub":
                    raise TypeError(f"field {name!r}: {a.dtype} values do not convert to {dtype}")
                a = _np.asarray(a, dtype=want, order="C")  # (ascontiguousarray would make a scalar 1-D)
                expect = tuple(shape)
                if kind in ("scalar", "array") and a.shape != expect:
                    raise ValueError(f"field {name!r}: shape {a.shape}, the schema says {expect}")
                if kind == "var_array" and (a.ndim != 1 + len(shape) or a.shape[1:] != expect):
                    raise ValueError(f"field {name!r}: shape {a.shape}, the schema says (N, {', '.join(map(str, shape))})")
                values[name] = ("raw", a.tobytes(), 0, 0, dtype)
        extra = set(sample) - {f[0] for f in self._fields}
        if extra:
            raise ValueError(f"no field named {sorted(extra)[0]!r} in the schema")
        self._core.add(values)

    def close(self):
        """Writes the file (atomically); returns its size in bytes."""
        self._closed = True
        return self._core.close()

    def __len__(self):
        return self._core.samples()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, *exc):
        if exc_type is None and not self._closed:
            self.close()


def field_value(kind, values, offsets, shape, size, wrap, ragged="list"):
    """A batch's column as the loader yields it: a tensor [B, ...] (fixed fields); a variable array as
    a list of tensors (views of one buffer; ragged="list"), as (values [sum N_i, ...], offsets [B + 1]
    in rows; "offsets") or as (padded [B, max N_i, ...] zero-filled, lengths [B]; "padded"); bytes
    and text as lists of bytes / str. uint16/32/64 values stay NumPy arrays (torch 1.13 has no such
    tensors)."""
    if values.dtype.kind == "u" and values.dtype.itemsize > 1:
        wrap = lambda a: a  # noqa: E731
    if offsets is None:  # [:size]: a batch trimmed of its padding keeps its first `size` rows
        return wrap(values.reshape((-1,) + tuple(shape))[:size])
    offsets = offsets[:size + 1]
    if kind == "var_array" and ragged != "list":
        row_bytes = values.dtype.itemsize * (int(_np.prod(shape)) if shape else 1)
        rows = (offsets // row_bytes).astype(_np.int64)
        flat = values.reshape((-1,) + tuple(shape))[:rows[-1]]
        if ragged == "offsets":
            return wrap(flat), wrap(rows)
        lengths = rows[1:] - rows[:-1]
        padded = _np.zeros((size, int(lengths.max()) if size else 0) + tuple(shape), dtype=values.dtype)
        for i in range(size):
            padded[i, :lengths[i]] = flat[rows[i]:rows[i + 1]]
        return wrap(padded), wrap(lengths)
    out = []
    raw = values.view(_np.uint8) if kind == "var_array" else values
    item = values.dtype.itemsize
    row = int(_np.prod(shape)) if shape else 1
    for i in range(size):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        if kind == "var_array":
            out.append(wrap(values[lo // item:hi // item].reshape((-1,) + tuple(shape)) if row else values[0:0]))
        elif kind == "text":
            out.append(bytes(raw[lo:hi]).decode("utf-8"))
        else:
            out.append(bytes(raw[lo:hi]))
    return out
