"""FFCV's own .beton files through import dsc: dsc.info names FFCV's fields, dsc.Loader with
idct="fast" returns FFCV's pixels, dsc.convert writes a dsc file that decodes to them too."""
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
    with pytest.raises(dsc.Error, match="need typed fields"):
        dsc.convert(ffcv_samples / "allfields.beton", tmp_path / "x.beton")
    assert not (tmp_path / "x.beton").exists()
