"""dsc.Views / Loader(views=...): N independently augmented views of the same samples, in step."""
import numpy as np
import pytest

import dsc


@pytest.fixture(scope="module")
def cifar(tmp_path_factory):
    import os
    src = os.path.join(os.environ.get("DSC_TESTDATA", "build/testdata"), "cifar10", "test")
    out = tmp_path_factory.mktemp("views") / "c.beton"
    dsc.build(src, out, encoding="raw")
    return out


GLOBAL = dict(crop="random_resized", out_size=24, scale=(0.4, 1.0))
LOCAL = dict(crop="random_resized", out_size=12, scale=(0.05, 0.4))


def _epoch(views, e=0):
    return [(b[0], b[1], b.indices) for b in views.epoch(e)]


def test_views_are_the_same_samples_augmented_independently(cifar):
    views = dsc.Views(cifar, views=[GLOBAL, GLOBAL, LOCAL], batch_size=100, flip=True, dtype="uint8", layout="NHWC", seed=3, copy=True,
                      subset=list(range(500)))
    plain = dsc.Loader(cifar, batch_size=100, dtype="uint8", layout="NHWC", seed=3, subset=list(range(500)), crop="center", out_size=32)
    seen = 0
    for (imgs, labels, idx), (full, plain_labels) in zip(_epoch(views), plain.epoch(0)):
        assert [tuple(x.shape) for x in imgs] == [(100, 24, 24, 3), (100, 24, 24, 3), (100, 12, 12, 3)]
        assert (labels == plain_labels).all()          # the same samples in the same order as a plain loader
        assert (imgs[0] != imgs[1]).flatten(1).any(1).float().mean() > 0.9   # same options, other crops
        # Each view is a crop of its own sample: its mean colour is close to the full image's, far from others'.
        for v in imgs[:2]:
            d_same = (v.float().mean(dim=(1, 2)) - full.float().mean(dim=(1, 2))).abs().mean(1)
            d_other = (v.float().mean(dim=(1, 2)) - full.roll(1, 0).float().mean(dim=(1, 2))).abs().mean(1)
            assert (d_same < d_other).float().mean() > 0.8
        seen += len(idx)
    assert seen == 500


def test_views_are_deterministic_for_any_thread_count(cifar):
    a = dsc.Loader(cifar, views=[GLOBAL, LOCAL], batch_size=64, copy=True, dtype="uint8", layout="NHWC", seed=5, threads=2, subset=list(range(256)))
    b = dsc.Views(cifar, views=[GLOBAL, LOCAL], batch_size=64, copy=True, dtype="uint8", layout="NHWC", seed=5, threads=4, subset=list(range(256)))
    assert isinstance(a, dsc.Views)
    for (ia, la, xa), (ib, lb, xb) in zip(_epoch(a, 1), _epoch(b, 1)):
        assert (xa == xb).all() and (la == lb).all()
        for va, vb in zip(ia, ib):
            assert (va == vb).all()
    # view k alone is view k of the Views: a second process can rebuild one view
    one = dsc.Loader(cifar, batch_size=64, dtype="uint8", layout="NHWC", seed=5, subset=list(range(256)), view=1, **LOCAL)
    for (imgs, _, _), single in zip(_epoch(a, 1), one.epoch(1)):
        assert (imgs[1] == single[0]).all()


def test_views_refuse_per_view_order(cifar):
    with pytest.raises(ValueError, match="same for every view"):
        dsc.Views(cifar, views=[dict(seed=1), dict(seed=2)], batch_size=8)
