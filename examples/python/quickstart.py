"""dynexpr from Python: capture a few NumPy functions, show what was captured, and time
the compiled kernels against the same pipeline unfused and against plain NumPy.

    .venv/bin/python examples/python/quickstart.py [--n 4194304] [--repeats 15]

The first call of each captured function captures it and compiles one C++ unit (cached
on disk under $DYNEXPR_CACHE_DIR, default ~/.cache/dynexpr); later calls check the guards
and run the kernel. Every result is compared with NumPy before anything is timed.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dynexpr


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x**3)))


def tanh_chain(x, y):
    return np.tanh(x * 2.0 + y) * 0.5 + x * y


def softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def with_a_break(x):
    y = np.sqrt(x * x + 1.0)
    print_me = float(y.sum())  # a value Python must see: a graph break
    return y / print_me


def timed(fn, args, repeats):
    """Median seconds of `repeats` calls (after one warm-up call)."""
    fn(*args)
    samples = []
    for _ in range(repeats):
        t = time.perf_counter()
        fn(*args)
        samples.append(time.perf_counter() - t)
    return statistics.median(samples)


def check(name, got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    for g, w in zip(got, want, strict=True):
        if g.dtype != w.dtype or g.shape != w.shape:
            raise SystemExit(f"{name}: got {g.dtype}{g.shape}, NumPy gives {w.dtype}{w.shape}")
        tol = 1e-5 if g.dtype == np.float32 else 1e-12
        if not np.allclose(g, w, rtol=tol, atol=tol):
            raise SystemExit(f"{name}: values differ from NumPy by {np.max(np.abs(g - w))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1 << 22, help="elements per array")
    ap.add_argument("--repeats", type=int, default=15)
    args = ap.parse_args()

    rng = np.random.default_rng(0)
    n = args.n
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    rows = rng.standard_normal((n // 1024, 1024)).astype(np.float32)
    cases = [
        ("gelu", gelu, (x,)),
        ("tanh_chain", tanh_chain, (x, y)),
        ("softmax_rows", softmax_rows, (rows,)),
        ("with_a_break", with_a_break, (x,)),
    ]

    print(f"dynexpr {dynexpr.__version__}: {n} float32 elements per array\n")
    table = []
    for name, fn, fargs in cases:
        fused = dynexpr.capture(fn)
        unfused = dynexpr.capture(fn, fuse=False)
        t0 = time.perf_counter()
        check(name, fused(*fargs), fn(*fargs))
        first = time.perf_counter() - t0
        check(name + " (unfused)", unfused(*fargs), fn(*fargs))
        # A kernel not in the disk cache yet compiles in the background while NumPy runs
        # the captured graph; wait for it, then check and time the compiled kernels.
        dynexpr.synchronize()
        ready = time.perf_counter() - t0
        check(name, fused(*fargs), fn(*fargs))
        check(name + " (unfused)", unfused(*fargs), fn(*fargs))
        t_np = timed(fn, fargs, args.repeats)
        t_fused = timed(fused, fargs, args.repeats)
        t_unfused = timed(unfused, fargs, args.repeats)
        table.append((name, first, ready, t_np, t_unfused, t_fused))

    report = dynexpr.explain(gelu, x)
    print("explain(gelu, x):")
    print("  " + str(report).replace("\n", "\n  "))
    print()
    report = dynexpr.explain(with_a_break, x)
    print("explain(with_a_break, x): float() of an array is a value Python must see; it runs "
          "as Python, and the work before and after it runs in two compiled graphs")
    print("  " + str(report).replace("\n", "\n  "))
    print()

    head = f"{'function':<14}{'first call':>12}{'compiled':>10}{'numpy':>11}{'unfused':>11}"
    head += f"{'fused':>11}{'numpy/fused':>13}{'unfused/fused':>15}"
    print(head)
    print("-" * len(head))
    for name, first, ready, t_np, t_unf, t_fus in table:
        print(f"{name:<14}{first:>11.3f}s{ready:>9.2f}s{t_np * 1e3:>9.2f}ms"
              f"{t_unf * 1e3:>9.2f}ms{t_fus * 1e3:>9.2f}ms{t_np / t_fus:>12.2f}x"
              f"{t_unf / t_fus:>14.2f}x")
    print("\nfirst call = capture, then NumPy runs the captured graph while the kernels "
          "compile in the background (or a cache hit from an earlier run loads them); "
          "compiled = time until both kernels were ready (dynexpr.synchronize()); times are "
          "medians of", args.repeats, "calls; 'unfused' is dynexpr.capture(fn, fuse=False): "
          "one kernel per op, every intermediate in memory.")


if __name__ == "__main__":
    main()
