"""Several images per sample (format 1.3): dsc.Writer with more than one "image" field, a Loader per
image field (image=NAME), and dsc.Views(aligned=True) cropping an image and its companion alike."""
import numpy as np
import pytest

import dsc

N = 40


@pytest.fixture(scope="module")
def rgbd(tmp_path_factory):
    from PIL import Image
    rng = np.random.default_rng(4)
    photos = [rng.integers(0, 256, (32, 32, 3), dtype=np.uint8) for _ in range(N)]
    side = [rng.integers(0, 256, (16, 24, 3), dtype=np.uint8) for _ in range(N)]
    out = tmp_path_factory.mktemp("images") / "rgbd.beton"
    schema = {"image": "image", "label": "label", "depth": "image", "side": "image", "caption": "text"}
    with dsc.Writer(out, schema, threads=2) as w:
        for i in range(N):
            # pixels stay raw (lossless): the loader must give back exactly these arrays
            w.add({"image": photos[i], "label": i % 5, "depth": photos[i], "side": Image.fromarray(side[i]),
                   "caption": f"n{i}"})
    return out, photos, side


PLAIN = dict(order="sequential", batch_size=8, dtype="uint8", layout="NHWC", normalize=False, threads=2)


def test_each_image_field_loads_as_written(rgbd):
    path, photos, side = rgbd
    for name, want in (("image", photos), ("depth", photos), ("side", side)):
        seen = 0
        for b in dsc.Loader(path, image=name, **PLAIN):
            assert sorted(b) == sorted([name, "label", "caption"])  # the decoded image under its own name
            for j in range(len(b["label"])):
                assert np.array_equal(b[name][j].numpy(), want[seen]), (name, seen)
                assert b["label"][j] == seen % 5 and b["caption"][j] == f"n{seen}"
                seen += 1
        assert seen == N


def test_aligned_views_crop_two_images_alike(rgbd):
    path, _, _ = rgbd
    crop = dict(crop="random_resized", out_size=16, flip=True, seed=9, dtype="uint8", layout="NHWC", batch_size=10)
    views = [dict(image="image"), dict(image="depth")]
    n = 0
    for b in dsc.Views(path, views=views, aligned=True, copy=True, **crop):
        assert sorted(b) == ["caption", "depth", "image", "label"]  # one dict, each image under its name
        assert b["image"].shape == (10, 16, 16, 3) and np.array_equal(b["image"].numpy(), b["depth"].numpy())
        n += len(b["label"])
    assert n == N
    apart = [np.array_equal(b["image"].numpy(), b["depth"].numpy()) for b in dsc.Views(path, views=views, copy=True, **crop)]
    assert not all(apart)  # without aligned, each view draws its own crops


def test_image_options_are_refused_naming_the_field(rgbd):
    path, _, _ = rgbd
    with pytest.raises(ValueError, match="no image field 'nope'; its image fields: 'image', 'depth', 'side'"):
        dsc.Loader(path, image="nope")
    with pytest.raises(ValueError, match="'depth' is an image field"):
        dsc.Loader(path, fields=["depth"])


def test_channels_one_is_torchvisions_grayscale(rgbd):
    import torch
    from torchvision.transforms import functional as F
    path, photos, _ = rgbd
    seen = 0
    for b in dsc.Loader(path, channels=1, **PLAIN):
        assert b["image"].shape[1:] == (32, 32, 1)
        for j in range(len(b["label"])):
            want = F.rgb_to_grayscale(torch.from_numpy(photos[seen]).permute(2, 0, 1))  # [1, 32, 32] uint8
            assert torch.equal(b["image"][j].permute(2, 0, 1), want), seen
            seen += 1
    assert seen == N


def test_a_grayscale_file_loads_as_one_channel(tmp_path):
    import os
    src = os.path.join(os.environ.get("DSC_TESTDATA", "build/testdata"), "cifar10", "test")
    out = tmp_path / "gray.beton"
    dsc.build(src, out, subsampling="gray", reencode=True, encoding="jpeg")
    one = next(iter(dsc.Loader(out, batch_size=50, order="sequential", dtype="uint8", layout="NHWC", normalize=False)))[0]
    three = next(iter(dsc.Loader(out, batch_size=50, order="sequential", dtype="uint8", layout="NHWC", normalize=False,
                                 channels=3)))[0]
    assert one.shape == (50, 32, 32, 1) and three.shape == (50, 32, 32, 3)
    for c in range(3):  # a gray image's own values, not a weighted sum of them
        assert np.array_equal(three[..., c].numpy(), one[..., 0].numpy())
    f = next(iter(dsc.Loader(out, batch_size=50, order="sequential", normalize=True, mean=(100, 0, 0), std=(50, 1, 1))))[0]
    assert f.shape == (50, 1, 32, 32)
    assert np.allclose(f[:, 0].numpy(), (one[..., 0].numpy().astype(np.float32) - 100) / 50, atol=1e-5)
