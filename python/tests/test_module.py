"""import dsc against independent references: PIL's decode, numpy arithmetic, the dsc program."""
import gc
import json
import os
import subprocess
import time
import warnings

import numpy as np
import pytest
import torch
from PIL import Image

import dsc

CIFAR_MEAN = np.array([125.307, 122.961, 113.8575], dtype=np.float32)
CIFAR_STD = np.array([51.5865, 50.847, 51.255], dtype=np.float32)


def pil_rgb(path):
    return np.asarray(Image.open(path).convert("RGB"))


def test_info_is_dsc_info_json(small, dsc_binary):
    path, rows = small
    got = dsc.info(path)
    cli = json.loads(subprocess.run([dsc_binary, "info", "--json", str(path)], check=True, capture_output=True, text=True).stdout)
    assert got == cli
    assert got["samples"] == len(rows) == 1000
    assert got["fields"][1]["label_counts"] == [100] * 10


def test_info_of_a_file_whose_name_is_not_utf8(small, tmp_path):
    # File names are bytes; the JSON behind dsc.info holds U+FFFD for those that are not UTF-8 (it held the
    # raw byte, and json.loads raised UnicodeDecodeError).
    path, rows = small
    odd = os.path.join(os.fsencode(tmp_path), b"x\xff.beton")
    os.symlink(os.fsencode(path), odd)
    got = dsc.info(odd)
    assert got["file"].endswith("x\ufffd.beton")
    assert got["samples"] == len(rows)


def test_build_report_and_errors(small, tmp_path):
    path, rows = small
    with pytest.raises(dsc.Error, match="nowhere"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton")
    assert not (tmp_path / "x.beton").exists()
    with pytest.raises(TypeError, match="accepted: .*quality"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton", qualty=3)
    with pytest.raises(ValueError, match="'444', '422', '420', 'gray'"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton", subsampling="411")
    # The writer's option and sample errors name the keyword, not the dsc program's flag.
    with pytest.raises(dsc.OptionError, match=r"^center_crop must be in \(0, 1\]$"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton", center_crop=2.0)
    bad = tmp_path / "bad.txt"
    (tmp_path / "garbage.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    bad.write_text(f"{rows[0][0]}\t0\n{tmp_path / 'garbage.jpg'}\t1\n")
    with pytest.raises(dsc.Error, match=r"garbage\.jpg.*use skip_invalid to skip") as e:
        dsc.build(bad, tmp_path / "x.beton", format="manifest")
    assert "--" not in str(e.value)
    assert not (tmp_path / "x.beton").exists()
    # A file name that looks like a flag is left as it is.
    (tmp_path / "a --quality.jpg").write_bytes(b"\xff\xd8 not a JPEG")
    bad.write_text(f"{tmp_path / 'a --quality.jpg'}\t1\n")
    with pytest.raises(dsc.Error, match=r"a --quality\.jpg.*use skip_invalid"):
        dsc.build(bad, tmp_path / "x.beton", format="manifest")
    # restart_interval, as `dsc build --restart-interval`.
    with pytest.raises(dsc.OptionError, match="^restart_interval must be auto, none or a number of MCUs in 1..65535, not 'often'"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton", restart_interval="often")
    with pytest.raises(ValueError, match=r"restart_interval = 0 is out of range \[1, 65535\]"):
        dsc.build(tmp_path / "nowhere", tmp_path / "x.beton", restart_interval=0)
    # A re-encoding build: report fields against the file itself.
    m = tmp_path / "m.txt"
    m.write_text("".join(f"{p}\t{label}\n" for p, label in rows[:50]))
    rep = dsc.build(m, tmp_path / "r.beton", format="manifest", encoding="raw")
    assert rep["samples"] == 50 and rep["encodings"] == {"raw": 50}
    assert rep["file_size"] == os.path.getsize(tmp_path / "r.beton")
    for interval in ("none", 2):
        out = tmp_path / f"ri-{interval}.beton"
        dsc.build(m, out, format="manifest", reencode=True, restart_interval=interval)
        info = dsc.info(out)
        assert info["build_options"]["restart_interval"] == str(interval)
        assert "restart" not in info  # 32x32 images are below the size that gets markers


def test_pixels_are_pils_decode(small):
    """uint8, no augmentation, PIL-identical upsampling: every pixel equals PIL's decode of the JPEG."""
    path, rows = small
    loader = dsc.Loader(path, batch_size=96, order="sequential", dtype="uint8", layout="NHWC", normalize=False,
                        fancy_upsampling=True, threads=2)
    assert len(loader) == 11
    seen = 0
    for images, labels, indices, padding in loader.epoch(0, with_indices=True):
        assert isinstance(images, torch.Tensor) and images.dtype == torch.uint8
        for j in range(images.shape[0]):
            if padding[j]:
                continue
            i = int(indices[j])
            assert i == seen
            np.testing.assert_array_equal(images[j].numpy(), pil_rgb(rows[i][0]), err_msg=rows[i][0])
            assert int(labels[j]) == rows[i][1]
            seen += 1
    assert seen == 1000


def test_normalised_float_is_numpy_of_pil(small):
    path, rows = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=100, fancy_upsampling=True, threads=1)
    images, labels, indices, _ = next(iter(loader.epoch(0, with_indices=True)))
    assert images.shape == (100, 3, 32, 32) and images.dtype == torch.float32
    for j in (0, 17, 99):
        want = ((pil_rgb(rows[int(indices[j])][0]).astype(np.float32) - CIFAR_MEAN) / CIFAR_STD).transpose(2, 0, 1)
        np.testing.assert_allclose(images[j].numpy(), want, rtol=0, atol=1e-5)


def test_batches_are_the_dsc_programs(small, dsc_binary, tmp_path):
    """Same file, preset, batch size and seed: the samples of each batch equal `dsc bench`'s, over 3 epochs."""
    path, _ = small
    out = tmp_path / "idx.txt"
    subprocess.run([dsc_binary, "bench", str(path), "--preset", "cifar-train", "--batch-size", "64", "--seed", "7",
                    "--epochs", "3", "--threads", "1", "--indices-out", str(out)], check=True, capture_output=True)
    cli = [[int(x) for x in line.split()] for line in out.read_text().splitlines()]
    loader = dsc.Loader(path, preset="cifar-train", batch_size=64, seed=7, threads=2, pad_last=True)  # as C++ pads
    py = []
    for _ in range(3):
        for _, _, indices, _ in loader.epoch(loader._next_epoch, with_indices=True):
            py.append(indices.tolist())
    assert py == cli
    assert len(py) == 3 * 16 and py[0] != py[16]  # epochs are shuffled differently


def test_default_iteration_is_epoch_after_epoch(small):
    path, _ = small
    a = dsc.Loader(path, preset="cifar-train", batch_size=128, seed=1, threads=1)
    b = dsc.Loader(path, preset="cifar-train", batch_size=128, seed=1, threads=2)
    for e in range(2):
        got = [x.clone() for x, _ in a]
        want = [x.clone() for x, _ in b.epoch(e)]
        assert len(got) == len(want) == 8
        for g, w in zip(got, want):
            assert torch.equal(g, w)


def test_keeping_every_batch_alive(small):
    """Views of every batch of an epoch, all held: each equals the copied batch, all distinct; dropped,
    their buffers are reused (no new allocation in the next epochs)."""
    path, _ = small
    n = 16
    loader = dsc.Loader(path, preset="cifar-train", batch_size=64, seed=2, threads=2, max_leases=n)
    kept = list(loader.epoch(0))
    assert len(kept) == n
    assert loader.leased() == n
    ref = dsc.Loader(path, preset="cifar-train", batch_size=64, seed=2, threads=1)
    copies = list(ref.epoch(0, copy=True))
    for (x, y), (cx, cy) in zip(kept, copies):
        assert torch.equal(x, cx) and torch.equal(y, cy)
    pointers = {x.data_ptr() for x, _ in kept}
    assert len(pointers) == n  # distinct memory
    for i in range(n - 1):
        assert not torch.equal(kept[i][0][:8], kept[i + 1][0][:8])
    allocated = loader.buffers_allocated()
    assert allocated <= 3 + 1 + n
    del kept, x, y
    gc.collect()
    assert loader.leased() == 0
    for e in (1, 2):
        for x, y in loader.epoch(e):
            pass
        assert loader.buffers_allocated() == allocated
    # The copied batches own their memory: nothing leased.
    assert ref.leased() == 0


def test_ordinary_loop_stays_within_bound(small):
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-train", batch_size=32, seed=0, threads=2, prefetch=2, max_leases=2)
    peak = 0
    for x, y in loader:  # the previous batch is still bound to x while the next is fetched
        peak = max(peak, loader.buffers_allocated())
    assert peak <= 2 + 1 + 2


def test_view_outlives_loader(small):
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-train", batch_size=50, seed=4, threads=1)
    it = loader.epoch(0)
    x, y = next(it)
    want = dsc.Loader(path, preset="cifar-train", batch_size=50, seed=4, threads=1)
    wx, wy = next(iter(want.epoch(0, copy=True)))
    del it, loader
    gc.collect()
    assert torch.equal(x, wx) and torch.equal(y, wy)


def test_state_dict_resumes_exactly(small):
    path, _ = small
    opts = dict(preset="cifar-train", global_batch_size=64, seed=5, threads=1)
    full = [x.clone() for e in range(2) for x, _ in dsc.Loader(path, **opts).epoch(e)]
    a = dsc.Loader(path, **opts)
    got = []
    for x, _ in a:  # epoch 0, stopped after 5 batches
        got.append(x.clone())
        if len(got) == 5:
            break
    state = a.state_dict()
    b = dsc.Loader(path, **opts)
    b.load_state_dict(state)
    got += [x.clone() for x, _ in b]  # the rest of epoch 0
    got += [x.clone() for x, _ in b]  # then epoch 1
    assert len(got) == len(full) == 32
    for g, w in zip(got, full):
        assert torch.equal(g, w)
    # Another world size: ranks 0 and 1 of 2 split each remaining global batch.
    halves = []
    for r in range(2):
        c = dsc.Loader(path, rank=r, world_size=2, **opts)
        c.load_state_dict(state)
        halves.append([b[0][~b.padding].clone() for b in c])  # one rank's last batch is short, two ranks' padded
    for k, (h0, h1) in enumerate(zip(*halves)):
        assert torch.equal(torch.cat([h0, h1]), full[5 + k])
    # Another run's state is refused, naming what differs.
    other = dsc.Loader(path, preset="cifar-train", global_batch_size=64, seed=6, threads=1)
    with pytest.raises(dsc.Error, match="seed"):
        other.load_state_dict(state)


def test_state_at_an_epochs_end_keeps_the_epoch_count(small):
    """torchdata's StatefulDataLoader rule: a state taken after the epoch's last batch but inside the
    loop resumes into that epoch's empty rest, then the next epoch; one taken after the loop ended
    resumes at the next epoch. `for e in range(start, E): for b in loader` then trains E epochs in all
    (it trained one more)."""
    path, _ = small
    opts = dict(preset="cifar-train", global_batch_size=64, seed=5, threads=1)
    full = [[x.clone() for x, _ in dsc.Loader(path, **opts).epoch(e)] for e in range(3)]
    n = len(full[0])
    a = dsc.Loader(path, **opts)
    inside = after = None
    for k, (x, _) in enumerate(a):
        if k == n - 1:
            inside = a.state_dict()  # checkpointed in the loop body of the last step
    after = a.state_dict()
    assert inside["epoch_end_pending"] and not after["epoch_end_pending"]
    b = dsc.Loader(path, **opts)
    b.load_state_dict(inside)
    assert b.state_dict()["epoch_end_pending"]  # still pending until iterated
    epochs = [[x.clone() for x, _ in b] for _ in range(3)]
    assert [len(e) for e in epochs] == [0, n, n]
    assert all(torch.equal(g, w) for g, w in zip(epochs[1] + epochs[2], full[1] + full[2]))
    c = dsc.Loader(path, **opts)
    c.load_state_dict(after)
    got = [x.clone() for x, _ in c]
    assert len(got) == n and all(torch.equal(g, w) for g, w in zip(got, full[1]))
    # A state from before this rule (no flag) resumes as before: at the next epoch.
    d = dsc.Loader(path, **opts)
    d.load_state_dict({"dsc_loader_state": inside["dsc_loader_state"], "version": 1})
    got = [x.clone() for x, _ in d]
    assert len(got) == n and all(torch.equal(g, w) for g, w in zip(got, full[1]))


def test_state_at_the_end_of_a_resumed_rest_keeps_the_epoch_count(small):
    """quasi_random states of 2 ranks, merged and resumed on 1: the rest of the epoch is a new plan with
    fewer batches than len(loader). A state taken after its last batch, inside the loop, is pending an
    epoch end as in an ordinary epoch (it was compared with len(): restoring it skipped the empty rest
    and the run trained one epoch more)."""
    path, _ = small
    opts = dict(preset="cifar-train", order="quasi_random", seed=1, global_batch_size=100, threads=1)
    states = []
    for r in range(2):
        a = dsc.Loader(path, rank=r, world_size=2, **opts)
        for k, _ in enumerate(a):
            if k == 2:
                states.append(a.state_dict())
                break
    b = dsc.Loader(path, **opts)
    b.load_state_dict(dsc.merge_state_dicts(states))
    rest, last = 0, None
    for _ in b:
        rest += 1
        last = b.state_dict()
    assert 0 < rest < len(b) == 10  # 6 of 10 batches were consumed by the two ranks
    assert last["epoch_end_pending"]
    c = dsc.Loader(path, **opts)
    c.load_state_dict(last)
    assert [sum(1 for _ in c) for _ in range(2)] == [0, len(c)]


def test_merged_states_keep_the_epoch_end(small):
    """Every rank saved inside its loop after the epoch's last batch: the merged state is pending the
    epoch's end as each rank's is (merge_state_dicts dropped the flag, and the restored run trained
    the next epoch as the rest of this one: every later epoch one ahead)."""
    path, _ = small
    opts = dict(preset="cifar-train", order="quasi_random", seed=3, global_batch_size=100, threads=1)
    states = []
    for r in range(2):
        a = dsc.Loader(path, rank=r, world_size=2, **opts)
        for k, _ in enumerate(a):
            if k == len(a) - 1:
                states.append(a.state_dict())
    assert all(s["epoch_end_pending"] for s in states)
    merged = dsc.merge_state_dicts(states)
    assert merged["epoch_end_pending"]
    b = dsc.Loader(path, **opts)
    b.load_state_dict(merged)
    assert [sum(1 for _ in b) for _ in range(2)] == [0, len(b)]
    # Ranks saved at different points of their loops cannot be one state.
    with pytest.raises(ValueError, match="epoch_end_pending"):
        dsc.merge_state_dicts([states[0], dict(states[1], epoch_end_pending=False)])


def test_mistyped_states_are_refused_before_any_allocation(small):
    """bytes(300000000) is 300 MB of zeros: an int where the state's bytes belong took 3.4 s and 573 MiB
    before the state's own checks refused it. Other fields are type-checked too."""
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-train", global_batch_size=64, seed=5, threads=1)
    good = loader.state_dict()
    for bad, err in [(dict(good, dsc_loader_state=300_000_000), TypeError),
                     (dict(good, dsc_loader_state=[1, 2, 3]), TypeError),
                     (dict(good, version=99), ValueError),
                     (dict(good, epoch_end_pending="no"), TypeError)]:
        with pytest.raises(err):
            loader.load_state_dict(bad)
        with pytest.raises(err):
            dsc.merge_state_dicts([bad])
    loader.load_state_dict(dict(good, dsc_loader_state=bytearray(good["dsc_loader_state"])))


def test_rank_and_world_size_from_environment(small, monkeypatch):
    path, _ = small
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.warns(RuntimeWarning, match="from the environment"):  # without a process group it says so
        loader = dsc.Loader(path, preset="cifar-test", global_batch_size=100)
    assert (loader.rank, loader.world_size, loader.batch_size) == (1, 4, 25)
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    loader = dsc.Loader(path, preset="cifar-test", global_batch_size=100)
    assert (loader.rank, loader.world_size) == (0, 1)


def test_imagenet_test_preset_is_resize_then_center_crop_as_pil(small):
    """The 'imagenet-test' preset (it was C++-only): torchvision's Resize(256) + CenterCrop(224) on PIL
    images, within 1 of PIL with libjpeg's fancy upsampling (what PIL decodes with)."""
    path, rows = small
    loader = dsc.Loader(path, preset="imagenet-test", dtype="uint8", layout="NHWC", normalize=False,
                        fancy_upsampling=True, batch_size=4, threads=1)
    images, _ = next(iter(loader))
    assert tuple(images.shape) == (4, 224, 224, 3)
    for i in range(4):
        im = Image.open(rows[i][0]).convert("RGB").resize((256, 256), Image.BILINEAR)  # 32x32: the short side is 256
        want = np.asarray(im)[16:240, 16:240].astype(np.int16)
        assert np.abs(images[i].numpy().astype(np.int16) - want).max() <= 1, i
    normalised, _ = next(iter(dsc.Loader(path, preset="imagenet-test", batch_size=4, threads=1)))
    assert tuple(normalised.shape) == (4, 3, 224, 224) and normalised.dtype == torch.float32
    with pytest.raises(dsc.OptionError, match="resize"):
        dsc.Loader(path, preset="imagenet-test", resize=100)  # smaller than the 224 output


def test_option_errors_list_accepted_values(small):
    path, _ = small
    with pytest.raises(TypeError, match="unknown Loader option 'batchsize' \\(did you mean batch_size\\?\\); accepted: .*batch_size"):
        dsc.Loader(path, batchsize=3)
    with pytest.raises(ValueError, match="'random', 'quasi_random', 'sequential'"):
        dsc.Loader(path, order="shuffled")
    with pytest.raises(ValueError, match="cifar-train, cifar-test, imagenet-train, imagenet-test"):
        dsc.Loader(path, preset="cifar")
    with pytest.raises(TypeError, match="flip must be a bool"):
        dsc.Loader(path, flip=1)
    with pytest.raises(dsc.OptionError, match="translate = 40"):
        dsc.Loader(path, preset="cifar-train", translate=40)
    with pytest.raises(ValueError, match="uint8 output must be NHWC"):
        dsc.Loader(path, dtype="uint8", layout="NCHW")
    # A crop option the crop mode does not use was ignored (out_size without a crop kept 32x32).
    for preset, kw, why in ((None, dict(out_size=16), "out_size has no effect with crop='none'"),
                            ("imagenet-train", dict(crop="none", out_size=16), "out_size has no effect with crop='none'"),
                            ("imagenet-test", dict(scale=(0.5, 1)), "scale has no effect with crop='center'"),
                            ("imagenet-train", dict(resize=256), "resize has no effect with crop='random_resized'"),
                            ("imagenet-test", dict(center_ratio=0.5), "center_ratio has no effect with crop='center' and resize > 0")):
        with pytest.raises(dsc.OptionError, match=why):
            dsc.Loader(path, preset, **kw)
    # Spelling out a value the mode would have anyway is no mistake.
    assert len(dsc.Loader(path, "imagenet-test", scale=(0.08, 1.0), resize=256, out_size=224, batch_size=100)) == 10
    # Deferred augmentation leaves flip / translate / cutout to C++'s GPU augmenter: from Python the
    # batches came out un-augmented, silently.
    with pytest.raises(ValueError, match="option defer_augment True is for C\\+\\+"):
        dsc.Loader(path, preset="cifar-train", dtype="uint8", layout="NHWC", normalize=False, defer_augment=True)
    plain = dict(preset="cifar-train", dtype="uint8", layout="NHWC", normalize=False, batch_size=50, seed=3)
    a = next(iter(dsc.Loader(path, defer_augment=False, **plain)))[0]
    assert torch.equal(a, next(iter(dsc.Loader(path, **plain)))[0])
    # Every field has a name, and the stubs name every one.
    stub = open(os.path.join(os.path.dirname(dsc.__file__), "__init__.pyi")).read()
    for name in dsc.LOADER_OPTIONS:
        assert f"        {name}: " in stub, name


def test_damaged_sample_names_file_and_sample(small, tmp_path):
    path, _ = small
    info = dsc.info(path)
    data = next(s for s in info["sections"] if s["name"] == "data")
    bad = tmp_path / "bad.beton"
    raw = bytearray(open(path, "rb").read())
    mid = data["offset"] + data["size"] // 2
    raw[mid:mid + 64] = bytes(64)
    bad.write_bytes(bytes(raw))
    loader = dsc.Loader(bad, preset="cifar-test", batch_size=100, verify=True, threads=1)
    with pytest.raises(dsc.Error, match="bad.beton.*sample|sample.*bad.beton"):
        for _ in loader.epoch(0):
            pass


def test_pin_memory_without_cuda_warns_and_copies(small):
    path, _ = small
    if torch.cuda.is_available():
        pytest.skip("CUDA torch: pin_memory pins")
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        loader = dsc.Loader(path, preset="cifar-test", batch_size=100, pin_memory=True)
    assert any("pin_memory" in str(x.message) for x in w)
    x, _ = next(iter(loader))
    assert loader.leased() == 0 and x.shape == (100, 3, 32, 32)


def test_pin_memory_on_cuda_hands_out_pinned_copies(small):
    """With a GPU: pinned, owned batches equal to copy=True's, and a non-blocking copy to the GPU
    carries the same values (run on a GPU machine by scripts/gpu_run.sh)."""
    path, _ = small
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA torch and a GPU")
    pinned = dsc.Loader(path, preset="cifar-train", batch_size=100, seed=3, pin_memory=True, threads=2)
    plain = dsc.Loader(path, preset="cifar-train", batch_size=100, seed=3, copy=True, threads=2)
    n = 0
    for (x, y), (rx, ry) in zip(pinned.epoch(1), plain.epoch(1)):
        assert x.is_pinned() and y.is_pinned()
        assert pinned.leased() == 0  # owned: no loader buffer is held for it
        assert torch.equal(x, rx) and torch.equal(y, ry)
        g = x.cuda(non_blocking=True)
        torch.cuda.current_stream().synchronize()
        assert torch.equal(g.cpu(), rx)
        n += 1
    assert n == len(plain) == 10


def test_remote_workers_deliver_the_local_batches(small, dsc_binary):
    """A `dsc serve` worker on loopback decodes every batch (local_threads=0): the tensors equal a local
    loader's, and info() counts the worker's samples."""
    path, _ = small
    if not dsc._dsc.has_remote:  # a module without gRPC says so instead of ignoring the workers
        with pytest.raises(ValueError, match="remote needs dsc built with gRPC"):
            dsc.Loader(path, remote=["127.0.0.1:1"])
        return
    worker = subprocess.Popen([dsc_binary, "serve", str(path), "--threads", "1"], stdout=subprocess.PIPE, text=True)
    try:
        line = worker.stdout.readline()
        assert line.startswith("listening on "), line
        addr = line.split()[-1]
        opts = dict(preset="cifar-train", batch_size=64, seed=3)
        local = [(x.clone(), y.clone()) for x, y in dsc.Loader(path, threads=1, **opts).epoch(0)]
        for data_path in (True, False):  # the worker's data port, or gRPC only
            remote_loader = dsc.Loader(path, remote=[addr], local_threads=0, data_path=data_path, **opts)
            remote = [(x.clone(), y.clone()) for x, y in remote_loader.epoch(0)]
            assert len(remote) == len(local) == 16
            for (a, la), (b, lb) in zip(local, remote):
                assert torch.equal(a, b) and torch.equal(la, lb)
            info = remote_loader._core.info()
            assert info["remote"][0]["address"] == addr and info["remote"][0]["samples"] == 16 * 64
    finally:
        worker.kill()
        worker.wait()


def test_autotune_option(small):
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-train", batch_size=64, threads=2, autotune=True)
    n = sum(1 for _ in loader.epoch(0))
    assert n == 16
    assert 1 <= loader._core.info()["active_threads"] <= 2


def test_readahead_options_keep_batches_and_count_what_they_ask(small, tmp_path):
    """cache_budget / readahead_bytes change only how the file is read: quasi_random batches stay those of a
    loader without readahead, and the readahead's own counter says it asked for every block once."""
    _, rows = small
    with open(tmp_path / "m.txt", "w") as f:
        f.writelines(f"{p}\t{label}\n" for p, label in rows)
    path = tmp_path / "blocks.beton"
    dsc.build(tmp_path / "m.txt", path, format="manifest", threads=2, block_size=16 << 10)
    meta = dsc.info(path)
    assert meta["blocks"] >= 10  # several blocks, more than the budget below holds
    common = dict(batch_size=100, order="quasi_random", seed=3, threads=2, collect_stats=True)
    plain = dsc.Loader(path, "cifar-test", cache_budget=0, **common)
    ahead = dsc.Loader(path, "cifar-test", cache_budget=64 << 10, readahead_bytes=32 << 10, **common)
    assert ahead._core.info()["cache_budget"] == 64 << 10 and ahead._core.info()["readahead_bytes"] == 32 << 10
    n = 0
    for (a, la), (b, lb) in zip(plain.epoch(0, copy=True), ahead.epoch(0, copy=True)):
        assert torch.equal(a, b) and torch.equal(la, lb)
        n += 1
    assert n == 10
    s_plain, s_ahead = plain.stats(), ahead.stats()
    assert s_plain["samples"] == s_ahead["samples"] == len(rows)
    assert s_plain["advised_bytes"] == 0
    # A 2-block window: the workers may overtake it (they then fault the pages in), never a block twice.
    assert 0 < s_ahead["advised_bytes"] <= meta["payload_bytes"]
    assert s_ahead["largest_stage"] in ("read", "decode", "augment", "collate") and 0 < s_ahead["largest_share"] <= 1
    assert ahead.stats(reset=True)["samples"] == len(rows) and ahead.stats()["samples"] == 0
    # A budget that holds the file: every block is asked for once, and the next epoch finds them cached.
    whole = dsc.Loader(path, "cifar-test", cache_budget=1 << 20, readahead_bytes=0, **common)
    assert sum(1 for _ in whole.epoch(0, copy=True)) == 10
    deadline = time.monotonic() + 5  # the readahead thread runs beside the workers
    while whole.stats()["advised_bytes"] < meta["payload_bytes"] and time.monotonic() < deadline:
        time.sleep(0.01)
    assert whole.stats()["advised_bytes"] == meta["payload_bytes"]
    assert sum(1 for _ in whole.epoch(1, copy=True)) == 10
    assert whole.stats()["advised_bytes"] == meta["payload_bytes"]
    with pytest.raises(ValueError, match="cache_budget"):
        dsc.Loader(path, "cifar-test", cache_budget=-1)
    with pytest.raises(TypeError, match="readahead_bytes"):
        dsc.Loader(path, "cifar-test", readahead_bytes="64M")


def test_stats_are_zero_unless_collected(small):
    path, _ = small
    loader = dsc.Loader(path, "cifar-test", batch_size=250, threads=1)
    assert sum(1 for _ in loader.epoch(0)) == 4
    s = loader.stats()
    assert s["samples"] == 0 and s["decode_s"] == 0 and s["largest_stage"] is None


def test_dct_scaling_off_decodes_at_full_size(small):
    """A crop decoded at full size differs from one decoded at a reduced DCT scale: the option reaches the loader.
    (CIFAR's 32x32 images with a 16x16 output crop let the scaled decode pick 1/2.)"""
    path, _ = small
    common = dict(batch_size=50, order="sequential", threads=1, crop="center", center_ratio=1.0, out_size=16)
    scaled = next(iter(dsc.Loader(path, "cifar-test", **common)))[0]
    full = next(iter(dsc.Loader(path, "cifar-test", dct_scaling=False, **common)))[0]
    assert scaled.shape == full.shape == (50, 3, 16, 16)
    assert not torch.equal(scaled, full)
    # Both are the same picture: a mean absolute difference far below the normalised range.
    assert (scaled - full).abs().mean() < 0.2


def test_refused_calls_leave_the_running_epoch_alone(small):
    """A refused load_state_dict or start (another run's state, garbage, a batch past the end) used to
    end the epoch in progress first: its iterator then stopped early without an error."""
    path, _ = small
    opts = dict(preset="cifar-train", batch_size=100, seed=3, threads=1)
    want = [x.clone() for x, _ in dsc.Loader(path, **opts).epoch(0)]
    loader = dsc.Loader(path, **opts)
    other = dsc.Loader(path, preset="cifar-train", batch_size=100, seed=4, threads=1)
    it = loader.epoch(0)
    got = [next(it)[0].clone() for _ in range(3)]
    with pytest.raises(dsc.Error, match="seed"):
        loader.load_state_dict(other.state_dict())
    with pytest.raises(dsc.Error):
        loader.load_state_dict({"dsc_loader_state": b"not a state", "version": 1})
    with pytest.raises(dsc.Error, match="past the end"):
        loader.epoch(1, first_batch=999)
    got += [x.clone() for x, _ in it]
    assert len(got) == len(want) == 10
    assert all(torch.equal(g, w) for g, w in zip(got, want))


def test_after_the_last_epoch_iteration_says_so(small):
    """After epoch 2**64-1 the DataLoader-style loop asked the binding for epoch 2**64: a bare TypeError."""
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=500, threads=1)
    assert sum(1 for _ in loader.epoch(2**64 - 1)) == 2
    with pytest.raises(dsc.Error, match="no next epoch"):
        iter(loader)


def test_a_loader_is_not_copied_or_pickled(small):
    """copy.copy shared the C++ loader (iterating the copy ended the original's epoch after 1 of 8
    batches, closing it closed both); deepcopy and pickle named the internal class."""
    import copy
    import pickle
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=100, threads=1)
    for f in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="cannot be copied or pickled"):
            f(loader)
    assert sum(1 for _ in loader) == 10  # untouched


def test_paths_and_numbers_reach_the_library_as_given(small, tmp_path):
    """A NUL in a path was cut off in C++ (another file opened or written); a bytes path made Tracer
    write a file named "b'...'"; a name that is not UTF-8 could not be passed as str and its errors
    read dsc.Error(''); epoch(1.7) ran epoch 1 and out_size=(15.9, 15.9) made 15x15 images; numpy
    integers were refused and 2**1100 got pybind11's anonymous cast error."""
    path, _ = small
    with pytest.raises(ValueError, match="embedded null byte"):
        dsc.Loader(str(path) + "\0x")
    with pytest.raises(ValueError, match="embedded null byte"):
        dsc.build(path, str(tmp_path / "o.beton") + "\0.ignored")
    assert not (tmp_path / "o.beton").exists()
    t = dsc.Tracer()
    with t.phase("x"):
        pass
    with pytest.raises(ValueError, match="embedded null byte"):
        t.write(str(tmp_path / "t.json") + "\0z")
    t.write(bytes(tmp_path / "t.json"))
    assert json.load(open(tmp_path / "t.json"))["traceEvents"]
    # A name that is not UTF-8, as os.listdir gives it (surrogate escapes).
    odd = os.fsdecode(bytes(tmp_path) + b"/\xff.beton")
    os.link(path, odd)
    assert len(dsc.Loader(odd, batch_size=100)) == 10
    with pytest.raises(dsc.Error, match="missing"):
        dsc.Loader(bytes(tmp_path) + b"/\xf0missing.beton")
    loader = dsc.Loader(path, batch_size=100)
    for bad in (1.7, "3", None):
        with pytest.raises(TypeError, match="epoch must be an int"):
            loader.epoch(bad)
    with pytest.raises(TypeError, match="first_batch must be an int"):
        loader.epoch(0, first_batch=2.5)
    for bad in ({"epoch": -1}, {"epoch": 2 ** 64}, {"epoch": 0, "first_batch": 2 ** 64}):
        with pytest.raises(ValueError, match=r"must be in \[0, 2\*\*64\)"):
            loader.epoch(**bad)
    with pytest.raises(TypeError, match="reset must be a bool, got str"):
        loader.stats(reset="x")
    with pytest.raises(ValueError, match=r"max_events_per_row = -1 is out of range"):
        dsc.Tracer(-1)
    with pytest.raises(TypeError, match="max_events_per_row must be an int, got float"):
        dsc.Tracer(1.5)
    first = next(iter(loader.epoch(np.int64(1))))
    again = next(iter(loader.epoch(1)))
    assert torch.equal(first[0], again[0])
    with pytest.raises(TypeError, match=r"out_size\[0\] must be a whole number of pixels"):
        dsc.Loader(path, batch_size=4, crop="center", out_size=(15.9, 15.9))
    for size in ((np.int64(15), 16), np.array([15, 16]), np.array([15.0, 16.0]), (15.0, 16)):
        images, _ = next(iter(dsc.Loader(path, batch_size=np.int32(4), crop="center", out_size=size)))
        assert tuple(images.shape) == (4, 3, 15, 16), size
    for flag in (np.True_, True):  # a bool is not a number, numpy's neither
        with pytest.raises(TypeError, match="must be"):
            dsc.Loader(path, crop="center", out_size=flag)
        with pytest.raises(TypeError, match="must be"):
            dsc.Loader(path, seed=flag)
        with pytest.raises(TypeError, match="must be a number"):
            dsc.Loader(path, normalize=True, mean=(flag, 0, 0))
    with pytest.raises(ValueError, match=r"option mean\[0\] = .* is out of a float's range"):
        dsc.Loader(path, normalize=True, mean=(2 ** 1100, 0, 0))
    with pytest.raises(ValueError, match="out of a float's range"):
        dsc.Loader(path, normalize=True, mean=(1e300, 0, 0))
    a = dsc.Loader(path, normalize=True, mean=(np.float32(120), 110, 100), batch_size=8)
    b = dsc.Loader(path, normalize=True, mean=(120.0, 110, 100), batch_size=8)
    assert torch.equal(next(iter(a))[0], next(iter(b))[0])
    with pytest.raises(TypeError, match="must be a number"):
        dsc.Loader(path, normalize=True, mean=("1", 0, 0))
    assert dsc.random_subset(2 ** 32, 3, 1) == dsc.random_subset(2 ** 32, 3, 1)
