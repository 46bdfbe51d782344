"""Integer floor division and remainder by a scalar against NumPy, in one process (Note
[division by a scalar] in include/dynexpr/ops/op_support.hpp).

`x // s` and `x % s` for uint8, int32 and int64 arrays: NumPy divides by a scalar with
libdivide's multiply-and-shift; dynexpr prepares the divisor once per call. Each function
is captured, its result checked against NumPy (values, dtype, shape: a mismatch is a
WRONG row and exit status 1), then NumPy and the compiled path (config.plain_fallback off)
are timed in alternation, `--calls` rounds, and the median and best of each are printed
with the ratio of the medians (above 1: dynexpr is faster). `by array` divides by an
array of the same value (a divisor per lane: the packed division every lane pays without
the preparation), as a reference.

    .venv/bin/python bench/python/int_division_bench.py [--sizes 64K,1M,16M] [--calls 41]
        [--json bench/results/int_division.json]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dynexpr  # noqa: E402
from alternating import parse_size, write_json  # noqa: E402

dynexpr.config.plain_fallback = False  # time the compiled path (Note [judging an entry])
dynexpr.config.background_compile = False  # the first call loads the kernel

DIVISOR = 7


def floor_div(x, s):
    return x // s


def remainder(x, s):
    return x % s


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="64K,1M,16M")
    ap.add_argument("--calls", type=int, default=41)
    ap.add_argument("--json")
    args = ap.parse_args(argv)
    rng = np.random.default_rng(0)
    records, wrong = [], 0
    print(f"{'dtype':6} {'n':>9} {'op':3} {'numpy':>10} {'dynexpr':>10} {'best np':>9} "
          f"{'best dx':>9} {'ratio':>7} {'by array':>10}")
    for dtype in ("uint8", "int32", "int64"):
        for n in map(parse_size, args.sizes.split(",")):
            x = rng.integers(-10**6 if dtype != "uint8" else 0, 10**6 if dtype != "uint8" else 256,
                             n).astype(dtype)
            lanes = np.full(n, DIVISOR, dtype)
            for fn, sym in ((floor_div, "//"), (remainder, "%")):
                f, g = dynexpr.capture(fn), dynexpr.capture(fn)
                want = fn(x, DIVISOR)
                got, got_lanes = f(x, DIVISOR), g(x, lanes)
                ok = all(r.dtype == want.dtype and r.shape == want.shape and np.array_equal(r, want)
                         for r in (got, got_lanes))
                wrong += not ok
                times: dict[str, list[float]] = {"numpy": [], "dynexpr": [], "by_array": []}
                for _ in range(args.calls):
                    for name, call, d in (("numpy", fn, DIVISOR), ("dynexpr", f, DIVISOR),
                                          ("by_array", g, lanes)):
                        t = time.perf_counter()
                        call(x, d)
                        times[name].append(time.perf_counter() - t)
                med = {k: statistics.median(v) for k, v in times.items()}
                best = {k: min(v) for k, v in times.items()}
                ratio = med["numpy"] / med["dynexpr"]
                print(f"{dtype:6} {n:9d} {sym:3} {med['numpy'] * 1e6:8.1f}us "
                      f"{med['dynexpr'] * 1e6:8.1f}us {best['numpy'] * 1e6:7.1f}us "
                      f"{best['dynexpr'] * 1e6:7.1f}us {ratio:6.2f}x "
                      f"{med['by_array'] * 1e6:8.1f}us{'' if ok else '  WRONG'}", flush=True)
                records.append({"dtype": dtype, "n": n, "op": sym, "divisor": DIVISOR,
                                "numpy_s": med["numpy"], "dynexpr_s": med["dynexpr"],
                                "by_array_s": med["by_array"], "numpy_min_s": best["numpy"],
                                "dynexpr_min_s": best["dynexpr"], "ok": ok})
    write_json(records, args.json)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
