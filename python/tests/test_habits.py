"""`import dsc` as a PyTorch user writes it: each everyday habit of a training or evaluation loop works,
or fails with a message that says what to do; none changes results without a word (issue 60).
References are independent of the loader's own code paths: torch's own functions, NumPy arithmetic on
the uint8 pixels, copied batches, dsc.info and the dsc program."""
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import dsc

from conftest import CLASSES


@pytest.fixture(scope="module")
def test_file(testdata, tmp_path_factory):
    """The whole CIFAR-10 test split (10,000 real JPEGs) as a dsc file."""
    out = tmp_path_factory.mktemp("habits") / "test.beton"
    dsc.build(testdata, out, split="test", threads=2)
    return out


@pytest.fixture(scope="module")
def small_tree(testdata, tmp_path_factory):
    """100 real train JPEGs per class as a class-per-folder tree (so the file names its classes), built."""
    d = tmp_path_factory.mktemp("tree")
    for c in CLASSES:
        (d / "src" / c).mkdir(parents=True)
        for k in range(100):
            os.symlink(testdata / "train" / c / f"{k:04d}.jpg", d / "src" / c / f"{k:04d}.jpg")
    dsc.build(d / "src", d / "small.beton", threads=2)
    return d / "small.beton"


def tiny_model():
    torch.manual_seed(0)
    return torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(3 * 32 * 32, 10))


# ---- 1. no trap in the first hour ----

def test_cross_entropy_and_one_hot_take_a_raw_batch(small):
    path, rows = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=100, threads=2)
    x, y = next(iter(loader))
    assert y.dtype == torch.int64
    loss = F.cross_entropy(tiny_model()(x), y)
    assert torch.isfinite(loss)
    assert F.one_hot(y, 10).sum() == 100
    assert y.tolist() == [label for _, label in rows[:100]]  # cifar-test is sequential
    # label_dtype chooses; torch and NumPy dtypes are taken for the str.
    for want in ("int32", torch.int32, np.int32):
        _, y32 = next(iter(dsc.Loader(path, preset="cifar-test", batch_size=10, label_dtype=want)))
        assert y32.dtype == torch.int32 and y32.tolist() == y[:10].tolist()


def test_a_confusion_matrix_holding_every_batchs_labels_pins_no_image(small):
    """Labels are owned (a copy of N integers): holding them all keeps no batch buffer, even with no
    room at all for held batches."""
    path, rows = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=100, threads=2, max_leases=0, lease_memory=0)
    model = tiny_model()
    truth, preds = [], []
    with torch.no_grad():
        for x, y in loader:
            truth.append(y)
            preds.append(model(x).argmax(1))
    del x, y
    assert loader.leased() == 0
    cm = torch.zeros(10, 10, dtype=torch.int64)
    cm.index_put_((torch.cat(truth), torch.cat(preds)), torch.ones(1000, dtype=torch.int64), accumulate=True)
    assert cm.sum() == 1000
    assert cm.sum(1).tolist() == dsc.info(path)["fields"][1]["label_counts"]


def test_gradient_accumulation_over_8_steps_holding_outputs(small):
    """Eight outputs kept with their graphs (each keeps its input batch) before one backward: the pool
    grows with one warning, and the gradient is the one computed from copies."""
    path, _ = small
    opts = dict(preset="cifar-train", batch_size=50, seed=5, threads=2)
    loader = dsc.Loader(path, **opts)
    model = tiny_model()
    with pytest.warns(RuntimeWarning, match=r"holds \d+ batches.*lease_memory") as w:
        outs = []
        for step, (x, y) in enumerate(loader):
            outs.append(F.cross_entropy(model(x), y, reduction="sum"))
            if step == 7:
                break
        sum(outs).backward()
    assert len([m for m in w if "lease_memory" in str(m.message)]) == 1  # once
    got = model[1].weight.grad.clone()
    ref_model = tiny_model()
    ref = dsc.Loader(path, **opts)
    sum(F.cross_entropy(ref_model(x), y, reduction="sum") for _, (x, y) in zip(range(8), ref.epoch(0, copy=True))).backward()
    torch.testing.assert_close(got, ref_model[1].weight.grad, rtol=1e-5, atol=1e-4)


def test_list_of_an_epoch(small):
    path, _ = small
    opts = dict(preset="cifar-train", batch_size=64, seed=1, threads=2)
    loader = dsc.Loader(path, **opts)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        kept = list(loader.epoch(0))
    assert len(kept) == len(loader) == 16
    copies = list(dsc.Loader(path, **opts).epoch(0, copy=True))
    for (x, y), (cx, cy) in zip(kept, copies):
        assert torch.equal(x, cx) and torch.equal(y, cy)
    assert sum(len(y) for _, y in kept) == 1000  # one rank: the last batch is short, not padded


def test_past_the_memory_budget_the_error_counts_and_says_both_remedies(small):
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=100, threads=1, prefetch=0, max_leases=1, lease_memory=0)
    it = iter(loader)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        held = [next(it), next(it)]  # one spare, no budget: the third batch has no buffer
    with pytest.raises(dsc.Error) as e:
        next(it)
    msg = str(e.value)
    assert re.search(r"Python holds 2 batches", msg), msg
    assert "copy=True" in msg and "lease_memory" in msg, msg
    assert "max_leases is" not in msg  # "holds 2 batches and max_leases is 1" read like a contradiction
    del held


def test_eval_counts_each_of_the_10000_test_images_once(test_file):
    """preset=None, batch 3,000, drop_last=False on one rank: 3 full batches and a short one of 1,000,
    the 10,000 samples each once, as torch's DataLoader gives them."""
    loader = dsc.Loader(test_file, batch_size=3000, threads=2, dtype="uint8", layout="NHWC", normalize=False)
    assert len(loader) == 4
    sizes, seen, labels = [], [], []
    for x, y, indices, padding in loader.epoch(0, with_indices=True):
        sizes.append(len(x))
        assert len(y) == len(indices) == len(x) and not padding.any()
        seen += indices.tolist()
        labels.append(y)
    assert sizes == [3000, 3000, 3000, 1000]
    assert sorted(seen) == list(range(10000))
    assert torch.cat(labels).bincount().tolist() == [1000] * 10
    # Asked for, the padding is there and visible as a mask on the batch.
    padded = dsc.Loader(test_file, batch_size=3000, threads=2, dtype="uint8", layout="NHWC", normalize=False, pad_last=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # 4 batches kept: the pool grows, and says so
        batches = list(padded.epoch(0))
    assert [len(b[0]) for b in batches] == [3000] * 4
    assert int(batches[-1].padding.sum()) == 2000 and not any(b.padding.any() for b in batches[:3])
    # Two ranks (random order) pad as DistributedSampler does, and say which samples only pad.
    counted = []
    for rank in (0, 1):
        r = dsc.Loader(test_file, batch_size=1500, threads=2, dtype="uint8", layout="NHWC", normalize=False,
                       rank=rank, world_size=2)
        for b in r.epoch(0):
            assert len(b[0]) == 1500
            counted += b.indices[~b.padding].tolist()
    assert sorted(counted) == list(range(10000))


def test_normalisation_in_unit_range_is_said_explicitly(small):
    path, _ = small
    mean, std = (0.49, 0.48, 0.45), (0.25, 0.24, 0.26)
    with pytest.raises(dsc.OptionError) as e:
        dsc.Loader(path, batch_size=10, normalize=True, mean=mean, std=std)
    assert "0..1" in str(e.value) and "0..255" in str(e.value) and "scale" in str(e.value), str(e.value)
    raw = next(iter(dsc.Loader(path, order="sequential", batch_size=10, dtype="uint8", layout="NHWC", normalize=False)))[0]
    x, _ = next(iter(dsc.Loader(path, order="sequential", batch_size=10, normalize=dict(mean=mean, std=std, scale="unit"))))
    want = ((raw.numpy().astype(np.float32) / 255 - np.float32(mean)) / np.float32(std)).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(x.numpy(), want, rtol=0, atol=1e-5)
    assert abs(float(x.mean())) < 3
    with pytest.raises(ValueError, match="scale"):
        dsc.Loader(path, normalize=dict(mean=mean, std=std, scale="percent"))


def test_a_second_iterator_raises_on_the_first_never_an_empty_epoch(small):
    path, _ = small
    L = dsc.Loader(path, preset="cifar-test", batch_size=100, threads=1)
    assert len(L) == 10
    with pytest.raises(dsc.Error, match="another iteration"):
        for a, b in zip(L, L):
            pass
    a = L.epoch(0)
    next(a)
    b = L.epoch(1)
    with pytest.raises(dsc.Error, match="another iteration"):
        next(a)
    assert sum(1 for _ in b) == 10


def test_rank_from_the_environment_warns_or_is_asked_for(small, monkeypatch):
    path, _ = small
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.warns(RuntimeWarning, match=r"rank 1 and world_size 2 from the environment.*rank=.env."):
        loader = dsc.Loader(path, preset="cifar-test", batch_size=100)
    assert (loader.rank, loader.world_size, len(loader)) == (1, 2, 5)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert dsc.Loader(path, preset="cifar-test", batch_size=100, rank="env").world_size == 2
    monkeypatch.delenv("RANK")
    with pytest.warns(RuntimeWarning, match="WORLD_SIZE=2 without RANK"):
        loader = dsc.Loader(path, preset="cifar-test", batch_size=100)
    assert (loader.rank, loader.world_size, len(loader)) == (0, 1, 10)


def test_an_initialised_process_group_wins_over_the_environment(small, monkeypatch, tmp_path):
    import torch.distributed as dist
    path, _ = small
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'pg'}", rank=0, world_size=1)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            loader = dsc.Loader(path, preset="cifar-test", batch_size=100)
        assert (loader.rank, loader.world_size) == (0, 1)
    finally:
        dist.destroy_process_group()


# ---- 2. fits the torch ecosystem ----

def test_where_a_dataloader_is_expected(small, test_file):
    path, _ = small
    opts = dict(preset="cifar-train", batch_size=100, seed=3, threads=2)
    loader = dsc.Loader(path, **opts)
    assert dsc.Loader(test_file, batch_size=100).classes == CLASSES == dsc.info(test_file)["classes"]
    assert loader.classes == []  # a manifest names no classes
    # The loader itself is not a Dataset of samples: torch's DataLoader over it says what to write.
    with pytest.raises(TypeError, match=r"DataLoader\(loader.dataset\(\), batch_size=None\)"):
        next(iter(torch.utils.data.DataLoader(loader)))
    dl = torch.utils.data.DataLoader(loader.dataset(), batch_size=None)
    assert len(dl) == len(loader) == 10
    loader.set_epoch(2)
    want = [(x.clone(), y.clone()) for x, y in dsc.Loader(path, **opts).epoch(2)]
    got = 0
    for (x, y), (wx, wy) in zip(dl, want):
        assert torch.equal(x, wx) and torch.equal(y, wy)
        assert loader.leased() >= 1  # x is the loader's batch memory, not a copy
        got += 1
    assert got == 10
    # set_epoch names what the next `for` iterates, as DistributedSampler.set_epoch does.
    loader.set_epoch(1)
    assert torch.equal(next(iter(loader))[0], next(iter(dsc.Loader(path, **opts).epoch(1)))[0])
    with pytest.raises(dsc.Error, match="num_workers=0"):
        next(iter(torch.utils.data.DataLoader(loader.dataset(), batch_size=None, num_workers=1)))


def test_set_epoch_after_load_state_dict(small):
    """Lightning's order on a resume: load the checkpoint, then set_epoch(its epoch): the rest of that
    epoch, exactly; another epoch: that epoch from its start."""
    path, _ = small
    opts = dict(preset="cifar-train", batch_size=100, seed=4, threads=2)
    a = dsc.Loader(path, **opts)
    it = a.epoch(1)
    for _ in range(3):
        next(it)
    state = a.state_dict()
    want = [x.clone() for x, _ in dsc.Loader(path, **opts).epoch(1)][3:]
    b = dsc.Loader(path, **opts)
    b.load_state_dict(state)
    b.set_epoch(1)
    got = [x.clone() for x, _ in b]
    assert len(got) == len(want) == 7 and all(torch.equal(g, w) for g, w in zip(got, want))
    b.load_state_dict(state)
    b.set_epoch(2)
    assert torch.equal(next(iter(b))[0], next(iter(dsc.Loader(path, **opts).epoch(2)))[0])


@pytest.mark.parametrize("wrong,right", [("shuffle", "order"), ("num_workers", "threads"), ("transform", "flip"),
                                         ("batchsize", "batch_size"), ("seeed", "seed"), ("pin_memroy", "pin_memory")])
def test_a_misspelt_option_points_at_the_right_one(small, wrong, right):
    path, _ = small
    if wrong == "transform" and "transforms" in dsc.LOADER_OPTIONS:  # the transform list, where there is one
        right = "transforms"
    with pytest.raises(TypeError) as e:
        dsc.Loader(path, **{wrong: 1})
    msg = str(e.value)
    assert f"unknown Loader option '{wrong}'" in msg and right in msg.split("accepted")[0], msg


def test_the_cli_suggests_too(small, dsc_binary):
    path, _ = small
    r = subprocess.run([dsc_binary, "bench", str(path), "--batchsize", "64"], capture_output=True, text=True)
    first = r.stderr.splitlines()[0]  # the help that follows lists every flag
    assert r.returncode == 2 and "batchsize" in first and "--batch-size" in first, r.stderr


def test_dtype_takes_torch_and_numpy_dtypes(small):
    path, _ = small
    for dt in (torch.float16, np.float16, np.dtype("float16")):
        x, _ = next(iter(dsc.Loader(path, preset="cifar-test", batch_size=10, dtype=dt)))
        assert x.dtype == torch.float16
    x, _ = next(iter(dsc.Loader(path, batch_size=10, dtype=torch.uint8, layout="NHWC", normalize=False)))
    assert x.dtype == torch.uint8
    with pytest.raises(dsc.OptionError, match="float32"):
        dsc.Loader(path, dtype=torch.float64)


def test_a_folder_or_an_image_says_to_build_first(testdata):
    folder = testdata / "test"
    image = folder / "cat" / "0000.jpg"
    for p in (folder, image):
        with pytest.raises(dsc.Error) as e:
            dsc.Loader(p)
        msg = str(e.value)
        assert "dsc.build(" in msg and "dsc build " in msg and str(p) in msg, msg


def test_build_result_agrees_with_info(small, tmp_path):
    _, rows = small
    m = tmp_path / "m.txt"
    m.write_text("".join(f"{p}\t{label}\n" for p, label in rows[:200]))
    rep = dsc.build(m, tmp_path / "x.beton", format="manifest")
    info = dsc.info(tmp_path / "x.beton")
    assert rep["payload_bytes"] == info["payload_bytes"]
    assert rep["jpeg_tables"] == info["jpeg_table_sets"] >= 1
    assert rep["payload_bytes"] < sum(os.path.getsize(p) for p, _ in rows[:200])  # the shared tables are not counted


def test_messages_agree_with_help_and_version(small, dsc_binary):
    path, _ = small
    with pytest.raises(dsc.OptionError) as e:
        dsc.Loader(path, batch_size=1 << 20, prefetch=64, out_size=2048, crop="center")
    assert "(prefetch + 1 + max_leases)" in str(e.value), str(e.value)
    assert "prefetch + 1 + max_leases" in dsc.Loader.__doc__ and "prefetch + 2" not in dsc.Loader.__doc__
    out = subprocess.run([dsc_binary, "--version"], check=True, capture_output=True, text=True).stdout
    assert out.split()[1] == dsc.__version__


# ---- 3. the README's training step runs as written ----

def readme_python_blocks():
    text = open(os.path.join(os.environ["DSC_SOURCE_DIR"], "README.md")).read()
    section = text[text.index("## Python: `import dsc`"):]
    section = section[:section.index("\n## ", 5)]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_the_readmes_training_step_runs(small_tree, tmp_path):
    step = [b for b in readme_python_blocks() if "optimizer.step()" in b]
    assert len(step) == 1, "the README's Python section shows one complete training step"
    os.symlink(small_tree, tmp_path / "train.beton")
    os.symlink(small_tree, tmp_path / "test.beton")
    package = os.path.dirname(os.path.dirname(os.path.abspath(dsc.__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package, os.environ.get("PYTHONPATH", "")]),
               PYTHONWARNINGS="error::RuntimeWarning")  # an ordinary loop keeps no batch beyond the pool
    r = subprocess.run([sys.executable, "-c", step[0]], cwd=tmp_path, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("over 1000 images") == 2, r.stdout  # two epochs, each test image counted once
