"""g++ CPU time (user + sys of the compiler child, not wall: the machine is shared) of
generated units against their size (issue 17 part 3, issue 13's 10 s budget): pointwise
chains of 1, 10 and 50 ops, a row reduction, a matmul, and a rolled time loop (heat_2d
of tests/python/scientific). The precompiled prelude and the runtime library are built
first and reported apart; every unit is compiled cold (not from the cache) --repeat
times and the least CPU time is kept.

    .venv/bin/python bench/python/compile_time.py [--repeat 2] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dynexpr import cxx, runtime
from dynexpr.capture.translate import translate

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parents[1] / "tests" / "python" / "scientific"),
                str(HERE.parents[1] / "tests" / "python")]

STEPS = ("v = v * 1.5", "v = v + y", "v = np.tanh(v)", "v = v - 0.25", "v = np.exp(v)",
         "v = v / 3.0", "v = np.maximum(v, y)", "v = v * y", "v = np.sqrt(np.abs(v))",
         "v = v + 1.0")


def chain(n: int):
    """A float32 pointwise function of about n NumPy calls (one fused kernel)."""
    body = "".join(f"    {STEPS[i % len(STEPS)]}\n" for i in range(n))
    ns = {"np": np}
    exec(f"def chain{n}(x, y):\n    v = x\n{body}    return v\n", ns)
    return ns[f"chain{n}"]


def rows(a):
    return (a - a.mean(axis=1, keepdims=True)) / a.std(axis=1, keepdims=True)


def mm(a, b):
    return np.tanh(a @ b) + 1.0


def cases():
    import sci_stencils  # tests/python/scientific

    x = np.ones(1024, np.float32)
    a = np.ones((64, 64), np.float32)
    out = {f"pointwise, {n} op(s)": (chain(n), [x, x]) for n in (1, 10, 50)}
    out["row reduction (standardise)"] = (rows, [a])
    out["matmul + tanh"] = (mm, [a, a])
    out["rolled loop (heat_2d)"] = (sci_stencils.heat_2d, [a.copy(), 0.1, 10])
    return out


def cpu_seconds(cmd: list[str]) -> float:
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, ru = os.wait4(p.pid, 0)
    err = p.stderr.read().decode()
    p.stderr.close()
    if status != 0:
        raise RuntimeError(f"compile failed: {' '.join(cmd)}\n{err[-4000:]}")
    return ru.ru_utime + ru.ru_stime


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    res = {"flags": list(cxx.CXXFLAGS), "units": {}}
    with tempfile.TemporaryDirectory(prefix="dynexpr-ctime-") as d:
        os.environ.setdefault("DYNEXPR_CACHE_DIR", d)
        t = time.perf_counter()
        pch, rt = cxx.ensure_pch(), cxx.ensure_runtime()
        res["prelude_and_runtime_wall_s"] = time.perf_counter() - t
        res["pch_bytes"] = (pch / cxx.PCH).stat().st_size if pch else 0
        print(f"flags {' '.join(cxx.CXXFLAGS)}; PCH {res['pch_bytes'] / 1e6:.0f} MB "
              f"(ready in {res['prelude_and_runtime_wall_s']:.1f} s wall)")
        print(f"{'unit':<30} {'bytes':>7} {'g++ CPU s':>10}")
        for name, (fn, fargs) in cases().items():
            src = runtime.plan(translate(fn, fargs).graph).source
            path = Path(d) / "unit.cpp"
            path.write_text(src)
            cmd = cxx.compile_command(path, Path(d) / "unit.so", pch, rt)
            best = min(cpu_seconds(cmd) for _ in range(max(1, args.repeat)))
            res["units"][name] = {"bytes": len(src), "cpu_s": best}
            print(f"{name:<30} {len(src):>7} {best:>10.2f}", flush=True)
    res["loadavg"] = os.getloadavg()
    print(f"(load average {res['loadavg']}, {os.cpu_count()} cores)")
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
