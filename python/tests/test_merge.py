"""dsc.build(shard=...) + dsc.merge from Python: the joined file equals a one-machine build, byte for byte."""
import pytest

import dsc

from conftest import write_manifest


def test_parts_merge_to_the_whole_build(testdata, tmp_path):
    write_manifest(testdata, "train", 30, tmp_path / "m.txt")
    whole = tmp_path / "whole.beton"
    dsc.build(tmp_path / "m.txt", whole, format="manifest", block_size=1 << 14)
    parts = []
    for i in range(3):
        parts.append(tmp_path / f"part-{i}.beton")
        r = dsc.build(tmp_path / "m.txt", parts[-1], format="manifest", block_size=1 << 14, shard=(i, 3))
        assert r["samples"] == 100
    rep = dsc.merge(list(reversed(parts)), tmp_path / "merged.beton")
    assert rep["parts"] == 3 and rep["samples"] == 300
    assert (tmp_path / "merged.beton").read_bytes() == whole.read_bytes()


def test_bad_shards_are_refused(testdata, tmp_path):
    write_manifest(testdata, "train", 2, tmp_path / "m.txt")
    with pytest.raises(TypeError, match="shard must be a tuple"):
        dsc.build(tmp_path / "m.txt", tmp_path / "x.beton", shard=3)
    with pytest.raises(ValueError, match="shard index = 3 is out of range"):
        dsc.build(tmp_path / "m.txt", tmp_path / "x.beton", shard=(3, 3))
    dsc.build(tmp_path / "m.txt", tmp_path / "p0.beton", shard=(0, 2))
    with pytest.raises(dsc.Error, match="missing part 1"):
        dsc.merge([tmp_path / "p0.beton"], tmp_path / "out.beton")
    assert not (tmp_path / "out.beton").exists()
