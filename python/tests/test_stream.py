"""Streaming through import dsc, from a real nginx on loopback (docs/streaming.md): dsc.Loader on a URL
gives the local file's batches, for dsc's files and FFCV's, through the cache_dir given; dsc.convert of
an FFCV file's URL writes the local copy's dsc file, byte for byte. Skipped, saying why, without nginx."""
import os
import pathlib
import shutil
import socket
import subprocess
import time

import numpy as np
import pytest

import dsc

SOURCE_DIR = pathlib.Path(__file__).resolve().parents[2]
NGINX = next((p for p in ("/usr/sbin/nginx", "/usr/bin/nginx") if os.access(p, os.X_OK)), None)
pytestmark = pytest.mark.skipif(NGINX is None, reason="nginx is not installed (apt-get install nginx-light)")


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tmp_path_factory, testdata, dsc_binary):
    """A folder with a dsc file of CIFAR-10 and FFCV's own files, served by nginx; yields (folder, base URL)."""
    root = tmp_path_factory.mktemp("served")
    shared = pathlib.Path(os.environ.get("DSC_SHARED_DATA") or SOURCE_DIR.parent / "shared" / "data")
    subprocess.run(f"zstd -dc {shared / 'ffcv-samples.tar.zst'} | tar -x -C {root}", shell=True, check=True)
    for f in ("cifar-test-smart.beton", "allfields.beton"):
        shutil.move(str(root / "ffcv-samples" / f), str(root / f))
    dsc.build(str(testdata / "test"), str(root / "cifar.beton"), block_size=1 << 16, progress=False)
    conf_dir = tmp_path_factory.mktemp("nginx")
    for attempt in range(5):  # the free port may be taken before nginx binds it
        port = _free_port()
        (conf_dir / "nginx.conf").write_text(
            "daemon off;\nworker_processes 1;\n" + ("user root;\n" if os.getuid() == 0 else "") +
            f"pid {conf_dir}/nginx.pid;\nerror_log {conf_dir}/error.log warn;\nevents {{ worker_connections 64; }}\n"
            "http {\n" + "".join(f"  {t}_temp_path {conf_dir}/{t};\n" for t in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")) +
            f"  access_log off;\n  server {{ listen 127.0.0.1:{port}; root {root}; }}\n}}\n")
        proc = subprocess.Popen([NGINX, "-e", f"{conf_dir}/error.log", "-p", str(conf_dir), "-c", str(conf_dir / "nginx.conf")])
        for _ in range(500):
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if proc.poll() is not None:
                    break
                time.sleep(0.01)
        if proc.poll() is None:
            break
    else:
        pytest.fail("nginx did not start: " + (conf_dir / "error.log").read_text())
    yield root, f"http://127.0.0.1:{port}"
    proc.terminate()
    proc.wait()


def _epoch(path, **options):
    loader = dsc.Loader(path, preset="cifar-train", batch_size=100, seed=3, order="quasi_random", copy=True, **options)
    xs, ys = [], []
    for x, y in loader.epoch(1):
        xs.append(np.asarray(x))
        ys.append(np.asarray(y))
    return np.concatenate(xs), np.concatenate(ys)


@pytest.mark.parametrize("name", ["cifar.beton", "cifar-test-smart.beton"])
def test_loader_on_a_url_gives_the_local_batches(served, tmp_path, name):
    root, base = served
    cache = tmp_path / "cache"
    x, y = _epoch(f"{base}/{name}", cache_dir=str(cache), cache_budget=32 << 20)
    lx, ly = _epoch(str(root / name))
    assert x.shape[0] > 0
    np.testing.assert_array_equal(x, lx)
    np.testing.assert_array_equal(y, ly)
    assert any(p.name.startswith("block-") for p in cache.rglob("*")), "no block landed in the cache_dir given"


def test_convert_of_an_ffcv_url_equals_the_local_copys(served, tmp_path):
    root, base = served
    dsc.convert(f"{base}/allfields.beton", str(tmp_path / "url.beton"), cache_dir=str(tmp_path / "cache"), progress=False)
    dsc.convert(str(root / "allfields.beton"), str(tmp_path / "file.beton"), progress=False)
    assert (tmp_path / "url.beton").read_bytes() == (tmp_path / "file.beton").read_bytes()


def test_a_missing_url_names_it(served, tmp_path):
    _, base = served
    with pytest.raises(dsc.Error, match="nothing.beton"):
        dsc.Loader(f"{base}/nothing.beton", cache_dir=str(tmp_path / "cache"))
