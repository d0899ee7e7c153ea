"""Batch-level MixUp / CutMix (kernels/mix.h) against a NumPy restatement of torchvision's reference
RandomMixup / RandomCutmix with the drawn lambda and box; lambda's distribution against torch's Beta."""
import math

import numpy as np
import pytest

import dsc
from dsc import _dsc

torch = pytest.importorskip("torch")


def reference(images, labels, classes, draw, smoothing, nchw):
    x = images.copy()
    rolled = np.roll(images, 1, axis=0)
    if draw["mixed"]:
        lam = np.float32(draw["lam"])
        if draw["cutmix"]:
            x0, y0, x1, y1 = draw["box"]
            if nchw:
                x[:, :, y0:y1, x0:x1] = rolled[:, :, y0:y1, x0:x1]
            else:
                x[:, y0:y1, x0:x1, :] = rolled[:, y0:y1, x0:x1, :]
        else:
            x = lam * images + np.float32(1.0 - draw["lam"]) * rolled
    onehot = np.full((len(labels), classes), smoothing / classes, np.float64)
    onehot[np.arange(len(labels)), labels] += 1.0 - smoothing
    lam = draw["lam"] if draw["mixed"] else 1.0
    soft = lam * onehot + (1 - lam) * np.roll(onehot, 1, axis=0)
    return x, soft


@pytest.mark.parametrize("mode", ["mixup", "cutmix", "both"])
@pytest.mark.parametrize("nchw", [True, False])
def test_mix_equals_reference(mode, nchw):
    rng = np.random.default_rng(0)
    shape = (16, 3, 24, 20) if nchw else (16, 24, 20, 3)
    labels = rng.integers(0, 10, 16).astype(np.int32)
    mix = 0.0 if mode == "cutmix" else 0.4
    cut = 0.0 if mode == "mixup" else 1.0
    kinds = set()
    for batch in range(20):
        images = rng.standard_normal(shape).astype(np.float32)
        work = images.copy()
        soft, draw = _dsc._mix_batch(work, labels, 10, mix, cut, 0.9, 0.5, 0.1, nchw, 3, 1, batch)
        ref, ref_soft = reference(images, labels, 10, draw, 0.1, nchw)
        assert np.array_equal(work, ref), (mode, batch, draw)
        np.testing.assert_allclose(soft, ref_soft, atol=1e-6)
        np.testing.assert_allclose(soft.sum(1), 1.0, atol=1e-5)
        kinds.add((draw["mixed"], draw["cutmix"]))
        again, draw2 = _dsc._mix_batch(images.copy(), labels, 10, mix, cut, 0.9, 0.5, 0.1, nchw, 3, 1, batch)
        assert draw2 == draw  # the same batch is mixed the same way
    assert (False, False) in kinds  # prob 0.9: some batches pass unmixed
    if mode == "both":
        assert (True, True) in kinds and (True, False) in kinds


def test_lambda_follows_beta():
    n = 4000
    x = np.zeros((2, 1, 4, 4), np.float32)
    lab = np.zeros(2, np.int32)
    ours = [_dsc._mix_batch(x, lab, 2, 0.2, 0.0, 1.0, 0.0, 0.0, True, 5, 0, b)[1]["lam"] for b in range(n)]
    torch.manual_seed(0)
    theirs = torch.distributions.Beta(torch.tensor([0.2]), torch.tensor([0.2])).sample((n,)).flatten().tolist()
    edges = np.linspace(0, 1, 21)
    a, _ = np.histogram(ours, edges)
    b, _ = np.histogram(theirs, edges)
    keep = (a + b) > 0
    chi = float((((a - b) ** 2)[keep] / (a + b)[keep]).sum())
    df = int(keep.sum()) - 1
    k = 2.0 / (9.0 * df)
    bound = df * (1 - k + 3.0902 * math.sqrt(k)) ** 3
    assert chi < bound, (chi, bound)


def test_loader_hook_is_deterministic(small):
    path, _ = small
    out = []
    for _ in range(2):
        mix = dsc.T.MixUpCutMix(10, label_smoothing=0.1, seed=4)
        loader = dsc.Loader(path, preset="cifar-train", batch_size=250, seed=1, batch_transform=mix)
        out.append([(i.clone(), l.clone()) for i, l in loader.epoch(2)])
    assert all(torch.equal(a[0], b[0]) and torch.equal(a[1], b[1]) for a, b in zip(*out))
    assert out[0][0][1].shape == (250, 10) and out[0][0][1].dtype == torch.float32
