"""Fixtures: dsc files built from the real CIFAR-10 JPEGs that tests/CMakeLists.txt unpacks into the
build tree (DSC_TESTDATA), and the dsc program (DSC_BINARY) that the module is compared with."""
import os
import pathlib

import pytest

import dsc

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


def _env(name):
    v = os.environ.get(name)
    if not v:
        pytest.fail(f"{name} is not set (run the suite through ctest, which sets it)")
    return v


@pytest.fixture(scope="session")
def testdata():
    p = pathlib.Path(_env("DSC_TESTDATA")).resolve() / "cifar10"
    if not (p / ".unpacked").exists():
        pytest.fail(f"{p} is not unpacked (build the dsc_testdata target)")
    return p


@pytest.fixture(scope="session")
def dsc_binary():
    return _env("DSC_BINARY")


def write_manifest(root, split, per_class, path):
    """per_class real images of each class, classes interleaved; returns [(file, label)]."""
    rows = []
    for k in range(per_class):
        for label, c in enumerate(CLASSES):
            rows.append((str(root / split / c / f"{k:04d}.jpg"), label))
    with open(path, "w") as f:
        for p, label in rows:
            f.write(f"{p}\t{label}\n")
    return rows


@pytest.fixture(scope="session")
def small(testdata, tmp_path_factory):
    """1,000 real CIFAR-10 train JPEGs (100 per class) as a dsc file (JPEG pass-through)."""
    d = tmp_path_factory.mktemp("small")
    rows = write_manifest(testdata, "train", 100, d / "m.txt")
    out = d / "small.beton"
    dsc.build(d / "m.txt", out, format="manifest", threads=2)
    return out, rows
