"""dsc.Writer given files (pathlib.Path values, read on the writer's encode threads): the same file as
the same images given as bytes, for any thread count; the same pixels and labels as `dsc build` of a
manifest of those files; a missing or vanished file named with its sample number, and nothing left."""
import json
import pathlib
import shutil
import subprocess

import numpy as np
import pytest

import dsc

from conftest import CLASSES


def _files(testdata, per_class):
    return [(testdata / "test" / c / f"{k:04d}.jpg", label) for k in range(per_class) for label, c in enumerate(CLASSES)]


def _write(path, rows, threads, as_path):
    with dsc.Writer(path, {"image": "image", "label": "label"}, threads=threads, block_size=8192) as w:
        for p, label in rows:
            w.add({"image": p if as_path else p.read_bytes(), "label": label})
    return path.read_bytes()


def _batches(path, n):
    got = next(iter(dsc.Loader(path, order="sequential", batch_size=n, dtype="uint8", layout="NHWC", normalize=False)))
    images, labels = (got["image"], got["label"]) if isinstance(got, dict) else got
    return np.asarray(images), np.asarray(labels)


def test_paths_write_the_bytes_file_for_any_thread_count(tmp_path, testdata):
    rows = _files(testdata, 30)  # 300 images: several windows for 1 and 3 threads
    from_bytes = _write(tmp_path / "b.beton", rows, 2, as_path=False)
    assert _write(tmp_path / "p1.beton", rows, 1, as_path=True) == from_bytes
    assert _write(tmp_path / "p3.beton", rows, 3, as_path=True) == from_bytes


def test_paths_give_dsc_builds_pixels_and_labels(tmp_path, testdata, dsc_binary):
    rows = _files(testdata, 6)
    manifest = tmp_path / "m.jsonl"
    manifest.write_text("".join(json.dumps({"image": str(p), "label": label}) + "\n" for p, label in rows))
    subprocess.run([dsc_binary, "build", str(manifest), str(tmp_path / "built.beton"), "--quiet"], check=True, capture_output=True)
    _write(tmp_path / "w.beton", rows, 2, as_path=True)
    want_images, want_labels = _batches(tmp_path / "built.beton", len(rows))
    images, labels = _batches(tmp_path / "w.beton", len(rows))
    np.testing.assert_array_equal(labels, [label for _, label in rows])
    np.testing.assert_array_equal(labels, want_labels)
    np.testing.assert_array_equal(images, want_images)


def test_a_bytes_field_from_a_path(tmp_path, testdata):
    src = _files(testdata, 1)[:3]
    with dsc.Writer(tmp_path / "f.beton", {"image": "image", "raw": "bytes"}) as w:
        for p, _ in src:
            w.add({"image": p, "raw": p})
    got = next(iter(dsc.Loader(tmp_path / "f.beton", order="sequential", batch_size=3, fields=["raw"])))
    assert list(got["raw"]) == [p.read_bytes() for p, _ in src]


def test_a_missing_file_is_named_with_its_sample(tmp_path, testdata):
    rows = _files(testdata, 1)
    w = dsc.Writer(tmp_path / "m.beton", {"image": "image", "label": "label"})
    for p, label in rows[:4]:
        w.add({"image": p, "label": label})
    gone = tmp_path / "no-such.jpg"
    with pytest.raises(dsc.Error, match=r"m\.beton: sample 4: field 'image': .*no-such\.jpg: cannot open: No such file"):
        w.add({"image": gone, "label": 0})
    with pytest.raises(TypeError, match="pass pathlib.Path"):
        w.add({"image": str(rows[4][0]), "label": 1})
    w.add({"image": rows[4][0], "label": 1})  # a refused sample leaves the writer usable
    del w
    assert not (tmp_path / "m.beton").exists()


def test_a_file_gone_before_its_read_fails_close_and_leaves_nothing(tmp_path, testdata):
    rows = _files(testdata, 1)
    copies = []
    for i, (p, label) in enumerate(rows):
        copies.append((tmp_path / f"{i}.jpg", label))
        shutil.copy(p, copies[-1][0])
    w = dsc.Writer(tmp_path / "v.beton", {"image": "image", "label": "label"}, threads=2)
    for p, label in copies:
        w.add({"image": pathlib.Path(p), "label": label})
    copies[6][0].unlink()  # after add() checked it, before close() reads it
    with pytest.raises(dsc.Error, match=r"v\.beton: sample 6: field 'image': .*6\.jpg: cannot open"):
        w.close()
    assert not (tmp_path / "v.beton").exists()
