"""COCO instances through dsc.build, and boxes that follow the crop in dsc.Loader's dict batches."""
import json

import numpy as np
import pytest
from PIL import Image

import dsc


def _coco(tmp_path, n=12):
    """n synthetic images with a white box each (drawn where the annotation says), as COCO files."""
    (tmp_path / "img").mkdir()
    images, anns = [], []
    rng = np.random.default_rng(3)
    for i in range(n):
        w, h = 120 + 4 * i, 90
        x, y, bw, bh = int(rng.integers(0, 60)), int(rng.integers(0, 40)), 30, 25
        px = np.zeros((h, w, 3), np.uint8)
        px[y:y + bh, x:x + bw] = 255
        Image.fromarray(px).save(tmp_path / "img" / f"{i}.png")
        images.append({"id": i, "file_name": f"{i}.png", "width": w, "height": h})
        anns.append({"id": 100 + i, "image_id": i, "category_id": 1 + i % 2, "bbox": [x, y, bw, bh], "iscrowd": 0,
                     "segmentation": [[x, y, x + bw, y, x + bw, y + bh, x, y + bh]]})
    doc = {"images": images, "annotations": anns, "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}]}
    (tmp_path / "instances.json").write_text(json.dumps(doc))
    return doc


def test_coco_boxes_follow_the_crop(tmp_path):
    doc = _coco(tmp_path)
    rep = dsc.build(tmp_path / "instances.json", tmp_path / "c.beton", images=str(tmp_path / "img"), encoding="raw")
    assert rep["samples"] == 12
    loader = dsc.Loader(tmp_path / "c.beton", batch_size=4, crop="random_resized", out_size=64, flip=True,
                        scale=(0.5, 1.0), dtype="uint8", layout="NHWC", seed=1, order="sequential",
                        boxes=["boxes", "category_id", "iscrowd", "area"])
    seen = 0
    for b in loader:
        for img, boxes, cat in zip(b["image"], b["boxes"], b["category_id"]):
            img = np.asarray(img)
            assert boxes.shape[0] == cat.shape[0]
            assert cat.tolist() == [] or int(cat[0]) == doc["annotations"][seen]["category_id"]
            on = np.argwhere(img[..., 0] >= 128)
            if boxes.shape[0] and len(on):
                x, y, w, h = (float(v) for v in boxes[0])
                assert abs(on[:, 1].min() - x) <= 1.5 and abs(on[:, 1].max() + 1 - (x + w)) <= 1.5
                assert abs(on[:, 0].min() - y) <= 1.5 and abs(on[:, 0].max() + 1 - (y + h)) <= 1.5
            seen += 1
    assert seen == 12


def test_coco_needs_its_images(tmp_path):
    _coco(tmp_path, 2)
    with pytest.raises(ValueError, match="needs .*images"):
        dsc.build(tmp_path / "instances.json", tmp_path / "c.beton")


@pytest.mark.parametrize("kind", ["instance", "semantic"])
def test_coco_masks_follow_the_crop(tmp_path, kind):
    doc = _coco(tmp_path)
    dsc.build(tmp_path / "instances.json", tmp_path / "c.beton", images=str(tmp_path / "img"), encoding="raw",
              coco_masks=kind)
    loader = dsc.Loader(tmp_path / "c.beton", batch_size=4, crop="random_resized", out_size=64, flip=True,
                        scale=(0.3, 1.0), dtype="uint8", layout="NHWC", seed=2, order="sequential")
    checked = 0
    for b in loader:
        for img, mask, cat in zip(b["image"].numpy(), b["mask"].numpy(), b["category_id"]):
            # one annotation per image: its value is 1 (instance) or its category (semantic)
            want = 1 if kind == "instance" else doc["annotations"][checked // 1]["category_id"]
            assert set(np.unique(mask)) <= {0, want}
            for y in range(2, 62):
                for x in range(2, 62):
                    win = mask[y - 2:y + 3, x - 2:x + 3]
                    if (win == mask[y, x]).all():  # inside or outside the box, away from its edge
                        assert (img[y, x, 0] >= 200) == (mask[y, x] == want), (checked, y, x)
            checked += 1
    assert checked == 12


def test_coco_parts_merge_into_the_whole_build(tmp_path):
    """--shard I/N of a COCO file (columns: image_id; variable: boxes, ids, crowd flags, areas, a mask),
    joined by dsc merge: byte for byte the one-machine build, for N = 1, 3 and 5."""
    import os
    import subprocess
    _coco(tmp_path, 11)
    dsc_bin = os.environ.get("DSC_BINARY", "dsc")
    build = ["build", str(tmp_path / "instances.json"), "--images", str(tmp_path / "img"), "--coco-masks", "instance",
             "--quiet"]
    subprocess.run([dsc_bin, *build[:2], str(tmp_path / "whole.beton"), *build[2:]], check=True)
    whole = (tmp_path / "whole.beton").read_bytes()
    for n in (1, 3, 5):
        parts = [str(tmp_path / f"p{n}-{i}.beton") for i in range(n)]
        for i, p in enumerate(parts):
            subprocess.run([dsc_bin, *build[:2], p, *build[2:], "--shard", f"{i}/{n}"], check=True)
        subprocess.run([dsc_bin, "merge", *parts, str(tmp_path / f"m{n}.beton")], check=True, capture_output=True)
        assert (tmp_path / f"m{n}.beton").read_bytes() == whole, n
