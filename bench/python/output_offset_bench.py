"""Where a captured kernel's output starts in its page, against the speed of the call.

An output that starts a little after one of its inputs in page-offset terms stalls the
loop's loads (4K aliasing: Note [where an output starts in its page] in
bridge/native/buffers.c). NumPy puts a large array 16 bytes into a page; the bridge used to
put every output 64 bytes in, 48 bytes after. It now picks the offset from the inputs
(Note [output page offset] in bridge/native/kernel.c). This times, alternated in one
process so the machine's slow phases hit every placement alike:

    chosen   the bridge's own choice (the default)
    old      64 bytes into the page, what the bridge did before
    +48      48 bytes after the first input, whatever its offset

for pointwise functions of NumPy arrays that memory bounds: a cheap chain (whose loop
takes four vectors a step, which hides the stall: Note [narrow vectors for cheap loops]),
a longer chain, a broadcast operand and mixed dtypes; and prints median microseconds per
call and old / chosen.

    .venv/bin/python bench/python/output_offset_bench.py [--sizes 64K,1M] [--rounds 15]
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dynexpr
from dynexpr import _native

dynexpr.config.plain_fallback = False  # time the compiled path (Note [judging an entry])
dynexpr.config.background_compile = False  # the first call loads the kernel


def affine(x):
    return ((x * 1.5 + 0.5) * 0.75 - 0.25) * 2.0 + 1.0


def poly(x):  # a longer chain: a full-width loop, one vector a step
    return ((((x * 0.3 + 0.2) * x + 0.1) * x - 0.4) * x + 0.5) * x + 1.0


def scale_rows(x, r):  # a broadcast operand: the expression-template loop
    return x * r + 1.0


def mixed(x, y):  # float32 and float64 operands
    return x * 2.0 + y


def median_call(f, args, calls: int) -> float:
    ts = []
    for _ in range(calls):
        t = time.perf_counter()
        f(*args)
        ts.append(time.perf_counter() - t)
    return statistics.median(ts)


def size(text: str) -> int:
    text = text.strip().upper()
    scale = {"K": 1 << 10, "M": 1 << 20}.get(text[-1:], 1)
    return int(text.rstrip("KM")) * scale


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="64K,1M")
    ap.add_argument("--dtypes", default="float64,float32")
    ap.add_argument("--rounds", type=int, default=15)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    print(f"{'function':<8} {'dtype':<8} {'n':>8} {'chosen':>9} {'old':>9} {'+48':>9} "
          f"{'old/chosen':>11}")
    for dtype in args.dtypes.split(","):
        for n in map(size, args.sizes.split(",")):
            x = rng.standard_normal(n).astype(dtype)
            y = rng.standard_normal(n)
            rows = rng.standard_normal((n // 1024, 1024)).astype(dtype)
            r = rng.standard_normal(1024).astype(dtype)
            for name, fn, inputs in (("affine", affine, (x,)), ("poly", poly, (x,)),
                                     ("rows", scale_rows, (rows, r)), ("mixed", mixed, (x, y))):
                f = dynexpr.capture(fn)
                expect = fn(*inputs)
                got = f(*inputs)
                tol = (1e-4, 1e-5) if expect.dtype == np.float32 else (1e-9, 1e-12)  # FMAs
                np.testing.assert_allclose(got, expect, rtol=tol[0], atol=tol[1])
                assert got.dtype == expect.dtype and got.shape == expect.shape
                x_off = inputs[0].ctypes.data % 4096
                places = {"chosen": -1, "old": 64, "+48": (x_off + 48) % 4096}
                once = max(median_call(f, inputs, 5), 1e-7)
                calls = max(5, min(2000, int(3e-3 / once)))
                times = {p: [] for p in places}
                try:
                    for _ in range(args.rounds):
                        for p, k in places.items():
                            _native.output_offset(k)
                            f(*inputs)  # the buffer cache now holds a buffer at this offset
                            times[p].append(median_call(f, inputs, calls))
                finally:
                    _native.output_offset(-1)
                med = {p: statistics.median(v) * 1e6 for p, v in times.items()}
                print(f"{name:<8} {dtype:<8} {n:>8} {med['chosen']:>8.1f}u {med['old']:>8.1f}u "
                      f"{med['+48']:>8.1f}u {med['old'] / med['chosen']:>10.2f}x", flush=True)


if __name__ == "__main__":
    main()
