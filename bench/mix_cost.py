#!/usr/bin/python3
"""MixUp / CutMix cost against the loader's own time for a 512-image CIFAR batch, one thread, in one
run: the loader's wall time per batch (preset cifar-train, threads=1, float32 NCHW) and
dsc.T.MixUpCutMix's time per batch on those batches (mixup only, cutmix only), medians.

    PYTHONPATH=build/python /usr/bin/python3 bench/mix_cost.py cifar.beton"""
import statistics
import sys
import time

import dsc

path = sys.argv[1]
loader = dsc.Loader(path, preset="cifar-train", batch_size=512, threads=1, seed=0)
per_batch, batches = [], []
for epoch in range(3):
    t = time.perf_counter()
    got = [(i.clone(), l.clone()) for i, l in loader.epoch(epoch)]
    per_batch.append((time.perf_counter() - t) / len(got))
    batches = got
load = statistics.median(per_batch[1:])
for name, kw in [("mixup", dict(cutmix_alpha=0.0)), ("cutmix", dict(mixup_alpha=0.0)), ("both", {})]:
    mix = dsc.T.MixUpCutMix(10, label_smoothing=0.1, **kw)
    times = []
    for r in range(5):
        for k, (i, l) in enumerate(batches):
            if i.shape[0] != 512:
                continue
            t = time.perf_counter()
            mix(i, l, epoch=r, batch=k)
            times.append(time.perf_counter() - t)
    m = statistics.median(times)
    print(f"{name}: {m * 1e6:.0f} us per 512 batch = {100 * m / load:.1f}% of the loader's {load * 1e6:.0f} us per batch (1 thread)")
