"""dsc.trace: a Python loop's phases and a real CIFAR-10 loader's work in one Chrome trace file, read back
with the json module."""
import gc
import json
import threading
from collections import defaultdict

import numpy as np
import pytest

import dsc


def read_trace(path):
    """{(process, row): [span events in file order]} and {(process, counter): [values]}."""
    events = json.load(open(path))["traceEvents"]
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    rows, counters = defaultdict(list), defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            rows[(procs[e["pid"]], names[(e["pid"], e["tid"])])].append(e)
        elif e["ph"] == "C":
            counters[(procs[e["pid"]], e["name"])].append(e["args"]["value"])
    return rows, counters


def end(e):
    return e["ts"] + e["dur"]


def within(inner, outer):
    # ts and dur are printed in µs with 3 decimals: allow the rounding of both.
    return outer["ts"] - 0.002 <= inner["ts"] and end(inner) <= end(outer) + 0.002


def test_loop_phases_and_loader_rows_in_one_file(small, tmp_path):
    path, rows = small
    tracer = dsc.Tracer()
    loader = dsc.Loader(path, preset="cifar-train", batch_size=100, seed=1, threads=2, tracer=tracer)
    steps = 0
    for step, (images, labels) in enumerate(loader.epoch(0)):
        with tracer.phase("step", step):
            with tracer.phase("forward"):
                x = images.numpy().mean(axis=(1, 2, 3))
            with tracer.phase("backward"):
                np.sort(x)
            tracer.counter("images seen", (step + 1) * images.shape[0])
        steps += 1
    assert steps == 10
    tracer.write(tmp_path / "trace.json")  # a PathLike
    got, counters = read_trace(tmp_path / "trace.json")

    trainer = got[("python", "trainer")]
    by_name = defaultdict(list)
    for e in trainer:
        by_name[e["name"]].append(e)
    assert sorted(by_name) == ["backward", "forward", "step"]
    step_spans = by_name["step"]
    assert [e["args"]["n"] for e in step_spans] == list(range(10))
    assert all("args" not in e for e in by_name["forward"] + by_name["backward"])
    for a, b in zip(step_spans, step_spans[1:]):  # one after the other
        assert end(a) <= b["ts"] + 0.002
    for k, s in enumerate(step_spans):  # each step holds its forward, then its backward
        fwd, bwd = by_name["forward"][k], by_name["backward"][k]
        assert within(fwd, s) and within(bwd, s) and end(fwd) <= bwd["ts"] + 0.002
    assert counters[("python", "images seen")] == [100.0 * (k + 1) for k in range(10)]

    # The loader's rows: every sample read, decoded, augmented and collated once, over both workers.
    workers = {row: ev for (proc, row), ev in got.items() if proc == "loader" and row.startswith("loader worker")}
    assert sorted(workers) == ["loader worker 0", "loader worker 1"]
    count = defaultdict(int)
    for ev in workers.values():
        for e in ev:
            count[e["name"]] += 1
    assert {n: count[n] for n in ("read", "decode", "augment", "collate")} == {n: len(rows) for n in ("read", "decode", "augment", "collate")}
    assert len(got[("loader", "loader consumer")]) == 10  # the loop's waits
    # One clock for both: step k starts after every worker finished its share of batch k.
    batch_end = defaultdict(float)
    for ev in workers.values():
        for e in ev:
            if e["name"] == "batch":
                batch_end[e["args"]["n"]] = max(batch_end[e["args"]["n"]], end(e))
    assert sorted(batch_end) == list(range(10))
    for k, s in enumerate(step_spans):
        assert batch_end[k] <= s["ts"] + 0.002, k


def test_disabled_records_nothing_and_a_window_records_only_it(small, tmp_path):
    path, _ = small
    tracer = dsc.Tracer()
    tracer.enabled = False
    loader = dsc.Loader(path, preset="cifar-test", batch_size=250, threads=1, tracer=tracer)
    for step, _ in enumerate(loader.epoch(0)):
        with tracer.phase("forward", step):
            pass
        tracer.counter("lr", 0.1)
    assert tracer.events == 0
    tracer.write(tmp_path / "off.json")
    got, counters = read_trace(tmp_path / "off.json")
    assert not got and not counters

    # Recording on for step 2 only (the window switch).
    for step, _ in enumerate(loader.epoch(1)):
        tracer.enabled = step == 2
        with tracer.phase("forward", step):
            pass
    tracer.enabled = False
    tracer.write(tmp_path / "window.json")
    got, _ = read_trace(tmp_path / "window.json")
    assert [e["args"]["n"] for e in got[("python", "trainer")]] == [2]
    assert tracer.events == len([e for ev in got.values() for e in ev])


def test_bad_path_raises_naming_it(tmp_path):
    tracer = dsc.Tracer()
    with tracer.phase("x"):
        pass
    bad = tmp_path / "no such dir" / "trace.json"
    with pytest.raises(dsc.Error, match="no such dir/trace.json"):
        tracer.write(bad)
    assert not bad.parent.exists()
    with pytest.raises(TypeError, match="dsc.Tracer"):
        dsc.Loader("unused.beton", tracer="trace.json")


def test_threads_get_rows_of_their_own_and_the_decorator_nests(tmp_path):
    tracer = dsc.Tracer()

    @tracer.phase("fib")
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def work():
        for _ in range(3):
            with tracer.phase("work"):
                fib(3)

    work()  # this thread records first: "trainer"
    t = threading.Thread(target=work, name="helper")
    t.start()
    t.join()
    with pytest.raises(ZeroDivisionError):
        tracer.phase("raises")(lambda: 1 / 0)()
    assert fib.__name__ == "fib"
    tracer.write(tmp_path / "t.json")
    got, _ = read_trace(tmp_path / "t.json")
    assert sorted(got) == [("python", "trainer"), ("python", "trainer (helper)")]
    for row in got.values():
        works = [e for e in row if e["name"] == "work"]
        fibs = [e for e in row if e["name"] == "fib"]
        assert len(works) == 3 and len(fibs) == 3 * 5  # fib(3) makes 5 calls
        for f in fibs:  # every call inside one of this thread's "work" spans
            assert sum(within(f, w) for w in works) == 1
    assert [e["name"] for e in got[("python", "trainer")]][-1] == "raises"


def test_module_level_phase_uses_the_default_tracer(tmp_path):
    before = dsc.trace.default().events
    with dsc.trace.phase("module level"):
        dsc.trace.counter("module counter", 7)
    assert dsc.trace.default().events == before + 2
    dsc.trace.write(tmp_path / "d.json")
    got, counters = read_trace(tmp_path / "d.json")
    assert "module level" in [e["name"] for e in got[("python", "trainer")]]
    assert counters[("python", "module counter")] == [7.0]


def test_rows_keep_at_most_max_events_per_row(tmp_path):
    tracer = dsc.Tracer(max_events_per_row=3)
    for k in range(5):
        with tracer.phase("p", k):
            pass
        tracer.counter("c", k)
    assert tracer.events == 6
    tracer.write(tmp_path / "cap.json")
    got, counters = read_trace(tmp_path / "cap.json")
    assert [e["args"]["n"] for e in got[("python", "trainer")]] == [0, 1, 2]  # the later ones dropped
    assert counters[("python", "c")] == [0.0, 1.0, 2.0]


def test_loader_keeps_its_tracer_alive(small):
    path, _ = small
    loader = dsc.Loader(path, preset="cifar-test", batch_size=500, threads=2, tracer=dsc.Tracer())
    gc.collect()
    assert sum(images.shape[0] for images, _ in loader.epoch(0)) == 1000
    loader.close()


def test_non_finite_counter_values_keep_the_file_json(tmp_path):
    """A diverging loss logged as a counter (nan, inf) was written as bare nan/inf: json.load refused
    the whole file. They are null, with what they were beside."""
    tracer = dsc.Tracer()
    for v in (1.5, float("nan"), float("inf"), float("-inf")):
        tracer.counter("loss", v)
    tracer.write(tmp_path / "nan.json")
    events = json.load(open(tmp_path / "nan.json"))["traceEvents"]
    args = [e["args"] for e in events if e["ph"] == "C"]
    assert args == [{"value": 1.5}, {"value": None, "non_finite": "nan"}, {"value": None, "non_finite": "inf"},
                    {"value": None, "non_finite": "-inf"}]


def rss_bytes():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096


def test_phases_made_while_disabled_keep_no_names():
    """Phase names were interned when the phase was made, recorded or not: 10^6 'step %d' phases outside
    the trace window took 76 MiB for the process's life."""
    tracer = dsc.Tracer()
    tracer.enabled = False
    for i in range(20000):  # warm up the allocator and the phase objects' own memory
        with tracer.phase("warm %d" % i):
            pass
    gc.collect()
    before = rss_bytes()
    for i in range(300000):
        with tracer.phase("step %d" % i):
            pass
    gc.collect()
    assert tracer.events == 0
    assert rss_bytes() - before < 6 << 20
