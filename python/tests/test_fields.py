"""Typed fields from Python: dsc.Writer writes every kind and dtype, dsc.Loader gives back a dict per
batch, and each value equals the NumPy value written (NumPy is the reference, not dsc's own reader)."""
import io

import numpy as np
import pytest

import dsc

try:
    import torch
except ImportError:  # NumPy arrays then
    torch = None

SCALARS = ["int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64", "bool"]


def _np(x):
    return x.numpy() if torch is not None and isinstance(x, torch.Tensor) else np.asarray(x)


def _samples(n, rng):
    out = []
    for i in range(n):
        s = {"image": rng.integers(0, 256, (12, 16, 3), dtype=np.uint8), "label": int(rng.integers(0, 3))}
        for t in SCALARS:
            if t == "bool":
                s["s_" + t] = np.bool_(rng.integers(0, 2))
            elif t.startswith("float"):
                s["s_" + t] = np.array(rng.normal() * 100, dtype=t)
            else:
                info = np.iinfo(t)
                s["s_" + t] = np.array(rng.integers(info.min, info.max, dtype=t, endpoint=True), dtype=t)
        s["mat"] = rng.normal(size=(3, 2)).astype("float32")
        s["boxes"] = rng.normal(size=(int(rng.integers(0, 5)), 4)).astype("float32")
        s["tokens"] = rng.integers(-2**40, 2**40, size=int(rng.integers(0, 7)), dtype=np.int64)
        s["blob"] = rng.bytes(int(rng.integers(0, 50)))
        s["caption"] = "café %d ✓" % i if i % 4 else ""
        out.append(s)
    return out


SCHEMA = dict([("image", "image"), ("label", ("label", ["a", "b", "c"]))] + [("s_" + t, t) for t in SCALARS] +
              [("mat", "float32[3,2]"), ("boxes", "float32[*,4]"), ("tokens", "int64[*]"), ("blob", "bytes"), ("caption", "text")])


def _write(path, samples, threads):
    with dsc.Writer(path, SCHEMA, threads=threads, block_size=8192) as w:
        for s in samples:
            w.add(s)
    return path


def test_every_kind_round_trips(tmp_path):
    samples = _samples(37, np.random.default_rng(5))
    path = _write(tmp_path / "f.beton", samples, 2)
    info = dsc.info(path)
    assert info["format_version"] == "1.2"
    types = {f["name"]: f["type"] for f in info["fields"]}
    assert types["boxes"] == "var_array" and types["mat"] == "array" and types["caption"] == "text"
    loader = dsc.Loader(path, order="sequential", batch_size=8, dtype="uint8", layout="NHWC", normalize=False, threads=2)
    seen = 0
    for b in loader.epoch(0):
        assert isinstance(b, dict)
        n = len(b["label"])
        for j in range(n):
            s = samples[seen + j]
            np.testing.assert_array_equal(_np(b["image"][j]), s["image"])
            assert int(b["label"][j]) == s["label"]
            for t in SCALARS:
                got = _np(b["s_" + t])[j]
                assert got.dtype == np.dtype(t), t
                np.testing.assert_array_equal(got, s["s_" + t])
            np.testing.assert_array_equal(_np(b["mat"][j]), s["mat"])
            np.testing.assert_array_equal(_np(b["boxes"][j]), s["boxes"])
            assert _np(b["boxes"][j]).shape == s["boxes"].shape
            np.testing.assert_array_equal(_np(b["tokens"][j]), s["tokens"])
            assert b["blob"][j] == s["blob"]
            assert b["caption"][j] == s["caption"]
        seen += n
    assert seen == len(samples)
    # fields= picks and orders the typed fields.
    sub = next(iter(dsc.Loader(path, order="sequential", batch_size=4, dtype="uint8", layout="NHWC", normalize=False,
                               fields=["caption", "s_int8"])))
    assert [k for k in sub if k not in ("image", "label")] == ["caption", "s_int8"]
    # Variable arrays as values + offsets, or padded with lengths: the same rows.
    for ragged in ("offsets", "padded"):
        b = next(iter(dsc.Loader(path, order="sequential", batch_size=8, dtype="uint8", layout="NHWC", normalize=False,
                                 fields=["boxes"], ragged=ragged)))
        first, second = (_np(x) for x in b["boxes"])
        for j in range(8):
            want = samples[j]["boxes"]
            got = first[second[j]:second[j + 1]] if ragged == "offsets" else first[j, :second[j]]
            np.testing.assert_array_equal(got, want)
            if ragged == "padded":
                assert not first[j, second[j]:].any()
    with pytest.raises(dsc.OptionError, match="nope"):
        dsc.Loader(path, batch_size=4, dtype="uint8", layout="NHWC", normalize=False, fields=["nope"])


def test_same_file_for_any_thread_count(tmp_path):
    samples = _samples(20, np.random.default_rng(9))
    a = _write(tmp_path / "a.beton", samples, 1).read_bytes()
    b = _write(tmp_path / "b.beton", samples, 4).read_bytes()
    assert a == b


def test_images_from_pil_and_encoded_bytes(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(1)
    pixels = rng.integers(0, 256, (10, 14, 3), dtype=np.uint8)
    png = io.BytesIO()
    PIL.fromarray(pixels).save(png, format="PNG")
    with dsc.Writer(tmp_path / "p.beton", {"image": "image", "n": "int32"}) as w:
        w.add({"image": PIL.fromarray(pixels), "n": 1})
        w.add({"image": png.getvalue(), "n": 2})
    b = next(iter(dsc.Loader(tmp_path / "p.beton", order="sequential", batch_size=2, dtype="uint8", layout="NHWC", normalize=False)))
    for j in range(2):
        np.testing.assert_array_equal(_np(b["image"][j]), pixels)  # PNG is lossless, pixels are stored raw
    np.testing.assert_array_equal(_np(b["n"]), [1, 2])


def test_bad_values_are_named(tmp_path):
    samples = _samples(2, np.random.default_rng(2))
    w = dsc.Writer(tmp_path / "bad.beton", SCHEMA)
    bad = dict(samples[0], mat=np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match="field 'mat': shape"):
        w.add(bad)
    bad = dict(samples[0], boxes=np.zeros((2, 3), "float32"))
    with pytest.raises(ValueError, match="field 'boxes'"):
        w.add(bad)
    bad = dict(samples[0], label=7)
    with pytest.raises(dsc.Error, match="sample 0: field 'label': label 7 out of range"):
        w.add(bad)
    bad = dict(samples[0])
    del bad["caption"]
    with pytest.raises(ValueError, match="field 'caption': missing"):
        w.add(bad)
    del w
    assert not (tmp_path / "bad.beton").exists()  # nothing partial left behind


def test_dsc_build_from_json_lines_and_export(tmp_path):
    """`dsc build` from a JSON Lines table (types inferred), then `dsc export`'s fields.jsonl against
    the rows written (json is the reference); a bad row is named by file, row and column."""
    import json
    import os
    import subprocess
    PIL = pytest.importorskip("PIL.Image")
    binary = os.environ.get("DSC_BINARY")
    if not binary:
        pytest.skip("needs the dsc program (DSC_BINARY)")
    rng = np.random.default_rng(4)
    rows = []
    for i in range(9):
        PIL.fromarray(rng.integers(0, 256, (8, 8, 3), dtype=np.uint8)).save(tmp_path / f"{i}.png")
        n = int(rng.integers(0, 4))
        rows.append({"image": f"{i}.png", "label": i % 3, "score": float(rng.normal()), "crowd": bool(i % 2),
                     "boxes": rng.normal(size=(n, 4)).round(3).tolist(), "ids": list(range(n)), "caption": f"row {i} é"})
    table = tmp_path / "t.jsonl"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "t.beton"
    subprocess.run([binary, "build", str(table), str(out), "--quiet"], check=True, capture_output=True)
    assert dsc.info(out)["build_options"]["format"] == "jsonl"
    types = {f["name"]: (f["type"], f.get("dtype")) for f in dsc.info(out)["fields"]}
    assert types["score"] == ("scalar", "float32") and types["crowd"] == ("scalar", "bool")
    assert types["boxes"] == ("var_array", "float32") and types["ids"] == ("var_array", "int64")
    assert types["label"] == ("label", None) and types["caption"] == ("text", None)
    subprocess.run([binary, "export", str(out), "--index", "0", "--count", "9", "--out", str(tmp_path / "ex")],
                   check=True, capture_output=True)
    got = [json.loads(line) for line in open(tmp_path / "ex" / "fields.jsonl")]
    for r, g in zip(rows, got):
        assert g["score"] == float(np.float32(r["score"]))
        assert g["crowd"] is r["crowd"] and g["ids"] == r["ids"] and g["caption"] == r["caption"]
        np.testing.assert_array_equal(np.array(g["boxes"], dtype=np.float32).reshape(-1, 4),
                                      np.array(r["boxes"], dtype=np.float32).reshape(-1, 4))
    # Built in 4 parts (types inferred from every row, so each part has the same schema) and merged:
    # byte for byte the whole build.
    parts = [str(tmp_path / f"part{i}.beton") for i in range(4)]
    for i, p in enumerate(parts):
        subprocess.run([binary, "build", str(table), p, "--shard", f"{i}/4", "--quiet"], check=True, capture_output=True)
    subprocess.run([binary, "merge", *parts, str(tmp_path / "merged.beton")], check=True, capture_output=True)
    assert (tmp_path / "merged.beton").read_bytes() == out.read_bytes()
    rows[4]["score"] = "high"
    table.write_text("".join(json.dumps(r) + "\n" for r in rows))
    bad = subprocess.run([binary, "build", str(table), str(tmp_path / "bad.beton"), "--quiet", "--schema", "score:float32"],
                         capture_output=True, text=True)
    assert bad.returncode != 0
    assert "t.jsonl:5: column 'score': expected a number" in bad.stderr
    assert not (tmp_path / "bad.beton").exists()


def test_points_follow_their_image_through_crop_flip_and_translate(tmp_path):
    """Keypoints [N,3] (x, y, v) and points [N,2] mapped with each sample's crop, flip and translate:
    where a mapped point is visible, the augmented image shows its dot's colour there; v = 0 exactly
    where the point left the crop or the output (the pixel there is the translate's fill)."""
    rng = np.random.default_rng(3)
    W, H, n = 96, 80, 16
    with dsc.Writer(tmp_path / "p.beton", {"image": "image", "kp": "float32[*,3]", "xy": "float32[*,2]",
                                              "ids": "int32[*]"}, encoding="raw") as w:
        for i in range(n):
            img = np.full((H, W, 3), (0, 0, 255), np.uint8)
            pts = []
            for k in range(6):  # one 9x9 dot per cell of a 3x2 grid, so no two overlap
                cx = 32 * (k % 3) + int(rng.integers(6, 26))
                cy = 40 * (k // 3) + int(rng.integers(6, 34))
                img[cy - 4:cy + 5, cx - 4:cx + 5] = (255, 40 * k, 0)
                pts.append([cx + 0.5, cy + 0.5, 2.0])
            pts = np.array(pts, np.float32)
            w.add({"image": img, "kp": pts, "xy": pts[:, :2].copy(), "ids": np.arange(6, dtype=np.int32)})
    loader = dsc.Loader(tmp_path / "p.beton", batch_size=n, crop="random_resized", out_size=64, scale=(0.3, 1.0),
                        flip=True, translate=8, fill=(0, 0, 0), dtype="uint8", layout="NHWC", normalize=False,
                        points=["kp", "xy"], seed=5)
    seen = {"visible": 0, "hidden": 0}
    for epoch in range(3):
        b = next(iter(loader.epoch(epoch)))
        for j in range(n):
            img, kp, xy = b["image"][j].numpy(), b["kp"][j].numpy(), b["xy"][j].numpy()
            assert kp.shape == (6, 3) and xy.shape == (6, 2)
            np.testing.assert_array_equal(kp[:, :2], xy)
            for k, (x, y, v) in enumerate(kp):
                inside = 0 <= x < 64 and 0 <= y < 64
                if v > 0:
                    assert v == 2 and inside, (epoch, j, k, x, y)
                    r, g, _ = img[int(y), int(x)].astype(int)
                    assert r > 200 and abs(g - 40 * k) <= 12, (epoch, j, k, x, y, img[int(y), int(x)])
                    seen["visible"] += 1
                else:
                    assert not inside or img[int(y), int(x)].tolist() == [0, 0, 0], (epoch, j, k, x, y)
                    seen["hidden"] += 1
    assert seen["visible"] > 100 and seen["hidden"] > 10, seen
    with pytest.raises(dsc.OptionError, match="last dimension is 2"):
        dsc.Loader(tmp_path / "p.beton", batch_size=n, points=["ids"])
    with pytest.raises(dsc.OptionError, match="not a typed field"):
        dsc.Loader(tmp_path / "p.beton", batch_size=n, points="nope")
