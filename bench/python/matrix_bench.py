"""Matrix pipelines against plain NumPy (issue 13 part 2): captured products call NumPy's
BLAS (Note [NumPy's BLAS] in bridge/dynexpr/blas.py), with the pointwise work around them
fused into the unit.

    .venv/bin/python bench/python/matrix_bench.py [--sizes 64,256,1000,2000] [--quick] [--json PATH]

Per size n (n x n float64 matrices, length-n vectors): A @ x, A.T @ y, alpha*A@B + beta*C
(scale and bias folded into the gemm: Note [alpha/beta folding] in blas_fold.py), a
pipeline with pointwise work after the product (tanh(A @ x + b) * s) and a 2-layer MLP
forward (relu(X @ W1 + b1) @ W2 + b2, X n x n, W1 n x n/2, W2 n/2 x 10); the Gram product
A.T @ A and a ridge system A.T @ A + lam * np.eye(n) (syrk: Note [Gram products] in
include/dynexpr/interop/matmul.hpp); an int64 product
(A @ B) % 7 up to n = 500 (no BLAS has integers: Note [matmul without Eigen in units]); and
A.T @ y at 1500 whatever the sizes (issue 13's worst row). --quick: a shorter budget per row. Each is checked
against NumPy (values, dtype, shape), then plain and captured are timed alternately, best
of several calls within a time budget. `ratio` is NumPy's time over dynexpr's compiled path
(config.plain_fallback off; above 1: dynexpr is faster); `first` is the first call with the
compile waited for (translate + compile, config.background_compile off). DYNEXPR_BLAS=0
measures the units' row loop (what runs without a BLAS) instead.
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


def mlp(X, W1, b1, W2, b2):
    h = np.maximum(X @ W1 + b1, 0.0)
    return h @ W2 + b2


def gram(A):
    return A.T @ A  # syrk, as NumPy's matmul (Note [Gram products])


def ridge(A, lam):
    return A.T @ A + lam * np.eye(A.shape[1])


def int_mod(A, B):
    return (A @ B) % 7


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


def cases(n: int, only_at_y: bool = False) -> list:
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    y = rng.standard_normal(n)
    if only_at_y:
        return [(at_y, (A, y))]
    B, C = (rng.standard_normal((n, n)) for _ in range(2))
    x, b = (rng.standard_normal(n) for _ in range(2))
    h = max(n // 2, 1)
    W1, W2 = rng.standard_normal((n, h)) / n ** 0.5, rng.standard_normal((h, 10)) / h ** 0.5
    b1, b2 = rng.standard_normal(h), rng.standard_normal(10)
    rows = [(a_x, (A, x)), (at_y, (A, y)), (gemm, (A, B, C, 0.5, 2.0)),
            (pipeline, (A, x, b, 0.25)), (mlp, (A, W1, b1, W2, b2)), (gram, (A,)),
            (ridge, (A, 0.1))]
    if n <= 500:  # NumPy's integer matmul is a plain loop: 2000^3 would take seconds a call
        rows.append((int_mod, tuple(rng.integers(-50, 50, (n, n)) for _ in range(2))))
    return rows


def measure(n: int, budget_s: float, only_at_y: bool = False) -> list[dict]:
    rows = []
    for fn, args in cases(n, only_at_y):
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
    # The compiled path itself, and the first call's real cost: without these the timed
    # calls ran the plain function while the unit compiled (Note [plain while compiling]).
    dynexpr.config.plain_fallback = False
    dynexpr.config.background_compile = False
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64,256,1000,2000")
    ap.add_argument("--budget", type=float, default=2.0, help="seconds per row and side")
    ap.add_argument("--quick", action="store_true",
                    help="0.3 s per row and side (a busy machine: ratios are noisier)")
    ap.add_argument("--json")
    a = ap.parse_args()
    budget = 0.3 if a.quick else a.budget
    rows = []
    print(f"{'case':10s} {'n':>5s} {'numpy':>11s} {'dynexpr':>11s} {'ratio':>6s} {'first':>7s}")
    sizes = [(int(s), False) for s in a.sizes.split(",")]
    if 1500 not in [n for n, _ in sizes]:
        sizes.append((1500, True))
    for n, only in sizes:
        for r in measure(n, budget, only):
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
