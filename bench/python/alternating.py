"""The timing loop of the small benches that pit two captured versions of a function
against each other and NumPy (dynamic_bench.py, break_bench.py): the command line, the
inputs, the correctness check, alternating medians, the JSON file."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from collections.abc import Callable

import numpy as np

import dynexpr


def parse_size(s: str) -> int:
    mult = {"K": 1 << 10, "M": 1 << 20}
    return int(s[:-1]) * mult[s[-1]] if s[-1] in mult else int(s)


def median_s(fn, args, calls: int) -> float:
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def arguments(doc: str) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--sizes", default="1K,64K,1M")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    return ap.parse_args()


def measure(impls: dict[str, Callable], numpy_fn: Callable, sizes: list[int], rounds: int,
            rtol: float, atol: float) -> list[dict]:
    """Per size, float32 inputs x and y: each captured implementation is warmed up (its
    kernels compiled, not the NumPy tier), checked against numpy_fn (dtype, shape,
    values), then all of them and numpy_fn are timed in alternation, so that drift hits
    all alike; the rows hold the median seconds as "<name>_s" and "numpy_s"."""
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        want = numpy_fn(x, y)
        for f in impls.values():
            f(x, y)
        dynexpr.synchronize()  # time the compiled kernels, not the NumPy tier
        for f in impls.values():
            got = f(x, y)
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        calls = max(5, min(2000, (1 << 24) // max(n, 1) // 8))
        timed = {**impls, "numpy": numpy_fn}
        t = {k: [] for k in timed}
        for _ in range(rounds):
            for k, f in timed.items():
                t[k].append(median_s(f, (x, y), calls))
        rows.append({"n": n, **{f"{k}_s": statistics.median(v) for k, v in t.items()}})
    return rows


def write_json(rows: list[dict], path: str | None) -> None:
    if path:
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w") as fh:
            json.dump(rows, fh, indent=1)
