"""Unit size and g++ cost of a time-stepping loop as a function of its trip count T
(issue 13 part 1: today a `for t in range(T)` is unrolled, so both grow with T).

    python bench/python/loop_unit_size.py [--compile] [--unrolled] [T ...]

Prints, per T: graph values, unit source bytes and lines, and with --compile the g++
wall time and peak memory (the largest child's max RSS so far: run each T in its own
process, after one run that built the precompiled prelude) of a cold build. --unrolled
turns off capture/reroll.py (the loop stays unrolled, as before issue 13).
"""
import resource
import sys
import time

import numpy as np

from dynexpr import runtime
from dynexpr.capture.translate import translate


def heat(u, k, T):
    for t in range(T):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + k * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def main(argv):
    do_compile = "--compile" in argv
    if "--unrolled" in argv:
        from dynexpr.capture import reroll
        reroll.ENABLED = False
    Ts = [int(a) for a in argv if a.isdigit()] or [10, 100]
    print(f"{'T':>6} {'values':>7} {'bytes':>9} {'lines':>7} {'g++ s':>7} {'g++ MB':>7}")
    for T in Ts:
        u = np.random.default_rng(0).random((64, 64))
        tr = translate(heat, [u, 0.1, T])
        p = runtime.plan(tr.graph)
        row = f"{T:>6} {len(tr.graph.values):>7} {len(p.source):>9} {p.source.count(chr(10)):>7}"
        if do_compile:
            t0 = time.perf_counter()
            runtime.finish(p)
            dt = time.perf_counter() - t0
            rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
            row += f" {dt:>7.1f} {rss:>7.0f}"
        print(row, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
