"""Measures the native half of the Python bridge (IR -> unit -> cache -> _native), without
the capture frontend:

  1. first compile of a 10-op float32 graph with an empty cache: with the precompiled
     prelude built on first use (counts), and with it already built (install time);
  2. first call in a new process with a warm cache: through the graph (schedule, codegen,
     cache hit) and through the index (a unit key, nothing regenerated);
  3. cache-hit call time at 1K float32 elements: fused and unfused units vs NumPy running
     the same chain, and one add vs np.add (the per-call floor).

    python bench/python/native_pipeline.py [--json bench/results/native_pipeline.json]

Prints a table; writes JSON. Needs the extension (pip install -e . --no-build-isolation).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit

import numpy as np
from dynexpr import cache, cxx, ir, runtime

N = 1024


def gelu_graph(n=N) -> ir.Graph:
    """0.5*x*(1 + tanh(0.79788456*(x + 0.044715*x*x*x))) + y: ten ops, float32."""
    g = ir.Graph()
    sh = (n,)

    def inp(i):
        return g.add(ir.Value("input", (), "float32", sh, ir.make_attrs(index=i)))

    def c(v):
        return g.add(ir.Value("const", (), "float32", (), ir.make_attrs(value=v, weak="float")))

    def op(name, *a):
        return g.add(ir.Value(name, a, "float32", sh))

    x, y = inp(0), inp(1)
    x3 = op("multiply", op("multiply", x, x), x)
    a = op("add", x, op("multiply", c(0.044715), x3))
    t = op("tanh", op("multiply", c(0.79788456), a))
    gl = op("multiply", op("multiply", c(0.5), x), op("add", c(1.0), t))
    g.outputs = [op("add", gl, y)]
    assert len(g.ops()) == 10
    return g


def numpy_gelu(x, y):
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y


def add_graph(n=N) -> ir.Graph:
    g = ir.Graph()
    x = g.add(ir.Value("input", (), "float32", (n,), ir.make_attrs(index=0)))
    y = g.add(ir.Value("input", (), "float32", (n,), ir.make_attrs(index=1)))
    g.outputs = [g.add(ir.Value("add", (x, y), "float32", (n,)))]
    return g


def best(fn, number=20000, repeat=5) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number


def first_compile() -> dict:
    out = {}
    for label, keep_pch in (("pch_built_on_first_use", False), ("pch_prebuilt", True)):
        with tempfile.TemporaryDirectory(prefix="dynexpr-bench-") as d:
            os.environ["DYNEXPR_CACHE_DIR"] = d
            cache.reset()
            if keep_pch:
                t = time.perf_counter()
                cxx.ensure_pch()
                out["pch_build_s"] = time.perf_counter() - t
                cache.reset()
            t = time.perf_counter()
            built = runtime.build(gelu_graph())
            out[label + "_s"] = time.perf_counter() - t
            out["unit_compile_s"] = cache.stats["compile_seconds"]
            cache.stats["compile_seconds"] = 0.0
            out["unit_so_bytes"] = os.path.getsize(cache.lookup(built.key).so)
            if keep_pch:
                out["warm_process"] = warm_process(d, built.key)
    return out


def warm_process(cache_dir: str, key: str) -> dict:
    code = textwrap.dedent("""
        import json, sys, time
        t_start = time.perf_counter()
        import numpy as np
        t_np = time.perf_counter()
        sys.path.insert(0, BENCH_DIR)
        from native_pipeline import gelu_graph
        from dynexpr import runtime, cache
        x = np.ones(N, np.float32)
        t0 = time.perf_counter()
        fn = runtime.HOW
        r = fn(x, x)
        t1 = time.perf_counter()
        print(json.dumps({"numpy_import_s": t_np - t_start, "first_call_s": t1 - t0,
                          "import_dynexpr_s": t0 - t_np, "compiles": cache.stats["compiles"]}))
    """).replace("BENCH_DIR", repr(os.path.dirname(os.path.abspath(__file__)))).replace("N,", f"{N},")
    res = {}
    for how, expr in (("via_graph", "compile_graph(gelu_graph())"), ("via_index", f"load({key!r})")):
        env = dict(os.environ, DYNEXPR_CACHE_DIR=cache_dir)
        runs = []
        for _ in range(3):
            p = subprocess.run([sys.executable, "-c", code.replace("HOW", expr)],
                               capture_output=True, text=True, env=env, check=True)
            runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
        res[how] = min(runs, key=lambda r: r["first_call_s"])
    return res


def call_overhead() -> dict:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(N).astype(np.float32)
    y = rng.standard_normal(N).astype(np.float32)
    fused = runtime.compile_graph(gelu_graph())
    unfused = runtime.compile_graph(gelu_graph(), fuse=False)
    add = runtime.compile_graph(add_graph())
    np.testing.assert_allclose(fused(x, y)[0], numpy_gelu(x, y), rtol=1e-5, atol=1e-6)
    return {
        "gelu10_fused_us": best(lambda: fused(x, y)) * 1e6,
        "gelu10_unfused_us": best(lambda: unfused(x, y)) * 1e6,
        "gelu10_numpy_us": best(lambda: numpy_gelu(x, y)) * 1e6,
        "add_dynexpr_us": best(lambda: add(x, y), 100000) * 1e6,
        "add_numpy_us": best(lambda: np.add(x, y), 100000) * 1e6,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "..", "results",
                                                   "native_pipeline.json"))
    args = ap.parse_args()
    saved = os.environ.get("DYNEXPR_CACHE_DIR")
    res = {"first_compile": first_compile()}
    if saved is None:
        os.environ.pop("DYNEXPR_CACHE_DIR", None)
    else:
        os.environ["DYNEXPR_CACHE_DIR"] = saved
    cache.reset()
    res["call"] = call_overhead()
    res["machine"] = {"nproc": os.cpu_count(), "loadavg": os.getloadavg()}
    fc, wp, call = res["first_compile"], res["first_compile"]["warm_process"], res["call"]
    rows = [
        ("10-op float32 graph, empty cache, prelude built on first use",
         f"{fc['pch_built_on_first_use_s']:.2f} s", "<= 1.5 s"),
        ("  of which precompiling the prelude (once per toolchain)",
         f"{fc['pch_build_s']:.2f} s", ""),
        ("10-op float32 graph, empty unit cache, prelude prebuilt",
         f"{fc['pch_prebuilt_s']:.2f} s", "<= 1.5 s"),
        ("new process, warm cache: first call via graph",
         f"{wp['via_graph']['first_call_s'] * 1e3:.1f} ms (+{wp['via_graph']['import_dynexpr_s'] * 1e3:.0f} ms import)",
         "<= 30 ms"),
        ("new process, warm cache: first call via index",
         f"{wp['via_index']['first_call_s'] * 1e3:.1f} ms", "<= 30 ms"),
        ("cache hit, 1K float32, 10-op chain fused", f"{call['gelu10_fused_us']:.2f} us",
         f"NumPy {call['gelu10_numpy_us']:.2f} us"),
        ("cache hit, 1K float32, 10-op chain unfused", f"{call['gelu10_unfused_us']:.2f} us", ""),
        ("cache hit, 1K float32, one add", f"{call['add_dynexpr_us']:.2f} us",
         f"np.add {call['add_numpy_us']:.2f} us"),
    ]
    w = max(len(r[0]) for r in rows)
    for name, val, ref in rows:
        print(f"{name:<{w}}  {val:>28}  {ref}")
    print(f"(load average {res['machine']['loadavg']}, {res['machine']['nproc']} cores)")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
