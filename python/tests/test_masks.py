"""Masks (format 1.2 type 8) from Python: every input form stored losslessly, masks following their
image's crop and flip in dict batches, bad masks named, and the segmentation example learning."""
import io
import os
import subprocess
import sys

import numpy as np
import pytest
from PIL import Image

import dsc

COLOURS = np.array([[0, 0, 0], [255, 0, 0], [0, 255, 0], [0, 0, 255], [255, 255, 0]], np.uint8)


def _scene(i, w=72, h=56):
    """Blocks of classes 0..4; the image paints each class in its colour."""
    y, x = np.mgrid[0:h, 0:w]
    mask = (((x + 3 * i) // (9 + i % 5)) * 3 + ((y + i) // (8 + i % 4)) * 2 + i) % 5
    return COLOURS[mask], mask.astype(np.uint8)


def _png(mask, mode):
    img = Image.fromarray(mask, "L")
    if mode == "P":
        img = img.convert("P")  # a palette image whose indices are the classes
        img.putpalette(sum(([v, 255 - v, v // 2] for v in range(256)), []))
        img.putdata(mask.ravel().tolist())
    buf = io.BytesIO()
    img.save(buf, format="PNG")
    return buf.getvalue()


def test_every_mask_form_is_stored_losslessly(tmp_path):
    forms = ["array", "pil_L", "pil_P", "png_L", "png_P", "bool", "noisy", "noisy_png"]
    masks = []
    with dsc.Writer(tmp_path / "m.beton", {"image": "image", "mask": "mask"}, encoding="raw") as w:
        for i, form in enumerate(forms):
            img, mask = _scene(i)
            if form == "bool":
                mask = (mask > 2).astype(np.uint8)
            if form.startswith("noisy"):  # runs would be bigger than the pixels: stored as a PNG
                mask = np.random.default_rng(i).integers(0, 256, mask.shape, dtype=np.uint8)
            masks.append(mask)
            value = {"array": mask, "pil_L": Image.fromarray(mask, "L"), "bool": mask.astype(bool),
                     "pil_P": Image.open(io.BytesIO(_png(mask, "P"))), "png_L": _png(mask, "L"),
                     "png_P": _png(mask, "P"), "noisy": mask, "noisy_png": _png(mask, "L")}[form]
            w.add({"image": img, "mask": value})
    loader = dsc.Loader(tmp_path / "m.beton", batch_size=len(forms), order="sequential", dtype="uint8", layout="NHWC")
    b = next(iter(loader))
    assert tuple(b["mask"].shape) == (len(forms), 56, 72) and b["mask"].dtype.is_floating_point is False
    for i, form in enumerate(forms):
        np.testing.assert_array_equal(b["mask"][i].numpy(), masks[i], err_msg=form)
    # Smooth masks are stored as runs (format 1.2 type 8), noisy ones as a PNG; both load exactly (above).
    assert (tmp_path / "m.beton").read_bytes().count(b"MRLE") == len(forms) - 2
    # dsc export writes each mask as a PNG, which PIL reads back to the same values.
    out = tmp_path / "exp"
    subprocess.run([os.environ.get("DSC_BINARY", "dsc"), "export", str(tmp_path / "m.beton"), "--out", str(out)], check=True,
                   capture_output=True)
    rows = [__import__("json").loads(line) for line in (out / "fields.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        np.testing.assert_array_equal(np.asarray(Image.open(out / row["mask"])), masks[i])


def test_masks_follow_their_image_through_crop_and_flip(tmp_path):
    with dsc.Writer(tmp_path / "m.beton", {"image": "image", "mask": "mask"}, encoding="raw") as w:
        for i in range(24):
            img, mask = _scene(i, 64 + 4 * (i % 3), 50)
            w.add({"image": img, "mask": mask})
    loader = dsc.Loader(tmp_path / "m.beton", batch_size=8, crop="random_resized", out_size=40, scale=(0.2, 1.0), flip=True,
                        dtype="uint8", layout="NHWC", seed=4)
    checked = 0
    for b in loader:
        imgs, masks = b["image"].numpy(), b["mask"].numpy()
        for img, mask in zip(imgs, masks):
            assert mask.max() < 5
            for y in range(2, 38):
                for x in range(2, 38):
                    win = mask[y - 2:y + 3, x - 2:x + 3]
                    if (win == mask[y, x]).all():  # inside a block: the image shows that block's colour
                        assert np.abs(img[y, x].astype(int) - COLOURS[mask[y, x]]).max() <= 8, (y, x)
                        checked += 1
    assert checked > 8000


def test_bad_masks_are_named(tmp_path):
    img, mask = _scene(0)
    w = dsc.Writer(tmp_path / "bad.beton", {"image": "image", "seg": "mask"})
    w.add({"image": img, "seg": mask})
    w.add({"image": img, "seg": mask[:, :40]})
    with pytest.raises(dsc.Error, match=r"sample 1: mask 'seg'.*40x56 but its image is 72x56"):
        w.close()
    assert not (tmp_path / "bad.beton").exists()
    rgb = io.BytesIO()
    Image.fromarray(img).save(rgb, format="PNG")
    w = dsc.Writer(tmp_path / "bad2.beton", {"image": "image", "seg": "mask"})
    w.add({"image": img, "seg": rgb.getvalue()})
    with pytest.raises(dsc.Error, match="RGB PNG for a 1-channel mask"):
        w.close()
    with pytest.raises(TypeError, match="mask"):
        dsc.Writer(tmp_path / "bad3.beton", {"image": "image", "seg": "mask"}).add({"image": img, "seg": img})


def test_segmentation_example_learns(tmp_path):
    sys.path.insert(0, os.path.join(os.environ.get("DSC_SOURCE_DIR", "."), "examples"))
    try:
        import segmentation_fcn as ex
    finally:
        sys.path.pop(0)
    path = str(tmp_path / "shapes.beton")
    ex.write(path, ex.make_scenes(96))
    history = ex.train(path, epochs=4, log=lambda s: None)
    first, last = history[0], history[-1]
    assert last[0] < 0.6 * first[0], history          # the loss falls
    assert last[1] > last[2] + 0.04, history          # and the net beats the all-background guess


def test_segmentation_pairs_build(tmp_path):
    """dsc build IMAGES OUT --masks MASKS (VOC's layout: JPEG images, palette PNG masks by stem)."""
    (tmp_path / "JPEGImages").mkdir()
    (tmp_path / "SegmentationClass").mkdir()
    want = {}
    for i in range(5):
        img, mask = _scene(i)
        Image.fromarray(img).save(tmp_path / "JPEGImages" / f"2007_{i:06d}.jpg", quality=90)
        (tmp_path / "SegmentationClass" / f"2007_{i:06d}.png").write_bytes(_png(mask, "P"))
        want[f"2007_{i:06d}"] = mask
    Image.fromarray(_scene(9)[0]).save(tmp_path / "JPEGImages" / "2007_000099.jpg")  # no mask
    dsc_bin = os.environ.get("DSC_BINARY", "dsc")
    r = subprocess.run([dsc_bin, "build", str(tmp_path / "JPEGImages"), str(tmp_path / "voc.beton"), "--masks",
                        str(tmp_path / "SegmentationClass"), "--quiet"], capture_output=True, text=True)
    assert r.returncode != 0 and "2007_000099.jpg: no mask" in r.stderr, r.stderr
    assert not (tmp_path / "voc.beton").exists()
    rep = dsc.build(tmp_path / "JPEGImages", tmp_path / "voc.beton", masks=str(tmp_path / "SegmentationClass"),
                    skip_invalid=True)
    assert rep["samples"] == 5 and rep["skipped"] == 1
    loader = dsc.Loader(tmp_path / "voc.beton", batch_size=5, order="sequential", dtype="uint8", layout="NHWC")
    b = next(iter(loader))
    for j, stem in enumerate(sorted(want)):
        np.testing.assert_array_equal(b["mask"][j].numpy(), want[stem], err_msg=stem)


def test_masks_take_the_builds_center_crop_and_max_resolution(tmp_path):
    """--center-crop 0.9 --max-resolution 40 on 72x56 pairs: each mask is PIL's nearest-neighbour resize
    of the image's crop box, and the image's colours (area-resized) agree with it inside every region."""
    (tmp_path / "img").mkdir()
    (tmp_path / "seg").mkdir()
    want = []
    for i in range(4):
        img, mask = _scene(i)
        Image.fromarray(img).save(tmp_path / "img" / f"{i}.png")
        (tmp_path / "seg" / f"{i}.png").write_bytes(_png(mask, "P"))
        side = round(0.9 * 56)  # the centred square, at ((72 - 50) // 2, (56 - 50) // 2), fitted to 40
        box = ((72 - side) // 2, (56 - side) // 2, (72 - side) // 2 + side, (56 - side) // 2 + side)
        want.append(np.asarray(Image.fromarray(mask).resize((40, 40), Image.NEAREST, box=box)))
    dsc.build(tmp_path / "img", tmp_path / "s.beton", masks=str(tmp_path / "seg"), center_crop=0.9, max_resolution=40)
    b = next(iter(dsc.Loader(tmp_path / "s.beton", batch_size=4, order="sequential", dtype="uint8", layout="NHWC",
                             normalize=False)))
    assert tuple(b["mask"].shape) == (4, 40, 40)
    for i in range(4):
        m = b["mask"][i].numpy()
        np.testing.assert_array_equal(m, want[i], err_msg=f"sample {i}")
        # Where a pixel's 3x3 neighbourhood is one class, the image shows that class's colour.
        inner = np.ones_like(m, bool)
        for dy in (-1, 0, 1):
            for dx in (-1, 0, 1):
                inner[1:-1, 1:-1] &= m[1 + dy:39 + dy, 1 + dx:39 + dx] == m[1:-1, 1:-1]
        inner[[0, -1], :] = inner[:, [0, -1]] = False
        assert inner.sum() > 400
        diff = np.abs(b["image"][i].numpy().astype(int) - COLOURS[m].astype(int))[inner]
        assert diff.max() <= 2, (i, diff.max())


def test_segmentation_parts_merge_into_the_whole_build(tmp_path):
    """dsc build --masks --shard I/3 on three machines, then dsc merge: byte for byte the one-machine build."""
    (tmp_path / "img").mkdir()
    (tmp_path / "seg").mkdir()
    for i in range(7):
        img, mask = _scene(i)
        Image.fromarray(img).save(tmp_path / "img" / f"{i:03d}.jpg", quality=90)
        (tmp_path / "seg" / f"{i:03d}.png").write_bytes(_png(mask if i != 3 else
                                                              np.random.default_rng(i).integers(0, 256, mask.shape, dtype=np.uint8), "P"))
    dsc_bin = os.environ.get("DSC_BINARY", "dsc")
    run = lambda *a: subprocess.run([dsc_bin, *map(str, a)], check=True, capture_output=True, text=True)
    run("build", tmp_path / "img", tmp_path / "whole.beton", "--masks", tmp_path / "seg", "--quiet")
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"part{i}.beton")
        run("build", tmp_path / "img", parts[-1], "--masks", tmp_path / "seg", "--shard", f"{i}/3", "--quiet")
    run("merge", *reversed(parts), tmp_path / "merged.beton")
    assert (tmp_path / "merged.beton").read_bytes() == (tmp_path / "whole.beton").read_bytes()
    run("verify", tmp_path / "merged.beton")
    r = subprocess.run([dsc_bin, "merge", parts[0], parts[2], tmp_path / "two.beton"], capture_output=True, text=True)
    assert r.returncode != 0 and "missing part 1" in r.stderr, r.stderr


@pytest.mark.parametrize("cut", ["empty", "truncated", "corrupt"])
def test_truncated_empty_and_corrupt_mask_pngs_are_named(tmp_path, cut):
    img, mask = _scene(0)
    png = _png(mask, "L")
    bad = {"empty": b"", "truncated": png[:len(png) // 2], "corrupt": png[:40] + bytes(len(png) - 40)}[cut]
    w = dsc.Writer(tmp_path / "bad.beton", {"image": "image", "seg": "mask"})
    w.add({"image": img, "seg": mask})
    try:
        w.add({"image": img, "seg": bad})
        w.close()
        raise AssertionError("a damaged mask was written")
    except (dsc.Error, ValueError) as e:
        assert "seg" in str(e), e
        assert "sample 1" in str(e), e
    assert not (tmp_path / "bad.beton").exists()
