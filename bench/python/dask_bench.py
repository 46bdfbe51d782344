"""dynexpr on Dask against Dask with NumPy chunks, on a LocalCluster of worker processes.

    python bench/python/dask_bench.py                  # small: 64 MiB per input, 4 chunks
    python bench/python/dask_bench.py --gib 2 --json out.json

For each workload (tanh chain, Black-Scholes, softmax over rows): the tasks of the
result's graph (inputs not counted) and the wall time of computing it (persisted on the
workers, so the result is not shipped to the client), best of --repeat, after one warm
run (which compiles each kernel once per worker through the on-disk cache). Inputs are
generated on the workers and persisted before timing.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from workloads.pointwise import black_scholes, tanh_chain  # noqa: E402
from workloads.reductions import softmax_rows  # noqa: E402

COLS = 512  # softmax rows: row length (one chunk along it)


def inputs(da, name: str, n: int, chunk: int, dtype):
    rs = da.random.RandomState(0)
    if name == "softmax_rows":
        rows = max(1, n // COLS)
        return [rs.standard_normal((rows, COLS), chunks=(max(1, chunk // COLS), COLS))
                .astype(dtype)]
    if name == "black_scholes":
        return [(rs.uniform(50, 150, n, chunks=chunk)).astype(dtype),
                (rs.uniform(50, 150, n, chunks=chunk)).astype(dtype),
                (rs.uniform(0.1, 2.0, n, chunks=chunk)).astype(dtype)]
    return [rs.standard_normal(n, chunks=chunk).astype(dtype) for _ in range(2)]


def timed(distributed, make, repeat: int) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        r = make().persist()
        distributed.wait(r)
        best = min(best, time.perf_counter() - t0)
        # Release the keys now: a plain function's task names are deterministic, and a
        # repeat would otherwise find its result still held on the workers.
        distributed.get_client().cancel(r)
        del r
        time.sleep(0.5)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gib", type=float, default=1 / 16, help="GiB per input array")
    ap.add_argument("--chunk-mib", type=float, default=16, help="MiB per chunk")
    ap.add_argument("--dtype", default="float64")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", help="write the rows here")
    a = ap.parse_args()

    import dask.array as da
    import distributed

    import dynexpr
    from dynexpr.dask_explain import _tasks

    dtype = np.dtype(a.dtype)
    n = int(a.gib * 2**30) // dtype.itemsize
    chunk = int(a.chunk_mib * 2**20) // dtype.itemsize
    rows = []
    with distributed.LocalCluster(processes=True, n_workers=a.workers, threads_per_worker=1,
                                  host="127.0.0.1", dashboard_address=None) as cluster, \
            distributed.Client(cluster) as client:
        for fn in (tanh_chain, black_scholes, softmax_rows):
            ins = client.persist(inputs(da, fn.__name__, n, chunk, dtype))
            distributed.wait(ins)
            cf = dynexpr.capture(fn)
            plain_tasks = _tasks(fn(*ins), ins)
            dx_tasks = _tasks(cf(*ins), ins)
            plan = dynexpr.explain(cf, *ins).kind
            warm = timed(distributed, lambda: cf(*ins), 1)  # compiles on each worker
            t_plain = timed(distributed, lambda: fn(*ins), a.repeat)
            t_dx = timed(distributed, lambda: cf(*ins), a.repeat)
            err = float(abs(cf(*ins) - fn(*ins)).max().compute())
            rows.append(dict(workload=fn.__name__, chunks=ins[0].npartitions, plan=plan,
                             tasks_numpy=plain_tasks, tasks_dynexpr=dx_tasks,
                             s_numpy=t_plain, s_dynexpr=t_dx, s_first=warm,
                             speedup=t_plain / t_dx, max_abs_diff=err))
            del ins
    size = f"{a.gib:g} GiB per input, {a.chunk_mib:g} MiB chunks, {dtype}, {a.workers} workers"
    print(f"dask_bench: {size}")
    print(f"{'workload':<15}{'chunks':>7}{'plan':>11}{'tasks np':>10}{'tasks dx':>10}"
          f"{'s numpy':>10}{'s dynexpr':>11}{'speedup':>9}{'first s':>9}")
    for r in rows:
        print(f"{r['workload']:<15}{r['chunks']:>7}{r['plan']:>11}{r['tasks_numpy']:>10}"
              f"{r['tasks_dynexpr']:>10}{r['s_numpy']:>10.3f}{r['s_dynexpr']:>11.3f}"
              f"{r['speedup']:>8.2f}x{r['s_first']:>9.2f}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(size=size, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
