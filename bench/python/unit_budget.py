"""Compile wall time and peak g++ memory against graph size, one unit vs the compile
budget (issue 13 part 1; Note [compile budget] in bridge/dynexpr/split.py).

    python bench/python/unit_budget.py [--budget B] [--kind heat|chain|fused] N ...

Per N (graph nodes, about): builds an unrolled graph of that size (a Python loop that
capture/reroll.py is told to leave unrolled), plans it under the budget (0: one unit)
and compiles it cold (its units removed first; the precompiled prelude is kept). Prints
nodes, units, source bytes, compile wall seconds, the largest g++'s peak RSS and the
compilers' CPU seconds (user + system: what a loaded machine does not inflate). Run
each N in its own process (`for n in ...; do python ... $n; done`): peak RSS is per
process.
"""
import resource
import shutil
import sys
import time

import numpy as np

import dynexpr
from dynexpr import cache, cxx, runtime, split
from dynexpr.capture import reroll
from dynexpr.capture.translate import translate


# Each step's coefficient differs (t is a constant of the unrolled graph), as the indices
# of a loop that updates a[i] do: otherwise equal steps make equal parts, which the cache
# compiles once (Note [compile budget]) and the budget's runs would flatter themselves.
def heat(u, k, T):  # 2-D five-point stencil, ~13 nodes per step
    for t in range(T):
        u[1:-1, 1:-1] = u[1:-1, 1:-1] + (k + t * 1e-6) * (
            u[2:, 1:-1] + u[:-2, 1:-1] + u[1:-1, 2:] + u[1:-1, :-2] - 4 * u[1:-1, 1:-1])
    return u


def chain(x, y, T):  # pointwise, each step's value read twice: 4 nodes per step
    for t in range(T):
        x = x * (0.999 - t * 1e-6) + np.tanh(x) * y
    return x


def fused(x, y, T):  # pointwise, each step's value read once: one fused expression
    for t in range(T):
        x = np.tanh(x * (0.999 - t * 1e-6) + y)
    return x


KINDS = {"heat": (heat, 13, lambda T: [np.random.default_rng(0).random((64, 64)), 0.1, T]),
         "chain": (chain, 4, lambda T: [np.linspace(0, 1, 4096), np.linspace(1, 2, 4096), T]),
         "fused": (fused, 3, lambda T: [np.linspace(0, 1, 4096), np.linspace(1, 2, 4096), T])}


def main(argv):
    reroll.ENABLED = False
    budget, kind = 0, "heat"
    if "--budget" in argv:
        budget = int(argv[argv.index("--budget") + 1])
    if "--kind" in argv:
        kind = argv[argv.index("--kind") + 1]
    sizes = [int(a) for a in argv if a.isdigit() and a != str(budget)] or [50, 200]
    fn, per_step, make = KINDS[kind]
    dynexpr.config.unit_budget = budget
    runtime.warmup()  # the prelude is built once, outside the measurement
    print(f"{'kind':>6} {'N':>5} {'nodes':>6} {'units':>5} {'bytes':>8} {'wall s':>7} "
          f"{'g++ MB':>7} {'cpu s':>7}  budget={budget}")
    for n in sizes:
        args = make(max(1, round(n / per_step)))
        tr = translate(fn, args)
        p = split.plan(tr.graph)
        plans = p.plans if isinstance(p, split.SplitPlan) else [p]
        for pp in plans:
            if pp.key:
                shutil.rmtree(cache.unit_dir(pp.key), ignore_errors=True)
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        f = split.finish(p) if isinstance(p, split.SplitPlan) else runtime.finish(p).fn
        dt = time.perf_counter() - t0
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        rss = r1.ru_maxrss / 1024
        cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
        nodes = split.body_nodes(tr.graph)
        print(f"{kind:>6} {n:>5} {nodes:>6} {len(plans):>5} {len(p.source):>8} {dt:>7.1f} "
              f"{rss:>7.0f} {cpu:>7.1f}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
