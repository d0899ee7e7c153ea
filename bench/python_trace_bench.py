#!/usr/bin/python3
"""What a `with dsc.trace.phase(...)` costs a Python loop, side by side in one run: microseconds per
empty `with` block over a plain loop, for

- `with contextlib.nullcontext():` (the floor any context manager pays),
- `with tracer.phase("forward"):` on an enabled and on a disabled tracer,
- `with dsc.trace.phase("forward"):` (the default tracer, enabled),
- a call of a function decorated with `@tracer.phase("forward")` against a plain call.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_trace_bench.py

Each figure is the median over --rounds rounds (contenders alternating) of --n iterations; each round
records into a fresh tracer, so no row reaches its event cap (except the default tracer's, which
is one per process: past 500,000 events it drops them, saving only the vector append).
"""
import argparse
import contextlib
import statistics
import time

import dsc


def per_iteration(body, n):
    t0 = time.perf_counter()
    body(n)
    return (time.perf_counter() - t0) / n * 1e6


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=100000)
    p.add_argument("--rounds", type=int, default=7)
    args = p.parse_args()

    def empty(n):
        for _ in range(n):
            pass

    def null(n):
        for _ in range(n):
            with contextlib.nullcontext():
                pass

    def with_tracer(enabled):
        def run(n):
            t = dsc.Tracer()
            t.enabled = enabled
            for _ in range(n):
                with t.phase("forward"):
                    pass
        return run

    def module_level(n):
        for _ in range(n):
            with dsc.trace.phase("forward"):
                pass

    def plain_call(n):
        def f():
            pass
        for _ in range(n):
            f()

    def decorated_call(n):
        t = dsc.Tracer()

        @t.phase("forward")
        def f():
            pass
        for _ in range(n):
            f()

    contenders = {"empty loop": empty, "nullcontext": null, "tracer.phase (enabled)": with_tracer(True),
                  "tracer.phase (disabled)": with_tracer(False), "dsc.trace.phase (enabled)": module_level,
                  "plain call": plain_call, "@tracer.phase call": decorated_call}
    times = {k: [] for k in contenders}
    for _ in range(args.rounds):
        for k, body in contenders.items():
            times[k].append(per_iteration(body, args.n))
    base = statistics.median(times["empty loop"])
    call = statistics.median(times["plain call"])
    for k, v in times.items():
        m = statistics.median(v)
        over = m - (call if k == "@tracer.phase call" else base)
        print(f"{k:28s} {m:7.3f} us/iteration  ({over:+.3f} us over {'a plain call' if k == '@tracer.phase call' else 'the empty loop'})")


if __name__ == "__main__":
    main()
