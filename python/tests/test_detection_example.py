"""examples/detection_boxes.py: after RandomResizedCrop + flip, each box the loader gives still frames
the pixels of its shape. The reference is the augmented image itself (the shapes' colours), not dsc's
box arithmetic: a box the loader did not move with its crop or flip misses its pixels."""
import importlib.util
import os
import pathlib

import numpy as np

_SRC = pathlib.Path(os.environ.get("DSC_SOURCE_DIR") or pathlib.Path(__file__).resolve().parents[2])


def _example():
    spec = importlib.util.spec_from_file_location("detection_boxes", _SRC / "examples" / "detection_boxes.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _inside(shape, boxes, pad):
    """Mask of the pixels whose centre lies in any of `boxes` grown by `pad` pixels."""
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]] + 0.5
    m = np.zeros(shape, bool)
    for x, y, w, h in boxes:
        m |= (xs >= x - pad) & (xs <= x + w + pad) & (ys >= y - pad) & (ys <= y + h + pad)
    return m


def test_boxes_frame_their_shapes_after_crop_and_flip(tmp_path):
    ex = _example()
    path = ex.write_dataset(tmp_path / "shapes.beton", samples=32, seed=7)
    batch = ex.load_batch(path, batch_size=32, out_size=96, seed=7)
    assert len(batch) == 32
    png = ex.draw_grid(batch[:8], tmp_path / "grid.png")
    assert png.stat().st_size > 0
    checked_pixels = checked_boxes = 0
    for img, boxes, cats in batch:
        assert boxes.shape[0] == cats.shape[0]
        for c in range(len(ex.COLOURS)):
            mine = boxes[cats == c]
            on = ex.class_pixels(img, c)
            # Every pixel of class c's colour lies in one of class c's boxes (resampling blurs edges by
            # under a pixel: 1.5 px of slack).
            if on.any():
                frac = (on & _inside(on.shape, mine, 1.5)).sum() / on.sum()
                assert frac >= 0.98, f"only {frac:.2f} of class {c}'s pixels lie in its boxes {mine.tolist()}"
                checked_pixels += int(on.sum())
            # A rectangle's box is filled by its colour (a clipped ellipse's box need not be).
            if c < 2:
                for x, y, w, h in mine:
                    if w < 4 or h < 4:
                        continue
                    inner = _inside(on.shape, [(x + 1, y + 1, w - 2, h - 2)], 0)
                    frac = (on & inner).sum() / inner.sum()
                    assert frac >= 0.9, f"box {(x, y, w, h)} of class {c} holds {frac:.2f} of its colour"
                    checked_boxes += 1
    assert checked_pixels > 1000 and checked_boxes >= 8
