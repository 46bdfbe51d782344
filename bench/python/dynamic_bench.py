"""A dynamic-shape kernel against its static twin, in one run.

The same 10-op float32 chain is captured twice: with dynamic=False (extents are
compile-time constants of the unit) and with dynamic=True (the extent is bound from the
argument at run time, one unit for every size). Both are timed at each size, alternating,
as medians of many calls after warm-up, with NumPy alongside. Target (issue 4): the
dynamic kernel within 1.15x of the static one at 1M elements.

    .venv/bin/python bench/python/dynamic_bench.py [--sizes 1K,64K,1M] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np

import dynexpr


def gelu10(x, y):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1K,64K,1M")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    sizes = [parse_size(s) for s in args.sizes.split(",")]
    static = dynexpr.capture(gelu10, dynamic=False)
    dyn = dynexpr.capture(gelu10, dynamic=True)
    rng = np.random.default_rng(0)
    rows = []
    for n in sizes:
        x = rng.standard_normal(n).astype(np.float32)
        y = rng.standard_normal(n).astype(np.float32)
        want = gelu10(x, y)
        for f in (static, dyn):
            f(x, y)
        dynexpr.synchronize()  # time the compiled kernels, not the NumPy tier
        for f in (static, dyn):
            np.testing.assert_allclose(f(x, y), want, rtol=1e-5, atol=1e-6)
        calls = max(5, min(2000, (1 << 24) // max(n, 1) // 8))
        t = {"static": [], "dynamic": [], "numpy": []}
        for _ in range(args.rounds):  # alternate so that drift hits all three alike
            t["static"].append(median_s(static, (x, y), calls))
            t["dynamic"].append(median_s(dyn, (x, y), calls))
            t["numpy"].append(median_s(gelu10, (x, y), calls))
        med = {k: statistics.median(v) for k, v in t.items()}
        rows.append({"n": n, **{f"{k}_s": v for k, v in med.items()},
                     "dynamic_over_static": med["dynamic"] / med["static"]})
    assert dyn.cache_info().compiles == 1, dyn.cache_info()
    print(f"10-op float32 chain; dynexpr threads: {os.environ.get('DYNEXPR_NUM_THREADS', 'all')}"
          f", {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'n':>10} {'static':>11} {'dynamic':>11} {'numpy':>11} {'dyn/static':>11}")
    for r in rows:
        print(f"{r['n']:>10} {r['static_s'] * 1e6:>9.1f}us {r['dynamic_s'] * 1e6:>9.1f}us "
              f"{r['numpy_s'] * 1e6:>9.1f}us {r['dynamic_over_static']:>10.3f}x")
    print(f"dynamic captures: {dyn.cache_info().compiles} unit for {len(sizes)} sizes; "
          f"static: {static.cache_info().compiles} units")
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=1)


if __name__ == "__main__":
    main()
