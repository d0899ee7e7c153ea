"""Fixtures: dsc files built from the real CIFAR-10 JPEGs, and the dsc program (DSC_BINARY) that the
module is compared with.

ctest sets DSC_TESTDATA (the build tree's unpacked CIFAR-10), DSC_BINARY, DSC_TRAIN_BINARY and
DSC_SOURCE_DIR. Run by hand against an installed package (`pip install .`), each falls back: the dsc
program beside the interpreter or on PATH, dsc-train beside it, this checkout, and the archive
DSC_SHARED_DATA/cifar10-jpg.tar.zst (default: the checkout's ../shared/data) unpacked once per session."""
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

import dsc

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]


def _find_dsc():
    if os.environ.get("DSC_BINARY"):
        return os.environ["DSC_BINARY"]
    # A venv's bin/ is where pip put the program, whether or not the venv is activated.
    beside = pathlib.Path(sys.executable).parent / "dsc"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("dsc")


os.environ.setdefault("DSC_SOURCE_DIR", str(SOURCE_DIR))
if "DSC_TRAIN_BINARY" not in os.environ and _find_dsc():
    os.environ["DSC_TRAIN_BINARY"] = str(pathlib.Path(_find_dsc()).parent / "dsc-train")


@pytest.fixture(scope="session")
def testdata(tmp_path_factory):
    if os.environ.get("DSC_TESTDATA"):
        p = pathlib.Path(os.environ["DSC_TESTDATA"]).resolve() / "cifar10"
        if not (p / ".unpacked").exists():
            pytest.fail(f"{p} is not unpacked (build the dsc_testdata target)")
        return p
    shared = pathlib.Path(os.environ.get("DSC_SHARED_DATA") or SOURCE_DIR.parent / "shared" / "data")
    archive = shared / "cifar10-jpg.tar.zst"
    if not archive.is_file():
        pytest.fail(f"DSC_TESTDATA is not set and {archive} does not exist (set DSC_SHARED_DATA to its folder)")
    p = tmp_path_factory.mktemp("testdata") / "cifar10"
    subprocess.run(["sh", str(SOURCE_DIR / "tests" / "unpack_cifar.sh"), str(archive), str(p)], check=True)
    return p


@pytest.fixture(scope="session")
def dsc_binary():
    path = _find_dsc()
    if not path:
        pytest.fail("no dsc program: DSC_BINARY is not set and dsc is neither beside python nor on PATH")
    return path


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
