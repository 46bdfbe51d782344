"""One job of `python -m dynexpr precompile`, in a process of its own (DYNEXPR_ISA set to
the job's level, compiling in the foreground into the configured cache):

    python -m dynexpr.artifacts.worker prepare OUT.json
    python -m dynexpr.artifacts.worker build OUT.json < SPEC.json

`prepare` builds the level's precompiled prelude and runtime library and says what the
toolchain is and which Highway target the level gives (Note [Highway 1.0.3 and ISA
levels] in isa.py). `build` makes the spec's arguments, calls the function captured with
the spec's options, checks the result against the plain function, and lists the units
the call needed. A job of its own per spec: a function that crashes the process or
leaves global state behind takes no other spec with it.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from typing import Any

import numpy as np


def load_function(spec: str):
    module, _, name = spec.partition(":")
    sys.path.insert(0, os.getcwd())
    obj = importlib.import_module(module)
    for part in name.split("."):
        obj = getattr(obj, part)
    return obj


def prepare() -> dict:
    from .. import cxx
    from . import isa

    t0 = time.perf_counter()
    tc = cxx.toolchain()
    _, rt = cxx.ensure_prelude_and_runtime()
    return {"ok": True, "isa": isa.current(), "flags": list(cxx.CXXFLAGS),
            "compiler": tc.version,
            "abi": tc.abi, "headers": tc.headers, "runtime": str(rt / cxx.RUNTIME_LIB),
            "hwy_target": hwy_target(), "seconds": time.perf_counter() - t0}


HWY_PROBE = """#include <dynexpr/core/config.hpp>
#include <hwy/highway.h>
#include <hwy/targets.h>
#include <cstdio>
int main() { std::puts(hwy::TargetName(HWY_STATIC_TARGET)); }
"""


def hwy_target() -> str:
    """The Highway static target units of this level are compiled for (a probe program
    compiled with the units' flags prints it)."""
    from .. import cxx
    from ..toolchain import run_tool, source_dirs, system_includes

    inc, _ = source_dirs()
    with tempfile.TemporaryDirectory() as d:
        src, exe = os.path.join(d, "probe.cpp"), os.path.join(d, "probe")
        with open(src, "w") as fh:
            fh.write(HWY_PROBE)
        cmd = [cxx.toolchain().cxx, *[f for f in cxx.CXXFLAGS if f != "-fPIC"], "-I", str(inc)]
        for s in system_includes():
            cmd += ["-isystem", s]
        cmd += [src, "-o", exe, "-lhwy"]
        proc = run_tool(cmd)
        if proc.returncode != 0:
            return f"unknown (the probe did not compile: {proc.stderr.strip()[-200:]})"
        try:
            run = run_tool([exe], timeout=30)
        except (OSError, subprocess.TimeoutExpired) as e:
            return f"unknown ({e})"
        if run.returncode != 0:  # e.g. SIGILL: this CPU cannot run the level
            return f"unknown (this CPU cannot run the probe: exit {run.returncode})"
        return run.stdout.strip()


# ----------------------------------------------------------------------------- build
def make_args(args: list[dict]) -> tuple[list, dict]:
    """The arguments a spec describes: arrays of its dtype, shape and layout (seeded
    random values; a dynamic dimension at its example extent, marked dynamic with its
    range), plain values as they are."""
    import dynexpr

    rng = np.random.default_rng(0)
    out = []
    for a in args:
        if "dtype" in a:
            dt = np.dtype(a["dtype"])
            shape = [d["example"] if isinstance(d, dict) else d for d in a["shape"]]
            layout = a.get("layout", "C")
            full = list(shape)
            if layout == "strided" and full:
                full[-1] *= 2
            if dt.kind == "f":
                x = rng.standard_normal(full).astype(dt)
            elif dt.kind == "c":
                x = (rng.standard_normal(full) + 1j * rng.standard_normal(full)).astype(dt)
            elif dt.kind == "b":
                x = rng.random(full) > 0.5
            else:
                x = rng.integers(1, 10, full).astype(dt)
            x = np.asarray(x)
            if layout == "F":
                x = np.asfortranarray(x)
            elif layout == "strided" and full:
                x = x[..., ::2]
            for axis, d in enumerate(a["shape"]):
                if isinstance(d, dict):
                    dynexpr.mark_dynamic(x, axis, min=d.get("min"), max=d.get("max"))
            out.append(x)
        elif a.get("none"):
            out.append(None)
        elif "value" in a:
            out.append(a["value"])
        else:
            raise ValueError(f"argument {a.get('name')!r} of type {a.get('type')} cannot be "
                             "made from the manifest (only arrays and plain values can)")
    return out, {}


def _copy(args: list) -> list:
    return [a.copy(order="K") if isinstance(a, np.ndarray) else a for a in args]


def _same(want: Any, got: Any) -> str | None:
    """Why got is not what the plain function returned, or None."""
    if isinstance(want, (tuple, list)):
        if not isinstance(got, (tuple, list)) or len(got) != len(want):
            return f"returned {type(got).__name__}, the plain function {type(want).__name__}"
        for w, g in zip(want, got):
            why = _same(w, g)
            if why:
                return why
        return None
    w, g = np.asarray(want), np.asarray(got)
    if w.dtype != g.dtype or w.shape != g.shape:
        return f"result {g.dtype}{list(g.shape)}, the plain function's {w.dtype}{list(w.shape)}"
    if w.dtype.kind in "fc":
        tol = 1e-4 if w.dtype.itemsize <= 4 else 1e-9
        ok = np.allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
    else:
        ok = np.array_equal(g, w)
    return None if ok else "the result differs from the plain function's"


def build(spec: dict) -> dict:
    import dynexpr
    from .. import cache
    from ..diagnostics import DynexprWarning
    from . import record, specs

    t0 = time.perf_counter()
    fn = load_function(spec["function"])
    plain = getattr(fn, "__dynexpr_wrapped__", fn)
    opts = {"backend": spec.get("backend", "cpu"), "mode": spec.get("mode", "default")}
    if "dynamic" in spec:
        opts["dynamic"] = spec["dynamic"]
    cf = dynexpr.capture(plain, **opts)
    args, kwargs = make_args(spec.get("args", []))
    want = plain(*_copy(args), **kwargs)
    before = dict(cache.stats)
    problems = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", DynexprWarning)
        got = cf(*args, **kwargs)
    for w in caught:
        if issubclass(w.category, DynexprWarning):
            problems.append(str(w.message).splitlines()[0])
    names = plain.__code__.co_varnames
    entries = cf.entries + cf._segments.all_entries()
    units: list[str] = []
    for e in entries:
        if e.reason is not None:
            problems.append(f"graph break: {e.reason}")
        keys = record.units_of(e.compiled)
        if keys is None:
            problems.append("an entry runs with NumPy, not a compiled unit")
        units += [k for k in keys or () if k not in units]
    why = _same(want, got)
    if why:
        problems.append(why)
    lost = [k for k in units if cache.lookup(k) is None]
    if lost:
        problems.append(f"units not in the cache after the call: {', '.join(lost)}")
    if not units and not problems:
        problems.append("the call compiled no unit (nothing to precompile)")
    bound = list(args)
    return {
        "ok": not problems, "problems": problems, "units": units,
        "compiles": cache.stats["compiles"] - before["compiles"],
        "compile_seconds": cache.stats["compile_seconds"] - before["compile_seconds"],
        "seconds": time.perf_counter() - t0,
        "guards": [specs.guard_record(g, names) for e in cf.entries for g in e.guards],
        "args": specs.arg_specs(bound, names[:len(bound)], [g for e in cf.entries
                                                               for g in e.guards]),
    }


def main(argv: list[str]) -> int:
    what, out = argv[0], argv[1]
    try:
        result = prepare() if what == "prepare" else build(json.load(sys.stdin))
    except BaseException as e:  # reported by precompile, naming the spec
        result = {"ok": False, "problems": [f"{type(e).__name__}: {e}"]}
    with open(out, "w") as fh:
        json.dump(result, fh)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
