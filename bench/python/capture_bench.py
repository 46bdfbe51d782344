"""The Python bridge end to end, through dynexpr.capture, in one run:

  1. cache-hit call overhead at 1K float32 elements: a captured 10-op chain against
     NumPy running the same chain (and a captured single add against np.add);
  2. first call of the 10-op function with an empty kernel cache, with the precompiled
     prelude and runtime library as installed with the package (built at install time;
     what building them on first use costs is reported apart): as users get it (NumPy
     runs the captured graph while the unit compiles in the background), the time until
     calls run the compiled kernel, and the first call waiting for the compiler
     (config.background_compile = False: capture + codegen + compile + load);
  3. first call in a new process with a warm cache (capture + cache hit + load; the
     interpreter's and NumPy's start-up are reported apart);
  4. compile time against op count: chains of 1, 10 and 50 ops, each compiled cold 5
     times (a different constant each time, so each is a new unit), median and range.

    .venv/bin/python bench/python/capture_bench.py [--json bench/results/capture.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
import timeit

import numpy as np

import dynexpr
from dynexpr import cache, cxx

# The cache-hit rows time the compiled path (an entry measured slower than NumPy would
# run the plain function: Note [judging an entry] in dynexpr/judge.py).
dynexpr.config.plain_fallback = False

N = 1024


def gelu10(x, y):
    """Ten array ops, float32 in and out."""
    return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y


def add1(x, y):
    return x + y


def best_us(fn, number, repeat=7) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def inputs():
    rng = np.random.default_rng(0)
    return (rng.standard_normal(N).astype(np.float32), rng.standard_normal(N).astype(np.float32))


def call_overhead() -> dict:
    x, y = inputs()
    fused, add = dynexpr.capture(gelu10), dynexpr.capture(add1)
    fused(x, y), add(x, y)
    dynexpr.synchronize()  # time the compiled kernels, not the NumPy tier
    np.testing.assert_allclose(fused(x, y), gelu10(x, y), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(add(x, y), x + y)
    out = {}
    # Alternate the implementations so that drift hits them alike.
    for _ in range(3):
        for name, fn, number in (("gelu10_captured_us", lambda: fused(x, y), 20000),
                                 ("gelu10_numpy_us", lambda: gelu10(x, y), 20000),
                                 ("add_captured_us", lambda: add(x, y), 50000),
                                 ("add_numpy_us", lambda: np.add(x, y), 50000)):
            t = best_us(fn, number, repeat=3)
            out[name] = min(out.get(name, t), t)
    return out


@contextlib.contextmanager
def new_cache():
    """This process on a new, empty kernel cache; yields (its directory, the seconds the
    precompiled prelude and the runtime library took: built side by side as a first
    compile builds them, or found installed with the package)."""
    with tempfile.TemporaryDirectory(prefix="dynexpr-bench-") as d:
        os.environ["DYNEXPR_CACHE_DIR"] = d
        cache.reset()
        dynexpr.reset()
        t = time.perf_counter()
        cxx.ensure_prelude_and_runtime()
        yield d, time.perf_counter() - t


@contextlib.contextmanager
def waiting_for_the_compiler():
    """Calls wait for their unit to compile (config.background_compile = False)."""
    dynexpr.config.background_compile = False
    try:
        yield
    finally:
        dynexpr.config.background_compile = True


def first_call() -> dict:
    x, y = inputs()
    res = {}
    with new_cache() as (d, built_s):
        # What `pip install .` puts in the package (dynexpr/_pch/), else built here now.
        res["prelude_and_runtime_s"] = built_s
        res["prelude_installed"] = str(cxx.ensure_pch()).startswith(str(cxx.PKG_DIR))
        # The default: the first call runs NumPy while the unit compiles in the
        # background (Note [tiered first call]); then the time until calls run compiled.
        dynexpr.config.background_compile = True
        f = dynexpr.capture(gelu10)
        t = time.perf_counter()
        r = f(x, y)
        res["first_call_s"] = time.perf_counter() - t
        np.testing.assert_allclose(r, gelu10(x, y), rtol=1e-5, atol=1e-6)
        dynexpr.synchronize()
        res["kernel_ready_s"] = time.perf_counter() - t
        r = f(x, y)
        assert type(f.entries[0].compiled).__name__ == "Kernel"
        np.testing.assert_allclose(r, gelu10(x, y), rtol=1e-5, atol=1e-6)
        res["warm_process"] = warm_process(d)
    # The same first call waiting for the compiler (config.background_compile = False).
    with new_cache(), waiting_for_the_compiler():
        c0 = cache.stats["compile_seconds"]
        t = time.perf_counter()
        r = dynexpr.capture(gelu10)(x, y)
        res["first_call_sync_s"] = time.perf_counter() - t
        res["compile_s"] = cache.stats["compile_seconds"] - c0
        np.testing.assert_allclose(r, gelu10(x, y), rtol=1e-5, atol=1e-6)
    return res


# One op per line, cycled: n lines are an n-op chain (t and y float32, c a float constant).
CHAIN_OPS = ("t = t * {c}", "t = t + y", "t = np.tanh(t)", "t = t - {c}", "t = np.abs(t)")


def chain(n_ops: int, c: float):
    body = "\n".join("    " + CHAIN_OPS[k % len(CHAIN_OPS)].format(c=repr(c + k * 1e-6))
                     for k in range(n_ops))
    ns = {"np": np}
    exec(f"def chain{n_ops}(x, y):\n    t = x\n{body}\n    return t\n", ns)
    return ns[f"chain{n_ops}"]


def compile_scaling(op_counts=(1, 10, 50), reps=5) -> dict:
    """Seconds the compiler takes for a new n-op unit (the precompiled prelude and the
    runtime library already built), reps times each: every rep's constants differ, so
    every call compiles."""
    x, y = inputs()
    out = {}
    with new_cache(), waiting_for_the_compiler():
        for n in op_counts:
            times = []
            for rep in range(reps):
                fn = chain(n, 0.5 + 0.01 * rep)
                c0, k0 = cache.stats["compile_seconds"], cache.stats["compiles"]
                r = dynexpr.capture(fn)(x, y)
                assert cache.stats["compiles"] == k0 + 1, "expected one new unit"
                times.append(cache.stats["compile_seconds"] - c0)
                np.testing.assert_allclose(r, fn(x, y), rtol=1e-5, atol=1e-6)
            times.sort()
            out[str(n)] = {"median_s": times[len(times) // 2], "min_s": times[0],
                           "max_s": times[-1], "reps": reps}
    return out


def warm_process(cache_dir: str) -> dict:
    code = textwrap.dedent(f"""
        import json, time
        t0 = time.perf_counter()
        import numpy as np
        t1 = time.perf_counter()
        import dynexpr
        from dynexpr import cache
        t2 = time.perf_counter()
        def gelu10(x, y):
            return 0.5 * x * (1.0 + np.tanh(0.79788456 * (x + 0.044715 * x * x * x))) + y
        x = np.ones({N}, np.float32)
        t3 = time.perf_counter()
        dynexpr.capture(gelu10)(x, x)
        t4 = time.perf_counter()
        print(json.dumps({{"numpy_import_s": t1 - t0, "dynexpr_import_s": t2 - t1,
                          "first_call_s": t4 - t3, "compiles": cache.stats["compiles"]}}))
    """)
    env = dict(os.environ, DYNEXPR_CACHE_DIR=cache_dir)
    runs = []
    for _ in range(3):
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                           env=env, check=True)
        runs.append(json.loads(p.stdout.strip().splitlines()[-1]))
    return min(runs, key=lambda r: r["first_call_s"])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "..", "results",
                                                   "capture.json"))
    args = ap.parse_args()
    saved = os.environ.get("DYNEXPR_CACHE_DIR")
    res = {"first": first_call(), "compile_by_ops": compile_scaling()}
    if saved is None:
        os.environ.pop("DYNEXPR_CACHE_DIR", None)
    else:
        os.environ["DYNEXPR_CACHE_DIR"] = saved
    cache.reset()
    res["call"] = call_overhead()
    res["machine"] = {"nproc": os.cpu_count(), "loadavg": os.getloadavg()}
    f, w, c = res["first"], res["first"]["warm_process"], res["call"]
    where = "installed with the package" if f["prelude_installed"] else "built on first use"
    rows = [
        ("cache hit, 1K float32, 10-op chain: captured", f"{c['gelu10_captured_us']:.1f} us",
         f"NumPy {c['gelu10_numpy_us']:.1f} us (target: no worse)"),
        ("cache hit, 1K float32, one add: captured", f"{c['add_captured_us']:.1f} us",
         f"np.add {c['add_numpy_us']:.1f} us"),
        ("first call, 10-op chain, empty kernel cache", f"{f['first_call_s'] * 1e3:.1f} ms",
         "target <= 1.5 s; NumPy runs the graph while the unit compiles in the background"),
        ("  until calls run the compiled kernel", f"{f['kernel_ready_s']:.2f} s",
         "background compile done (dynexpr.synchronize())"),
        ("  first call waiting for the compiler", f"{f['first_call_sync_s']:.2f} s",
         f"config.background_compile = False; of which compiler {f['compile_s']:.2f} s"),
        (f"  prelude PCH + runtime library ({where})", f"{f['prelude_and_runtime_s']:.2f} s",
         "once per toolchain"),
        ("new process, warm cache: first call", f"{w['first_call_s'] * 1e3:.1f} ms",
         f"target <= 30 ms; compiles: {w['compiles']}; imports: numpy "
         f"{w['numpy_import_s'] * 1e3:.0f} ms, dynexpr {w['dynexpr_import_s'] * 1e3:.0f} ms"),
    ]
    for n, c in res["compile_by_ops"].items():
        rows.append((f"cold compile, {n}-op chain (median of {c['reps']})",
                     f"{c['median_s']:.2f} s",
                     f"range {c['min_s']:.2f}-{c['max_s']:.2f} s" +
                     ("; target <= 0.5 s" if n == "10" else "")))
    wd = max(len(r[0]) for r in rows)
    for name, val, ref in rows:
        print(f"{name:<{wd}}  {val:>10}  {ref}")
    print(f"(load average {res['machine']['loadavg']}, {res['machine']['nproc']} cores)")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(res, fh, indent=1)


if __name__ == "__main__":
    main()
