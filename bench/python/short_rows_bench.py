"""Reductions along a short last axis ((n, 3) points, (n, 8) features) against NumPy, in
one process (Note [short inner rows] in include/dynexpr/eval/reduce.hpp).

Speeds, kinetic energy (with a per-row mass taken as m[:, None]) and the largest component
of each row, for rows of 3, 4 and 8 elements in float64 and float32. Each function is
captured, its result checked against NumPy (values, dtype, shape: a mismatch is a WRONG
row and exit status 1), then NumPy and the compiled path (config.plain_fallback off) are
timed in alternation, `--calls` rounds, and the best of each is printed with their
ratio (above 1: dynexpr is faster).

    .venv/bin/python bench/python/short_rows_bench.py [--rows 100000] [--calls 200]
        [--json bench/results/short_rows.json]
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynexpr  # noqa: E402
from alternating import write_json  # noqa: E402

dynexpr.config.plain_fallback = False  # time the compiled path (Note [judging an entry])
dynexpr.config.background_compile = False  # the first call loads the kernel


def speeds(v, m):
    return np.sqrt((v * v).sum(axis=1))


def kinetic(v, m):
    return 0.5 * (m[:, None] * v**2).sum(axis=1)


def extremes(v, m):
    return np.abs(v).max(axis=1)


def _same(a: np.ndarray, b: np.ndarray) -> bool:
    rtol = 1e-5 if a.dtype == np.float32 else 1e-12
    return a.dtype == b.dtype and a.shape == b.shape and bool(np.allclose(a, b, rtol=rtol))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    records, wrong = [], 0
    print(f"{'dtype':8} {'shape':>14} {'function':9} {'numpy':>10} {'dynexpr':>10} {'ratio':>7}")
    for dtype in (np.float64, np.float32):
        for cols in (3, 4, 8):
            v = rng.standard_normal((args.rows, cols)).astype(dtype)
            m = rng.uniform(0.5, 2.0, args.rows).astype(dtype)
            for fn in (speeds, kinetic, extremes):
                f = dynexpr.capture(fn)
                ok = _same(f(v, m), fn(v, m))
                wrong += not ok
                best = {"numpy": float("inf"), "dynexpr": float("inf")}
                for _ in range(args.calls):
                    for name, call in (("numpy", fn), ("dynexpr", f)):
                        t = time.perf_counter()
                        call(v, m)
                        best[name] = min(best[name], time.perf_counter() - t)
                ratio = best["numpy"] / best["dynexpr"]
                shape = f"({args.rows}, {cols})"
                print(f"{np.dtype(dtype).name:8} {shape:>14} {fn.__name__:9} "
                      f"{best['numpy'] * 1e6:8.1f}us {best['dynexpr'] * 1e6:8.1f}us "
                      f"{ratio:6.2f}x{'' if ok else '  WRONG'}", flush=True)
                records.append({"dtype": np.dtype(dtype).name, "rows": args.rows, "cols": cols,
                                "function": fn.__name__, "numpy_s": best["numpy"],
                                "dynexpr_s": best["dynexpr"], "ok": ok})
    write_json(records, args.json)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
