"""FFCV's own .beton files through import dsc: dsc.info names FFCV's fields, dsc.Loader with
idct="fast" returns FFCV's pixels and every other FFCV field as a typed field, directly; dsc.convert
writes a dsc file that decodes to them too and keeps those fields."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

import dsc

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def ffcv_samples(tmp_path_factory):
    shared = pathlib.Path(os.environ.get("DSC_SHARED_DATA") or SOURCE_DIR.parent / "shared" / "data")
    archive = shared / "ffcv-samples.tar.zst"
    if not archive.is_file():
        pytest.fail(f"{archive} does not exist (set DSC_SHARED_DATA to its folder)")
    d = tmp_path_factory.mktemp("ffcv")
    subprocess.run(f"zstd -dc {archive} | tar -x -C {d}", shell=True, check=True)
    return d / "ffcv-samples"


def _epoch(path, **options):
    loader = dsc.Loader(str(path), preset="cifar-test", batch_size=100, dtype="uint8", layout="NHWC", normalize=False,
                        copy=True, **options)
    assert loader.classes == []  # FFCV files name no classes (dsc.info has no 'classes' for them)
    images, labels, order = [], [], []
    for x, y, idx, _ in loader.epoch(0, with_indices=True):
        images.append(np.asarray(x))
        labels.append(np.asarray(y))
        order.append(np.asarray(idx))
    return np.concatenate(images), np.concatenate(labels), np.concatenate(order)


def test_info_names_ffcvs_fields(ffcv_samples):
    info = dsc.info(ffcv_samples / "allfields.beton")
    assert info["format"] == "ffcv"
    assert [(f["name"], f["type"]) for f in info["fields"]] == [
        ("image", "RGBImageField"), ("label", "IntField"), ("score", "FloatField"), ("emb", "NDArrayField"),
        ("mask", "NDArrayField"), ("meta", "JSONField"), ("blob", "BytesField")]
    assert info["fields"][4]["shape"] == [8, 8]
    # what dsc convert writes each as (label holds INT64_MIN and INT64_MAX: no int32 label)
    assert [f["dsc_type"] for f in info["fields"]] == ["image", "int64", "float64", "float32[16]", "uint8[8,8]", "text",
                                                      "bytes"]


def test_loader_and_convert_give_ffcvs_pixels(ffcv_samples, tmp_path):
    ref = np.load(ffcv_samples / "cifar-test-smart.npz")
    images, labels, order = _epoch(ffcv_samples / "cifar-test-smart.beton", idct="fast")
    assert sorted(order.tolist()) == list(range(2000))
    assert np.array_equal(images, ref["images"][order])
    assert np.array_equal(labels.reshape(-1), ref["labels"][order])
    out = tmp_path / "converted.beton"
    dsc.convert(ffcv_samples / "cifar-test-smart.beton", out, threads=2)
    images2, labels2, order2 = _epoch(out, idct="fast")
    assert np.array_equal(images2, ref["images"][order2])


def _np(x):
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def _check_all_fields(path, ref):
    """dsc.Loader over `path` (allfields.beton or a conversion of it) yields dict batches whose every
    value equals what FFCV returned (allfields.npz), bit for bit."""
    # Images of 20..60 px: a centre crop of the shorter side resized to 20x20 is the image's own
    # centre, untouched, where the shorter side is 20.
    loader = dsc.Loader(str(path), order="sequential", batch_size=64, dtype="uint8", layout="NHWC", normalize=False,
                        crop="center", center_ratio=1.0, out_size=20, threads=2, copy=True)
    seen, exact = 0, 0
    for b in loader.epoch(0):
        assert isinstance(b, dict)
        assert list(b) == ["image", "label", "score", "emb", "mask", "meta", "blob"]
        n = len(b["label"])
        for j in range(n):
            i = seen + j
            assert _np(b["label"])[j] == ref["label"][i]
            assert _np(b["label"]).dtype == np.int64
            assert _np(b["score"])[j].tobytes() == ref["score"][i].tobytes()  # bit for bit
            assert np.array_equal(_np(b["emb"][j]), ref["emb"][i]) and _np(b["emb"][j]).dtype == np.float32
            assert _np(b["emb"][j]).tobytes() == ref["emb"][i].tobytes()
            assert np.array_equal(_np(b["mask"][j]), ref["mask"][i]) and _np(b["mask"][j]).shape == (8, 8)
            # FFCV's JSONField.unpack: the text up to its NUL, and json.loads of it
            assert b["meta"][j] == str(ref["meta"][i])
            assert json.loads(b["meta"][j]) == json.loads(str(ref["meta"][i]))
            assert b["blob"][j] == ref["blob_%05d" % i].tobytes()
            img = ref["image_%05d" % i]
            h, w = img.shape[:2]
            if min(h, w) == 20:
                top, left = (h - 20) // 2, (w - 20) // 2
                assert np.array_equal(_np(b["image"][j]), img[top:top + 20, left:left + 20]), i
                exact += 1
        seen += n
    assert seen == 300 and exact > 0


def test_loader_gives_every_ffcv_field_directly(ffcv_samples):
    """allfields.beton (FFCV's writer: every built-in field type) read as it is, no conversion: the
    dict batches a typed dsc file gives, each value what FFCV returned."""
    _check_all_fields(ffcv_samples / "allfields.beton", np.load(ffcv_samples / "allfields.npz"))


def test_convert_keeps_every_ffcv_field(ffcv_samples, tmp_path):
    """allfields.beton converted, then read back through dsc.Loader's dict batches: each value equals
    what FFCV returned (allfields.npz)."""
    ref = np.load(ffcv_samples / "allfields.npz")
    out = tmp_path / "all.beton"
    dsc.convert(ffcv_samples / "allfields.beton", out, threads=2)
    info = dsc.info(out)
    assert [(f["name"], f["type"]) for f in info["fields"]] == [
        ("image", "image"), ("label", "scalar"), ("score", "scalar"), ("emb", "array"), ("mask", "array"),
        ("meta", "text"), ("blob", "bytes")]
    _check_all_fields(out, ref)
    # The same file for any thread count.
    dsc.convert(ffcv_samples / "allfields.beton", tmp_path / "all1.beton", threads=1)
    assert (tmp_path / "all1.beton").read_bytes() == out.read_bytes()


def test_crops_from_entry_points_equal_crops_from_the_top(ffcv_samples):
    """FFCV's JPEGs have no restart markers: from an image's second crop on, the loader decodes only the
    MCUs the crop covers from entry points it kept (jpeg_index_budget); the pixels are those of a decode
    from the top (jpeg_index_budget=0), over epochs, on FFCV's own file (small crops: most lie inside one
    of a 32x32 image's two MCU rows)."""
    def epochs(**kw):
        loader = dsc.Loader(str(ffcv_samples / "cifar-test-smart.beton"), preset="imagenet-train", out_size=24,
                            scale=(0.05, 0.3), batch_size=250, dtype="uint8", layout="NHWC", normalize=False,
                            threads=2, seed=4, copy=True, **kw)
        return [np.asarray(x) for e in range(3) for x, *_ in loader.epoch(e)]
    seek, top = epochs(), epochs(jpeg_index_budget=0)
    assert len(seek) == len(top) == 24
    assert all(np.array_equal(a, b) for a, b in zip(seek, top))
    assert len({a.tobytes() for a in seek[:8]}) == 8  # the crops differ from batch to batch
