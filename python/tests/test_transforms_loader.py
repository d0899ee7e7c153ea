"""The transform list in a loader: each sample's transforms are the same function of (seed, epoch,
index) as dsc._apply_transform on that sample alone, whatever the thread count; dsc.T mirrors
torchvision's names; Python callables are refused; batch_transform runs on whole batches."""
import numpy as np
import pytest

import dsc
from dsc import _dsc

torch = pytest.importorskip("torch")

SPEC = "random_crop(32,padding=4,padding_mode=reflect),color_jitter(0.4,0.4,0.4,0.1),rand_augment(2,9)"


def batches(path, epoch, **kw):
    loader = dsc.Loader(path, order="sequential", batch_size=100, dtype="uint8", layout="NHWC", seed=5, **kw)
    return [(b[0].numpy().copy(), b[2].numpy().copy()) for b in loader.epoch(epoch, with_indices=True)]


def test_loader_applies_each_samples_own_stream(small):
    path, _ = small
    plain = batches(path, 2, threads=1)
    done = batches(path, 2, threads=3, transforms=SPEC)
    n = 0
    for (p, idx), (d, idx2) in zip(plain, done):
        assert np.array_equal(idx, idx2)
        for img, out, i in zip(p, d, idx):
            ref, _ = _dsc._apply_transform(SPEC, img, seed=5, epoch=2, index=int(i))
            assert np.array_equal(ref, out), f"sample {i}"
            n += 1
    assert n == 1000
    # Another epoch draws again.
    assert not np.array_equal(done[0][0], batches(path, 3, threads=2, transforms=SPEC)[0][0])


def test_thread_count_and_front_end_do_not_change_batches(small):
    path, _ = small
    kw = dict(preset="cifar-train", batch_size=200, seed=9)
    t = [dsc.T.RandomCrop(32, padding=4, padding_mode="reflect"), dsc.T.ColorJitter(0.4, 0.4, 0.4),
         dsc.T.RandomErasing(p=0.25)]
    a = [b[0].clone() for b in dsc.Loader(path, threads=1, transforms=t, **kw).epoch(1)]
    b = [b[0].clone() for b in dsc.Loader(path, threads=4, transforms=",".join(map(str, t)), **kw).epoch(1)]
    assert all(torch.equal(x, y) for x, y in zip(a, b))
    c = [b[0].clone() for b in dsc.Loader(path, threads=2, **kw).epoch(1)]
    assert not torch.equal(a[0], c[0])


def test_planar_colour_path_equals_the_packed_one(small):
    """A list of transforms with planar forms (pad-and-crop, flips, colour jitter, erasing) keeps a
    JPEG's pixels planar (kernels::TransformList::OnPlanes); with an inert transform after it
    (random_perspective(p=0) draws but never warps) the list runs on packed RGB rows instead. The two
    give the same batches, in float32 (flip, translate, cutout, normalise) and in uint8, for any
    thread count."""
    path, _ = small
    jitter = ("random_crop(32,padding=4,padding_mode=reflect),random_vertical_flip,color_jitter(0.4,0.4,0.4,0.1),"
              "random_erasing(0.5)")
    for kw in (dict(preset="cifar-train"), dict(preset="cifar-train", dtype="uint8", layout="NHWC", normalize=False)):
        planar = [b[0].clone() for b in dsc.Loader(path, batch_size=250, seed=4, threads=1, transforms=jitter,
                                                   **kw).epoch(2)]
        packed = [b[0].clone() for b in dsc.Loader(path, batch_size=250, seed=4, threads=3,
                                                   transforms=jitter + ",random_perspective(p=0)", **kw).epoch(2)]
        plain = [b[0].clone() for b in dsc.Loader(path, batch_size=250, seed=4, threads=1, **kw).epoch(2)]
        assert len(planar) == len(packed) == 4
        assert all(torch.equal(a, b) for a, b in zip(planar, packed))
        assert not torch.equal(planar[0], plain[0])


def test_callables_refused_batch_hook_runs(small):
    path, _ = small
    with pytest.raises(TypeError, match="GIL"):
        dsc.Loader(path, transforms=[lambda img: img])
    with pytest.raises(ValueError, match="unknown transform 'colour_jitter'"):
        dsc.Loader(path, transforms="colour_jitter(0.4)")
    with pytest.raises(Exception, match="unknown argument 'bright'"):
        dsc.T.ColorJitter(bright=0.4)
    seen = []

    def hook(images, labels):
        seen.append(images.shape[0])
        return images * 0, labels

    loader = dsc.Loader(path, preset="cifar-test", batch_size=250, batch_transform=hook)
    for images, _ in loader.epoch(0):
        assert float(images.abs().max()) == 0
    assert seen == [250] * 4
    assert str(dsc.T.RandAugment(2, 9, interpolation="bilinear")) == "rand_augment(2,9,interpolation=bilinear)"


def test_remote_worker_runs_the_same_transforms(small, dsc_binary):
    """The transforms row travels in the WorkSpec: a `dsc serve` worker's batches equal the local ones."""
    import subprocess
    path, _ = small
    if not _dsc.has_remote:
        pytest.skip("built without gRPC")
    worker = subprocess.Popen([dsc_binary, "serve", str(path), "--threads", "1"], stdout=subprocess.PIPE, text=True)
    try:
        line = worker.stdout.readline()
        assert line.startswith("listening on "), line
        addr = line.split()[-1]
        opts = dict(preset="cifar-train", batch_size=125, seed=3, transforms=SPEC)
        for kw in (dict(), dict(dtype="uint8", layout="NHWC", normalize=False)):
            local = [x.clone() for x, _ in dsc.Loader(path, threads=1, **opts, **kw).epoch(1)]
            remote = [x.clone() for x, _ in dsc.Loader(path, remote=[addr], local_threads=0, **opts, **kw).epoch(1)]
            assert len(local) == len(remote) == 8
            assert all(torch.equal(a, b) for a, b in zip(local, remote))
    finally:
        worker.kill()
        worker.wait()
