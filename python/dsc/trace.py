"""A timeline of a Python training loop and its loaders, in one Chrome/Perfetto trace file.

    import dsc
    tracer = dsc.trace.default()                 # or dsc.Tracer(): one file per tracer
    loader = dsc.Loader("train.beton", preset="cifar-train", tracer=tracer)
    for step, (images, labels) in enumerate(loader):
        tracer.enabled = 10 <= step < 60         # a window of steps: outside it nothing is recorded
        with dsc.trace.phase("forward"):         # a span on the "trainer" row
            loss = model(images)
        with dsc.trace.phase("backward"):
            loss.backward()
        dsc.trace.counter("lr", lr)              # a counter row
    tracer.write("trace.json")                   # open in https://ui.perfetto.dev or chrome://tracing

The file holds, in process "python", a "trainer" row with the loop's phases (spans nest as the `with`
blocks do; a phase's `n` argument is shown as the span's "n"); with several Python threads, the first
that records has "trainer" and each other one "trainer (THREAD NAME)". In process "loader", the rows
of every loader given the tracer: "loader worker N" with read / decode / augment / collate per sample
and a "batch" span per batch share, and "loader consumer" with the loop's waits for batches.

`phase` also decorates: `@dsc.trace.phase("evaluate")` makes every call of the function a span.
A `with` phase costs about a microsecond, mostly the Python calls (recording is two clock reads and a
lock in C++; bench/python_trace_bench.py measures it). Each row keeps at most
max_events_per_row events (later ones are dropped), so memory is bounded whatever the run.
"""
import functools as _functools

from . import _dsc

Tracer = _dsc.Tracer
Phase = _dsc.Phase

__all__ = ["Tracer", "Phase", "default", "phase", "counter", "write"]


def default():
    """The process's default Tracer (made on first use), which phase, counter and write record into.
    Pass it to dsc.Loader(..., tracer=dsc.trace.default()) to have the loader's rows in the same file."""
    return _dsc.default_tracer()


# `with dsc.trace.phase("forward"): ...` (or `@dsc.trace.phase("forward")`) on the default Tracer:
# the C++ function itself, so a phase costs no Python call more than tracer.phase does.
phase = _dsc.default_phase


def counter(name, value):
    """The default Tracer's counter row `name` takes `value` from now on."""
    _dsc.default_tracer().counter(name, value)


def write(path):
    """Writes the default Tracer's file (Chrome trace-event JSON); dsc.Error naming `path` if it cannot."""
    _dsc.default_tracer().write(path)


def _wrap(tracer, name, n, fn):
    """Phase.__call__'s decorator: every call of fn is a span (also one that raises)."""

    @_functools.wraps(fn)
    def wrapper(*args, **kwargs):
        with tracer.phase(name, n):
            return fn(*args, **kwargs)

    return wrapper
