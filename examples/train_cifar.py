#!/usr/bin/python3
"""FFCV's CIFAR-10 recipe (examples/cifar/train_cifar.py) on `import dsc`.

ResNet-9, SGD (lr 0.5, momentum 0.9, weight decay 5e-4, nesterov off), label smoothing 0.1, batch 512,
24 epochs, a triangular learning rate peaking at 5/24 of the steps, flip + translate(2) + cutout(4),
test-time flip, channels_last; bf16 (or fp16 with loss scaling) autocast on CUDA. The same network,
schedule and batches as `dsc train` (tools/train/train_main.cc), whose per-epoch line it prints.

    PYTHONPATH=build/python /usr/bin/python3 examples/train_cifar.py cifar10-train.beton \\
        --test cifar10-test.beton --epochs 1 --limit 5000

With --init-weights (from `dsc train --save-init`) and the same --seed, --limit and --batch-size it
trains on exactly the batches `dsc train` does; --steps-out writes the same per-step digest lines as
`dsc train --steps-out`, to check that. --trace FILE writes the steps of --trace-steps (default: the
first 50) as a Chrome/Perfetto trace with dsc.trace: the step's phases on the "trainer" row, the
loader's read / decode / augment / collate on its worker rows.
"""
import argparse
import contextlib
import json
import sys
import time

import numpy as np
import torch
from torch import nn

import dsc


class ConvBn(nn.Module):
    """conv (no bias) -> batch norm -> ReLU; module names as tools/train/resnet9.h, so weights transfer."""

    def __init__(self, cin, cout, kernel=3, stride=1, padding=1):
        super().__init__()
        self.conv = nn.Conv2d(cin, cout, kernel, stride=stride, padding=padding, bias=False)
        self.bn = nn.BatchNorm2d(cout)

    def forward(self, x):
        return torch.relu(self.bn(self.conv(x)))


class Residual(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.a = ConvBn(c, c)
        self.b = ConvBn(c, c)

    def forward(self, x):
        return x + self.b(self.a(x))


class ResNet9(nn.Module):
    """FFCV's construct_model: the logits are scaled by 0.2 (its Mul(0.2))."""

    def __init__(self, classes=10):
        super().__init__()
        self.c1 = ConvBn(3, 64, 3, 1, 1)
        self.c2 = ConvBn(64, 128, 5, 2, 2)
        self.r1 = Residual(128)
        self.c3 = ConvBn(128, 256, 3, 1, 1)
        self.r2 = Residual(256)
        self.c4 = ConvBn(256, 128, 3, 1, 0)
        self.fc = nn.Linear(128, classes, bias=False)

    def forward(self, x):
        x = self.r1(self.c2(self.c1(x)))
        x = torch.max_pool2d(self.c3(x), 2)
        x = self.c4(self.r2(x))
        x = torch.amax(x, dim=(2, 3))  # AdaptiveMaxPool2d((1, 1)) + Flatten
        return self.fc(x) * 0.2


def load_weights(model, path):
    """Weights written by `dsc train --save-init` (tools/train/repro.h): 'NAME ELEMENT_SIZE COUNT' + raw bytes."""
    state = model.state_dict()
    seen = set()
    with open(path, "rb") as f:
        while True:
            line = f.readline()
            if not line:
                break
            name, size, count = line.decode().split()
            t = state[name]
            if t.numel() != int(count):
                raise ValueError(f"{path}: {name} has {count} values, the model {t.numel()}")
            # libtorch C++ keeps num_batches_tracked as int32, Python as int64: read the file's width.
            kind = "f" if t.is_floating_point() else "i"
            raw = f.read(int(size) * int(count))
            src = torch.from_numpy(np.frombuffer(raw, dtype=f"<{kind}{size}").copy()).view(t.shape).to(t.dtype)
            with torch.no_grad():
                t.copy_(src)
            seen.add(name)
    missing = set(state) - seen
    if missing:
        raise ValueError(f"{path}: no weights for {sorted(missing)}")


def learning_rate(args, step, total):
    t = step / max(1, total)
    shape = t / args.peak if t < args.peak else max(0.0, (1 - t) / (1 - args.peak))
    return args.lr * shape


def nchw(images, device):
    """NHWC batch -> an NCHW view in channels_last memory (no copy on the CPU)."""
    return images.to(device, non_blocking=True).permute(0, 3, 1, 2)


def evaluate(model, loader, device, autocast):
    model.eval()
    correct = seen = 0
    with torch.no_grad(), autocast():
        for images, labels in loader.epoch(0):
            x = nchw(images, device)
            logits = model(x) + model(x.flip(3))  # test-time flip
            correct += int((logits.argmax(1).cpu() == labels.long()).sum())
            seen += images.shape[0]
    model.train()
    return correct / max(1, seen)


def step_window(text):
    """--trace-steps FIRST:END, 0 <= FIRST < END (a usage error otherwise, as in dsc train)."""
    try:
        first, end = (int(x) for x in text.split(":"))
    except ValueError:
        raise argparse.ArgumentTypeError("expected FIRST:END, not %r" % text) from None
    if not 0 <= first < end:
        raise argparse.ArgumentTypeError("expected 0 <= FIRST < END, not %r" % text)
    return first, end


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("train", help="the train split's dsc file")
    p.add_argument("--test", required=True, help="the test split's dsc file")
    p.add_argument("--epochs", type=int, default=24)
    p.add_argument("--batch-size", type=int, default=512)
    p.add_argument("--lr", type=float, default=0.5)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=5e-4)
    p.add_argument("--label-smoothing", type=float, default=0.1)
    p.add_argument("--peak", type=float, default=5 / 24, help="where the triangular schedule peaks (fraction of steps)")
    p.add_argument("--limit", type=int, default=0, help="train on the seeded random subset of N samples dsc train uses")
    p.add_argument("--test-limit", type=int, default=0)
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--loader-threads", type=int, default=1)
    p.add_argument("--torch-threads", type=int, default=0)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--init-weights", default="", help="weights from `dsc train --save-init`")
    p.add_argument("--steps-out", default="", help="per-step batch digests and losses, as `dsc train --steps-out`")
    p.add_argument("--json", default="")
    p.add_argument("--trace", default="", help="write a Chrome/Perfetto trace of --trace-steps to this file")
    p.add_argument("--trace-steps", default="0:50", type=step_window, help="FIRST:END global steps traced (END excluded)")
    args = p.parse_args(argv)

    device = torch.device(args.device)
    cuda = device.type == "cuda"
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    train_size = dsc.info(args.train)["samples"]
    test_size = dsc.info(args.test)["samples"]
    # NHWC batches, viewed as channels_last NCHW; on CUDA copied from pinned memory.
    subset = dsc.random_subset(train_size, args.limit, args.seed)
    # Without --trace the phases below record into a disabled tracer (well under a microsecond each).
    tracer = dsc.trace.default()
    first, end = args.trace_steps
    tracer.enabled = bool(args.trace) and first <= 0 < end
    train = dsc.Loader(args.train, preset="cifar-train", batch_size=args.batch_size, seed=args.seed,
                       threads=args.loader_threads, layout="NHWC", subset=subset, pin_memory=cuda,
                       tracer=tracer if args.trace else None, pad_last=True)  # dsc train's batches: padded, masked by `keep`
    phase = dsc.trace.phase
    test = dsc.Loader(args.test, preset="cifar-test", batch_size=500, threads=args.loader_threads, layout="NHWC",
                      subset=sorted(dsc.random_subset(test_size, args.test_limit, args.seed + 1)), pin_memory=cuda)

    model = ResNet9(10)
    if args.init_weights:
        load_weights(model, args.init_weights)
    model = model.to(device=device, memory_format=torch.channels_last)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum, weight_decay=args.weight_decay)
    criterion = nn.CrossEntropyLoss(label_smoothing=args.label_smoothing, reduction="none")
    amp_dtype = torch.bfloat16 if cuda and torch.cuda.is_bf16_supported() else torch.float16
    scaler = torch.cuda.amp.GradScaler(enabled=cuda and amp_dtype == torch.float16)

    def autocast():
        return torch.autocast(device_type="cuda", dtype=amp_dtype) if cuda else contextlib.nullcontext()

    steps_out = open(args.steps_out, "w") if args.steps_out else None
    total = len(train) * args.epochs
    step = 0
    logs = []
    print(f"training ResNet-9 on {args.train} ({len(subset) or train_size} samples/epoch), {args.epochs} epochs, batch {args.batch_size}, "
          f"{train.threads} loader + {torch.get_num_threads()} torch threads")
    stopped = False
    for epoch in range(args.epochs):
        if stopped:
            break
        loss_sum, images_seen, batches, wait = 0.0, 0, 0, 0.0
        t0 = time.perf_counter()
        tw = t0
        for images, labels, _, padding in train.epoch(epoch, with_indices=True):
            wait += time.perf_counter() - tw
            if args.trace:
                tracer.enabled = first <= step < end
            for g in opt.param_groups:
                g["lr"] = learning_rate(args, step, total)
            with phase("copy to device"):
                x = nchw(images, device)
                y = labels.to(device, non_blocking=True).long()
                keep = (~padding).to(device, torch.float32)
            with phase("forward"):
                with autocast():
                    logits = model(x).float()
                loss = (criterion(logits, y) * keep).sum() / keep.sum()
            with phase("backward"):
                opt.zero_grad(set_to_none=True)
                scaler.scale(loss).backward()
            with phase("optimizer step"):
                scaler.step(opt)
                scaler.update()
            value = loss.item()
            if steps_out:
                steps_out.write(f"{epoch} {batches} {dsc.checksum(images.numpy()):016x} "
                                f"{dsc.checksum(labels.int().numpy()):016x} {value:.9g}\n")  # int32, as dsc train's
            step += 1
            batches += 1
            images_seen += images.shape[0] - int(padding.sum())
            loss_sum += value
            if args.max_steps and step >= args.max_steps:
                stopped = True
                break
            tw = time.perf_counter()
        seconds = time.perf_counter() - t0
        log = {"images_per_second": images_seen / seconds, "data_wait_share": wait / seconds,
               "train_loss": loss_sum / max(1, batches), "test_accuracy": -1, "seconds": seconds}
        if not stopped or not args.max_steps:
            with phase("evaluation"):
                log["test_accuracy"] = evaluate(model, test, device, autocast)
        line = (f"epoch {epoch}: {log['images_per_second']:.1f} images/s, data wait {100 * log['data_wait_share']:.2f}%, "
                f"train loss {log['train_loss']:.4f}")
        if log["test_accuracy"] >= 0:
            line += f", test accuracy {100 * log['test_accuracy']:.2f}%"
        print(line + f" ({seconds:.1f} s)", flush=True)
        logs.append(log)
    if steps_out:
        steps_out.close()
    if args.trace:
        tracer.write(args.trace)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"steps": step, "epochs": logs}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
