"""A captured kernel called after a pause against back to back (issue: thread hand-off).

Between two kernels a program does Python work; when that takes longer than the pool's
spin time (Note [spin then block] in include/dynexpr/parallel/thread_pool.hpp) the worker
threads are asleep when the next kernel starts, and on a VM whose idle vCPU was halted they
can wake after the calling thread has taken most chunks itself. This runs a gelu on 1M
float32 elements (a ~0.5-1 ms kernel on 2 cores) back to back and after a sleep, for
several values of dynexpr.config.spin_us, in one process, and prints the medians and
their ratio (after pause / back to back: 1.0 means the pause costs nothing).

    .venv/bin/python bench/python/pause_bench.py [--pause-ms 10] [--spins 0,30,1000,20000]
        [--n 1048576] [--calls 41] [--json bench/results/pause.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import dynexpr
from dynexpr import runtime

dynexpr.config.plain_fallback = False  # time the compiled path (Note [judging an entry])
dynexpr.config.background_compile = False  # the first call loads the kernel


def gelu(x):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x)))


def medians(f, x, calls: int, pause_s: float) -> tuple[float, float]:
    """(median back-to-back call, median call after a `pause_s` sleep), in seconds."""
    for _ in range(5):
        f(x)
    hot = []
    for _ in range(calls):
        t0 = time.perf_counter()
        f(x)
        hot.append(time.perf_counter() - t0)
    cold = []
    for _ in range(calls):
        time.sleep(pause_s)
        t0 = time.perf_counter()
        f(x)
        cold.append(time.perf_counter() - t0)
    return statistics.median(hot), statistics.median(cold)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pause-ms", type=float, default=10.0)
    ap.add_argument("--spins", default="0,30,1000,5000,20000",
                    help="comma-separated spin times in microseconds (-1: the default)")
    ap.add_argument("--n", type=int, default=1 << 20)
    ap.add_argument("--calls", type=int, default=41)
    ap.add_argument("--json")
    args = ap.parse_args()

    x = np.random.default_rng(0).standard_normal(args.n).astype(np.float32)
    f = dynexpr.capture(gelu)
    np.testing.assert_allclose(f(x), gelu(x), rtol=1e-5, atol=1e-6)
    default_us = runtime.kernel_spin_us()
    print(f"gelu on {args.n} float32, {runtime.kernel_threads()} threads, pause "
          f"{args.pause_ms:g} ms, default spin {default_us} us")
    print(f"{'spin us':>8} {'back to back us':>16} {'after pause us':>15} {'ratio':>6}")
    rows = []
    for spin in (int(s) for s in args.spins.split(",")):
        dynexpr.config.spin_us = spin
        hot, cold = medians(f, x, args.calls, args.pause_ms / 1e3)
        spin_now = runtime.kernel_spin_us()
        rows.append({"spin_us": spin_now, "back_to_back_us": hot * 1e6,
                     "after_pause_us": cold * 1e6, "ratio": cold / hot})
        print(f"{spin_now:>8} {hot * 1e6:>16.0f} {cold * 1e6:>15.0f} {cold / hot:>6.2f}")
    dynexpr.config.spin_us = -1
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"n": args.n, "pause_ms": args.pause_ms, "default_spin_us": default_us,
                       "threads": runtime.kernel_threads(), "rows": rows}, fh, indent=1)


if __name__ == "__main__":
    main()
