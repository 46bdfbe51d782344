"""Loops whose carried arrays are updated through slices: compiled (plain fallback off)
vs plain NumPy, per call after the first. Run: python bench/python/loop_carry_bench.py

Note [carried arrays in place] (codegen_loop.py) is what this measures: before it, each
trip of a rolled loop copied every carried array whole."""

import os
import sys
import time

import numpy as np

import dynexpr

# The loops the tests check against NumPy (tests/python/test_loop_carry.py), timed here.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "python"))
from test_loop_carry import heat, recurrence, smooth_rows  # noqa: E402


def forced(u, dt, w, T):
    for i in range(T):
        t = i * dt
        u[1:-1] = u[1:-1] + 0.1 * (u[2:] - 2 * u[1:-1] + u[:-2]) + dt * np.sin(w * t)
    return u


def _best(fn, make, reps):
    best = float("inf")
    for _ in range(reps):
        args = make()
        t0 = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t0)
    return best


def main():
    dynexpr.config.plain_fallback = False
    dynexpr.config.background_compile = False
    r = np.random.default_rng(0)
    X = r.random((512, 512))
    b = r.random(100_000)
    U = r.random(100_000)
    cases = [
        ("smooth_rows 512x512", smooth_rows, lambda: (X.copy(), X, 0.5), 5),
        ("recurrence n=100000", recurrence, lambda: (b.copy(), 0.9, b), 3),
        ("heat 1-D n=100000 T=200", heat, lambda: (U.copy(), 0.2, 200), 5),
        ("forced heat n=100000 T=200", forced, lambda: (U.copy(), 0.01, 3.0, 200), 5),
    ]
    print(f"{'loop':30s} {'plain ms':>10s} {'compiled ms':>12s} {'speed-up':>9s}")
    for name, fn, make, reps in cases:
        cf = dynexpr.capture(fn)
        t0 = time.perf_counter()
        cf(*make())
        first = time.perf_counter() - t0
        plain = _best(fn, make, reps)
        comp = _best(cf, make, reps)
        print(f"{name:30s} {plain * 1e3:10.2f} {comp * 1e3:12.2f} {plain / comp:8.2f}x"
              f"   (first call {first:.1f} s)")


if __name__ == "__main__":
    main()
