"""Precompiled bundles and export, measured in one run (issue 15's closing numbers):

  1. `python -m dynexpr precompile` of a manifest of 4 functions (one with a dynamic
     dimension) into a new cache, with -j 2: its wall time against the sum of the single
     compiles it ran (the level's prelude and runtime library included), and the bundle's
     size;
  2. the first call of each function in a new process: with the bundle loaded, no
     compiler on PATH and an empty cache, against a new process with the warm cache the
     precompile filled (the same ISA level, so the same units); both exclude the
     interpreter's and NumPy's start-up;
  3. dynexpr.export(gelu).save: the time to write and compile its C++ library.

    .venv/bin/python bench/python/bundle_bench.py [--isa x86-64-v3] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

MODULE = textwrap.dedent('''
    import numpy as np

    def gelu(x):
        return 0.5 * x * (1.0 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))

    def softmax_rows(x):
        e = np.exp(x - x.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)

    def axpy_norm(a, x, y):
        z = a * x + y
        return z / np.sqrt((z * z).sum())

    def ewma(x, alpha):
        out = np.empty_like(x)
        s = x[0]
        for i in range(x.shape[0]):
            s = alpha * x[i] + (1.0 - alpha) * s
            out[i] = s
        return out
''')

MANIFEST = textwrap.dedent('''
    [[spec]]
    function = "bmod:gelu"
    args = [{ name = "x", dtype = "float32", shape = [{ min = 2, max = 100000000, example = 4096 }] }]

    [[spec]]
    function = "bmod:softmax_rows"
    args = [{ name = "x", dtype = "float32", shape = [256, 512], layout = "C" }]

    [[spec]]
    function = "bmod:axpy_norm"
    args = [
      { name = "a", value = 2.0 },
      { name = "x", dtype = "float64", shape = [100000], layout = "C" },
      { name = "y", dtype = "float64", shape = [100000], layout = "C" },
    ]

    [[spec]]
    function = "bmod:ewma"
    args = [{ name = "x", dtype = "float64", shape = [500], layout = "C" }, { name = "alpha", value = 0.1 }]
''')

# One new process: optionally load a bundle, then time each function's first call.
FIRST = textwrap.dedent('''
    import json, sys, time
    import numpy as np
    import dynexpr, bmod
    from dynexpr import cache
    if sys.argv[1] != "-":
        dynexpr.load_artifacts(sys.argv[1])
    rng = np.random.default_rng(0)
    cases = [(bmod.gelu, (rng.standard_normal(50000).astype(np.float32),)),
             (bmod.softmax_rows, (rng.standard_normal((256, 512)).astype(np.float32),)),
             (bmod.axpy_norm, (2.0, rng.standard_normal(100000), rng.standard_normal(100000))),
             (bmod.ewma, (rng.standard_normal(500), 0.1))]
    dynexpr.mark_dynamic(cases[0][1][0], 0, min=2, max=100000000)
    out = {}
    for fn, args in cases:
        f = dynexpr.capture(fn)
        t0 = time.perf_counter()
        got = f(*args)
        out[fn.__name__] = time.perf_counter() - t0
        want = fn(*args)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert np.allclose(got, want, rtol=1e-4, atol=1e-6), fn.__name__
    out["compiles"] = cache.stats["compiles"]
    print("RESULT " + json.dumps(out))
''')


def run_first(work: Path, bundle: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, "first.py", bundle], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600, check=False)
    if proc.returncode != 0:
        sys.exit(f"bundle_bench: the first-call process failed:\n{proc.stderr}")
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return json.loads(line[len("RESULT "):])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--isa", default="x86-64-v3", help="the ISA level to build (one)")
    ap.add_argument("--json", help="write the numbers here")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / "bmod.py").write_text(MODULE)
        (work / "m.toml").write_text(MANIFEST)
        (work / "first.py").write_text(FIRST)
        base = {k: v for k, v in os.environ.items()
                if k not in ("DYNEXPR_ARTIFACTS", "DYNEXPR_BUNDLE_KEY", "DYNEXPR_RECORD")}
        base["DYNEXPR_BACKGROUND_COMPILE"] = "0"
        cache_dir = work / "cache"
        env = dict(base, DYNEXPR_CACHE_DIR=str(cache_dir))
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "dynexpr", "precompile", "m.toml", "-o",
                               "bundle", "-j", "2", "--isa", opts.isa], cwd=work, env=env,
                              capture_output=True, text=True, check=False)
        wall = time.perf_counter() - t0
        if proc.returncode != 0:
            sys.exit(f"bundle_bench: precompile failed:\n{proc.stdout}\n{proc.stderr}")
        print(proc.stdout)
        summed = float(re.search(r"sum to ([0-9.]+) s", proc.stdout).group(1))
        size = sum(f.stat().st_size for f in (work / "bundle").rglob("*") if f.is_file())

        nocc = dict(base, PATH=str(work / "empty-bin"), DYNEXPR_CACHE_DIR=str(work / "empty"))
        for k in ("CXX", "CC"):
            nocc.pop(k, None)
        (work / "empty-bin").mkdir()
        with_bundle = run_first(work, str(work / "bundle"), nocc)
        warm = run_first(work, "-", dict(env, DYNEXPR_ISA=opts.isa))

        sys.path.insert(0, str(work))
        import bmod
        import dynexpr
        import numpy as np

        x = np.ones(4096, np.float32)
        ex = dynexpr.export(bmod.gelu, x, dynamic_shapes={"x": {0: dynexpr.Dim("n")}},
                            name="models")
        t0 = time.perf_counter()
        ex.save(work / "exported")
        export_s = time.perf_counter() - t0

    fns = ["gelu", "softmax_rows", "axpy_norm", "ewma"]
    print(f"precompile -j 2 ({opts.isa}, 4 specs, new cache): wall {wall:.1f} s; the single "
          f"compiles (prelude + runtime included) sum to {summed:.1f} s "
          f"({summed / wall:.2f}x)")
    print(f"bundle size: {size / 1e6:.2f} MB")
    print(f"{'first call':16} {'bundle, no g++':>16} {'warm cache':>12}")
    for f in fns:
        print(f"{f:16} {with_bundle[f] * 1e3:13.1f} ms {warm[f] * 1e3:9.1f} ms")
    print(f"{'compiles':16} {with_bundle['compiles']:>16} {warm['compiles']:>12}")
    print(f"dynexpr.export(gelu).save: {export_s:.1f} s (prelude already built)")
    if opts.json:
        Path(opts.json).write_text(json.dumps({
            "isa": opts.isa, "precompile_wall_s": wall, "single_compiles_sum_s": summed,
            "bundle_bytes": size, "first_call_bundle_s": with_bundle,
            "first_call_warm_cache_s": warm, "export_save_s": export_s}, indent=2))


if __name__ == "__main__":
    main()
