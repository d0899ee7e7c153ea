#!/usr/bin/python3
"""dsc.Writer from Python against `dsc build` on the same images, side by side in one run (issue 56's
goal: the Python writer at >= 0.8x dsc build's rate). Per data set, each round times, in turn:

  build-folder  `dsc build FOLDER out --split S` (the whole process: listing, reading, encoding)
  build-jsonl   `dsc build manifest.jsonl out` (the same files in a JSON Lines manifest, image + label)
  py-bytes      the user's loop reads each file: w.add({"image": open(p, "rb").read(), "label": c})
  py-path       the file is handed over as a path: w.add({"image": pathlib.Path(p), "label": c})
  py-memory     the bytes are already in memory (read before the clock starts)

    /usr/bin/python3 bench/python_writer_bench.py --build build \\
        --photos DIR/imagenet-photos-500 --cifar DIR/cifar10 --rounds 5 [--before OTHER_BUILD]

With --before, every form is also run from another build folder (named "before:FORM"), alternating,
for a before/after comparison in one run. Each Python form runs in a process of its own (that build's
python/ on PYTHONPATH) and is timed inside it, from the Writer's creation to close() returning (no
interpreter start); dsc build as its whole process. --forms picks some.

Figures are images per wall second (median over rounds, with min-max), each Python form's ratio to
the faster dsc build, and CPU time per image (user + system, all threads; the figure that holds when
other work shares the cores, as wall rates then follow each process's share of them). The ratios
are to the faster dsc build of the build measured (not the --before one).
"""
import argparse
import json
import os
import pathlib
import resource
import statistics
import subprocess
import sys
import tempfile
import time

IMAGE_EXT = (".jpg", ".jpeg", ".png", ".JPEG", ".JPG")


def tree_items(root):
    """(path, class index) of a class-per-folder tree, in the order dsc build lists it."""
    classes = sorted(d.name for d in pathlib.Path(root).iterdir() if d.is_dir())
    out = []
    for c, name in enumerate(classes):
        for f in sorted((pathlib.Path(root) / name).iterdir()):
            if f.suffix in IMAGE_EXT:
                out.append((str(f), c))
    return out


def cpu(who):
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def run_build(dsc_bin, args, out):
    c0, t0 = cpu(resource.RUSAGE_CHILDREN), time.perf_counter()
    subprocess.run([dsc_bin, "build", *args, str(out), "--quiet"], check=True, capture_output=True)
    return time.perf_counter() - t0, cpu(resource.RUSAGE_CHILDREN) - c0


def run_python(build, items_file, out, form, threads):
    env = dict(os.environ, PYTHONPATH=str(pathlib.Path(build) / "python"))
    r = subprocess.run([sys.executable, __file__, "--worker", form, "--items", str(items_file), "--out", str(out),
                        "--threads", str(threads)], check=True, capture_output=True, text=True, env=env)
    j = json.loads(r.stdout.strip().splitlines()[-1])
    return j["wall"], j["cpu"]


def worker(form, items_file, out, threads):
    """The Python user's loop, in this process; prints its wall and CPU seconds as JSON."""
    import dsc
    items = [tuple(x) for x in json.load(open(items_file))]
    blobs = [open(p, "rb").read() for p, _ in items] if form == "py-memory" else None
    schema = {"image": "image", "label": "label"}
    c0, t0 = cpu(resource.RUSAGE_SELF), time.perf_counter()
    with dsc.Writer(out, schema, threads=threads) as w:
        if form == "py-bytes":
            for p, c in items:
                w.add({"image": open(p, "rb").read(), "label": c})
        elif form == "py-path":
            for p, c in items:
                w.add({"image": pathlib.Path(p), "label": c})
        else:
            for b, (_, c) in zip(blobs, items):
                w.add({"image": b, "label": c})
    print(json.dumps({"wall": time.perf_counter() - t0, "cpu": cpu(resource.RUSAGE_SELF) - c0}))


def bench_set(name, builds, folder, split, forms, rounds, threads, work):
    root = pathlib.Path(folder) / split if (pathlib.Path(folder) / split).is_dir() else pathlib.Path(folder)
    items = tree_items(root)
    manifest = work / f"{name}.jsonl"
    with open(manifest, "w") as f:
        for p, c in items:
            f.write(json.dumps({"image": p, "label": c}) + "\n")
    items_file = work / f"{name}.items.json"
    items_file.write_text(json.dumps(items))
    out = work / f"{name}.dsc"
    times = {f: [] for f in forms}
    cpus = {f: [] for f in forms}
    for r in range(rounds + 1):  # round 0 warms the page cache and the code; not counted
        for full in forms:
            side, _, form = full.rpartition(":")
            build = builds[side or "after"]
            dsc_bin = str(pathlib.Path(build) / "dsc")
            if form == "build-folder":
                split_args = ["--split", split] if root != pathlib.Path(folder) else []
                t, c = run_build(dsc_bin, [str(folder), *split_args, "--threads", str(threads)], out)
            elif form == "build-jsonl":
                t, c = run_build(dsc_bin, [str(manifest), "--threads", str(threads)], out)
            else:
                t, c = run_python(build, items_file, out, form, threads)
            if r:
                times[full].append(t)
                cpus[full].append(c)
    n = len(items)
    rates = {f: [n / t for t in ts] for f, ts in times.items()}
    med = {f: statistics.median(v) for f, v in rates.items()}
    ref = max([med[f] for f in ("build-folder", "build-jsonl") if f in med], default=None)
    print(f"\n{name}: {n} images, {rounds} rounds, threads={threads or 'all'}")
    for f in forms:
        v = rates[f]
        us = statistics.median(cpus[f]) / n * 1e6
        line = f"  {f:20s} {med[f]:9.0f} images/s  ({min(v):.0f}-{max(v):.0f})  CPU {us:6.1f} us/image"
        if ref and "py-" in f:
            line += f"  {med[f] / ref:.2f}x the faster dsc build ({min(v) / ref:.2f}-{max(v) / ref:.2f})"
        print(line, flush=True)
    return med


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build", help="the build folder holding the dsc program")
    ap.add_argument("--photos", help="the unpacked imagenet-photos-500 folder")
    ap.add_argument("--cifar", help="the unpacked CIFAR-10 JPEG tree (with train/ and test/)")
    ap.add_argument("--cifar-split", default="test", help="test: 10,000 images; train: 50,000")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=0)
    ap.add_argument("--forms", default="build-folder,build-jsonl,py-bytes,py-path,py-memory")
    ap.add_argument("--before", help="another build folder, run alternately as before:FORM")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    ap.add_argument("--items", help=argparse.SUPPRESS)
    ap.add_argument("--out", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        return worker(a.worker, a.items, a.out, a.threads)
    builds = {"after": a.build, "before": a.before}
    forms = a.forms.split(",")
    if a.before:  # the build before cannot take paths
        forms = [f for g in forms for f in (["before:" + g] if g != "py-path" else []) + [g]]
    with tempfile.TemporaryDirectory(prefix="dsc-writer-bench-") as tmp:
        work = pathlib.Path(tmp)
        if a.photos:
            bench_set("photos", builds, a.photos, "train", forms, a.rounds, a.threads, work)
        if a.cifar:
            bench_set("cifar", builds, a.cifar, a.cifar_split, forms, a.rounds, a.threads, work)


if __name__ == "__main__":
    sys.exit(main())
