"""mode="max-autotune": time a few parallel schedules of a new kernel on the call's real
inputs and keep the fastest, in the cache's index, so later processes use it at once.

A schedule is (threads, chunks_per_thread) for every parallel loop of the unit
(dynexpr::parallel::schedule): the default heuristic (0, 0), inline on the calling
thread (1, 0), fewer threads than the pool, and one or sixteen chunks per thread
instead of four. The default's inline threshold, its thread count and its chunk size
are guesses from a hand-off benchmark (include/dynexpr/parallel/thread_pool.hpp); the
real inputs, cache sizes and core count decide here instead.

Timing: candidates alternate over several rounds (drift hits all alike), each round the
median of enough calls for ~2 ms; the default is kept unless another is at least 3%
faster. Inputs the kernel writes in place are copies while timing, so the user's arrays
are written once, by the real call. The choice is keyed by the unit and the inputs'
shapes: a kernel with dynamic dimensions keeps the choice made for its first shapes.
"""

from __future__ import annotations

import os
import statistics
import time
from typing import Any

import numpy as np

from . import cache, logs
from .config import config

stats = {"timed": 0, "loaded": 0}  # kernels tuned by timing, and choices read back


def candidates(pool: int) -> list[tuple[int, int]]:
    out = [(0, 0), (1, 0), (0, 1), (0, 16)]
    t = 2
    while t < pool:
        out.append((t, 0))
        t *= 2
    return out


def _signature(inputs: list) -> str:
    return ";".join(f"{a.dtype.str}{list(a.shape)}{list(a.strides)}" for a in inputs)


def tune(kernel: Any, unit_key: str, inputs: list, written: set[int], name: str) -> tuple:
    """Set kernel's schedule from the index, or by timing the candidates on `inputs`
    (`written`: indices of inputs the kernel writes); returns the schedule."""
    if not hasattr(kernel, "set_schedule"):
        return (0, 0)  # nothing to tune: no compiled unit
    sig = _signature(inputs)
    rec = cache.index_get("autotune:" + unit_key, sig)
    if rec is not None and _valid(rec.get("schedule")):
        choice = tuple(rec["schedule"])
        kernel.set_schedule(*choice)
        stats["loaded"] += 1
        return choice
    args = [a.copy() if i in written else a for i, a in enumerate(inputs)]
    pool = config.num_threads or os.cpu_count() or 1
    cands = candidates(pool)
    times = {c: [] for c in cands}
    # The timing calls are dynexpr's, not the user's: their floating-point errors (an
    # in-place update repeated hundreds of times overflows) are nobody's to report.
    with np.errstate(all="ignore"):
        kernel.set_schedule(0, 0)
        t0 = time.perf_counter()
        kernel(*args)
        once = max(time.perf_counter() - t0, 1e-7)
        calls = max(3, min(200, int(2e-3 / once)))
        for _ in range(5):
            for c in cands:
                kernel.set_schedule(*c)
                kernel(*args)  # warm: the pool wakes, caches fill
                samples = []
                for _ in range(calls):
                    t = time.perf_counter()
                    kernel(*args)
                    samples.append(time.perf_counter() - t)
                times[c].append(statistics.median(samples))
    med = {c: statistics.median(v) for c, v in times.items()}
    best = min(med, key=med.get)
    if med[best] > 0.97 * med[(0, 0)]:
        best = (0, 0)  # within noise of the heuristic: keep it
    kernel.set_schedule(*best)
    stats["timed"] += 1
    cache.index_put("autotune:" + unit_key, sig, {
        "schedule": list(best),
        "seconds": {f"{t},{c}": s for (t, c), s in med.items()},
    })
    log = logs.get("cache")
    if log.isEnabledFor(20):
        log.info("%s: max-autotune chose threads=%d chunks_per_thread=%d (%.1f us; default "
                 "%.1f us)", name, best[0], best[1], med[best] * 1e6, med[(0, 0)] * 1e6)
    return best


def _valid(s: Any) -> bool:
    return (isinstance(s, list) and len(s) == 2
            and all(isinstance(v, int) and 0 <= v <= 4096 for v in s))


def written_inputs(graph) -> set[int]:
    return {i for i, _ in graph.mutations}


__all__ = ["tune", "candidates", "stats", "written_inputs"]
