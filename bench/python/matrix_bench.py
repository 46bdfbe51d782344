"""Matrix pipelines against plain NumPy (issue 13 part 2): captured products call NumPy's
BLAS (Note [NumPy's BLAS] in bridge/dynexpr/blas.py), with the pointwise work around them
fused into the unit.

    .venv/bin/python bench/python/matrix_bench.py [--sizes 64,256,1000,2000] [--json PATH]

Per size n (n x n float64 matrices, length-n vectors): A @ x, A.T @ y, alpha*A@B + beta*C
and a pipeline with pointwise work after the product (tanh(A @ x + b) * s). Each is checked
against NumPy (values, dtype, shape), then plain and captured are timed alternately, best
of several calls within a time budget. `ratio` is NumPy's time over dynexpr's (above 1:
dynexpr is faster). DYNEXPR_BLAS=0 measures dx::matmul's Eigen fallback instead.
"""

from __future__ import annotations

import argparse
import json
import math
import time

import numpy as np

import dynexpr


def a_x(A, x):
    return A @ x


def at_y(A, y):
    return A.T @ y


def gemm(A, B, C, alpha, beta):
    return alpha * A @ B + beta * C


def pipeline(A, x, b, s):
    return np.tanh(A @ x + b) * s


def _best(fn, args, budget_s: float, calls: int = 50) -> float:
    best, spent = math.inf, 0.0
    for _ in range(calls):
        t = time.perf_counter()
        fn(*args)
        dt = time.perf_counter() - t
        best, spent = min(best, dt), spent + dt
        if spent > budget_s:
            break
    return best


def measure(n: int, budget_s: float) -> list[dict]:
    rng = np.random.default_rng(n)
    A, B, C = (rng.standard_normal((n, n)) for _ in range(3))
    x, y, b = (rng.standard_normal(n) for _ in range(3))
    rows = []
    for fn, args in ((a_x, (A, x)), (at_y, (A, y)), (gemm, (A, B, C, 0.5, 2.0)),
                     (pipeline, (A, x, b, 0.25))):
        f = dynexpr.capture(fn)
        t0 = time.perf_counter()
        got = f(*args)
        first = time.perf_counter() - t0
        want = fn(*args)
        assert got.dtype == want.dtype and got.shape == want.shape, fn.__name__
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9 * n, err_msg=fn.__name__)
        tp = tc = math.inf
        for _ in range(3):  # alternate, so load on the machine hits both alike
            tp = min(tp, _best(fn, args, budget_s / 6))
            tc = min(tc, _best(f, args, budget_s / 6))
        rows.append({"case": fn.__name__, "n": n, "numpy_s": tp, "dynexpr_s": tc,
                     "ratio": tp / tc, "first_s": first})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1000,2000")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per row and side")
    ap.add_argument("--json")
    a = ap.parse_args()
    rows = []
    print(f"{'case':10s} {'n':>5s} {'numpy':>11s} {'dynexpr':>11s} {'ratio':>6s} {'first':>7s}")
    for n in (int(s) for s in a.sizes.split(",")):
        for r in measure(n, a.budget):
            rows.append(r)
            print(f"{r['case']:10s} {n:5d} {r['numpy_s'] * 1e6:9.1f}us {r['dynexpr_s'] * 1e6:9.1f}us"
                  f" {r['ratio']:6.2f} {r['first_s']:6.2f}s", flush=True)
    ratios = [r["ratio"] for r in rows]
    worst = min(rows, key=lambda r: r["ratio"])
    print(f"geomean {math.exp(sum(map(math.log, ratios)) / len(ratios)):.2f}x over NumPy; "
          f"worst {worst['case']} n={worst['n']} at {worst['ratio']:.2f}x")
    if a.json:
        with open(a.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
