"""Runs one generated program plainly and captured, and compares everything the capture
contract (CAPTURE.md) promises: result types, dtypes, shapes, values, the arguments it
mutates, and the type of the exception it raises.

Tolerance (floats). The op table (include/dynexpr/ops/) states at most 4 ulp for any
single op against the C library; the compiled kernels also contract a * b + c into one
fused multiply-add and sum in another order. A program chains up to a dozen ops, so a
value matches when it is within ULPS ulp of NumPy's, or within an absolute ULPS * eps *
scale * n, where scale is the largest finite magnitude the program produced on the way
(a cancellation loses digits relative to its operands, not to its result) and n the
longest reduction (summation order). A program with float32 rounding anywhere uses
float32's eps for every float result (a float64 result of float32 data carries float32
rounding). NaN must match NaN, and infinities their sign.
"""

from __future__ import annotations

import linecache
import os
import warnings

import numpy as np

import dynexpr

ULPS = 64
EPS = {"float32": float(np.finfo(np.float32).eps), "float64": float(np.finfo(np.float64).eps)}
STATS = {"programs": 0, "calls": 0, "raised": 0, "compiled": 0, "failures": 0}


def load(source: str, tag: str):
    """The function `f` defined by `source`, with its lines known to tracebacks."""
    filename = f"<dynexpr-fuzz-{tag}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    ns = {"np": np}
    exec(compile(source, filename, "exec"), ns)
    return ns["f"]


def _run(fn, args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        # NumPy's floating-point warnings are not compared (compiled kernels do not
        # raise them); that is the numerics work's subject, not this fuzzer's.
        warnings.simplefilter("ignore")
        try:
            return fn(*args), None
        except Exception as e:  # noqa: BLE001  compared by type below
            return None, e


def _close(expected: np.ndarray, got: np.ndarray, eps: float, atol: float) -> np.ndarray:
    e, g = expected.astype(np.float64), got.astype(np.float64)
    both_nan = np.isnan(e) & np.isnan(g)
    same = (e == g) | both_nan
    spacing = np.abs(np.spacing(expected.astype(expected.dtype))).astype(np.float64)
    ulp_tol = ULPS * np.maximum(spacing, eps * np.abs(e))
    with np.errstate(all="ignore"):
        near = np.isfinite(e) & np.isfinite(g) & (np.abs(e - g) <= np.maximum(ulp_tol, atol))
    return same | near


def compare(expected, got, path: str, prog) -> None:
    assert type(got) is type(expected), (
        f"{path}: type {type(got).__name__}, NumPy gives {type(expected).__name__}")
    if isinstance(expected, (tuple, list)):
        assert len(got) == len(expected), f"{path}: length {len(got)} != {len(expected)}"
        for i, (e, g) in enumerate(zip(expected, got)):
            compare(e, g, f"{path}[{i}]", prog)
        return
    if not isinstance(expected, (np.ndarray, np.generic)):
        assert got == expected or (got != got and expected != expected), (
            f"{path}: {got!r} != {expected!r}")
        return
    assert got.dtype == expected.dtype, f"{path}: dtype {got.dtype}, NumPy gives {expected.dtype}"
    assert np.shape(got) == np.shape(expected), (
        f"{path}: shape {np.shape(got)}, NumPy gives {np.shape(expected)}")
    e, g = np.asarray(expected), np.asarray(got)
    if e.dtype.kind != "f":
        bad = e != g
    else:
        eps = EPS["float32" if prog.loose else e.dtype.name]
        bad = ~_close(e, g, eps, ULPS * eps * prog.scale * prog.red_n)
    if np.any(bad):
        idx = np.argwhere(bad)[:5] if e.ndim else [()]
        shown = ", ".join(f"{tuple(int(j) for j in i)}: {g[tuple(i)]!r} vs NumPy {e[tuple(i)]!r}"
                          for i in idx)
        raise AssertionError(f"{path}: {int(np.sum(bad))} of {e.size} values differ: {shown}")


def check_program(prog, tag: str = "0", backend: str = "cpu") -> None:
    """Plain vs captured on input sets 0 and 1 (set 1 is a cache hit on the native fast
    path), then on a second base shape when the program asks for it (a dimension seen
    with two extents becomes dynamic: a recompile)."""
    STATS["programs"] += 1
    fn = load(prog.source, tag)
    dynexpr.reset()  # the accumulated recompile limit counts over all programs
    captured = dynexpr.capture(fn, backend=backend)
    sets = [(0, None, False), (1, None, False)]
    if prog.resize:
        sets.append((2, tuple(d + 3 for d in prog.base), False))
    if prog.flip:
        sets.append((3, None, True))
    try:
        for which, base, flip in sets:
            # Two identical sets (layouts and aliases as drawn, unlike a deepcopy).
            plain_args = prog.inputs(which, base, flip)
            cap_args = prog.inputs(which, base, flip)
            expected, e_exc = _run(fn, plain_args)
            got, g_exc = _run(captured, cap_args)
            STATS["calls"] += 1
            where = (f"input set {which}" + (f" (base shape {base})" if base else "")
                     + (" (layouts flipped, arguments aliased)" if flip else ""))
            if e_exc is not None or g_exc is not None:
                STATS["raised"] += 1
                assert type(e_exc) is type(g_exc), (
                    f"{where}: NumPy raises {type(e_exc).__name__}: {e_exc}; captured "
                    f"{'returns' if g_exc is None else 'raises ' + type(g_exc).__name__}: "
                    f"{g_exc if g_exc is not None else got!r}")
            else:
                compare(expected, got, f"{where}: result", prog)
            for name, e, g in zip("abc", plain_args, cap_args):
                compare(e, g, f"{where}: argument {name} after the call", prog)
        if any(e.compiled is not None for e in captured.entries):
            STATS["compiled"] += 1
    except AssertionError as err:
        STATS["failures"] += 1
        raise AssertionError(f"{err}\n--- program ({prog.describe()}) ---\n{prog.source}") from None
    finally:
        _log_progress()


def _log_progress() -> None:
    """With DYNEXPR_FUZZ_LOG set, the counts so far go to that file (a long run's
    progress can be read while it runs)."""
    path = os.environ.get("DYNEXPR_FUZZ_LOG")
    if path and STATS["programs"] % 10 == 0:
        with open(path, "a") as fh:
            fh.write(f"pid={os.getpid()} " + " ".join(f"{k}={v}" for k, v in STATS.items()) + "\n")
